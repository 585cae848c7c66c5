"""The Curation page in AppTest, on a copy of the pristine demo data dir (its actions change the graph)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import app_state
from retrieval.config import Settings
from retrieval.embedding import Embedder
from retrieval.graph import catalog
from retrieval.graph.runtime import KG
from tests.app.conftest import APP
from tests.app.graphs import build_app_data_dir

PAIR = '"last-click-attribution", "multi-touch-attribution"'  # the demo's third duplicate candidate


@pytest.fixture
def own_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory, embedder: Embedder,
            tmp_path: Path, own_caches: None) -> Path:
    data_dir = tmp_path / "kg"
    shutil.copytree(build_app_data_dir(tmp_path_factory, embedder, pristine=True), data_dir, symlinks=True)
    monkeypatch.setenv("KG_DATA_DIR", str(data_dir))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    return data_dir


def test_a_merge_form_keeps_what_the_analyst_wrote_when_a_pair_above_it_leaves_the_list(own_env: Path) -> None:
    """Found by the browser test of the GraphRAG index: each merge form was keyed by its place in the list, so when
    a pair above it left (merged, batched, not duplicates) its widgets became new ones: the description being edited
    went back to the default, and a click landing during that run was lost."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("pages/curation.py").run()
    mine = next(t for t in at.text_area if t.key and PAIR in t.key)
    mine.input("The analyst's own wording of the merged description.").run()
    first = next(b for b in at.button if b.key and b.key.endswith("-not"))
    assert PAIR not in str(first.key)
    first.click().run()
    assert "not duplicates" in " ".join(s.value for s in at.success)
    kept = [t.value for t in at.text_area if t.key and PAIR in t.key]
    assert kept == ["The analyst's own wording of the merged description."], kept
    next(b for b in at.button if b.key and PAIR in b.key and b.key.endswith("-merge")).click().run()
    assert not at.exception and any("merge" in s.value for s in at.success), [s.value for s in at.success]


def test_the_curator_edits_the_graph_that_is_open_not_one_opened_before_it(
    own_env: Path, app_data_dir: Path
) -> None:
    """Found when the merge of the test above landed in another data dir's `demo`: the curator was cached by graph
    name and version only, so it kept the first KG opened under them. On a server that is the KG closed when more
    than four graphs have been opened (the open-graph cache keeps four): edits went to a closed graph; in one test
    process it is another data dir's copy of the same version."""
    def opened(data_dir: Path) -> KG:
        return app_state.open_kg(Settings.from_env(env={}, data_dir=data_dir), catalog.resolve(data_dir, "demo"))

    def graph_reranker(kg: KG) -> object:
        cfg = Settings.from_env(env={}, data_dir=kg.settings.data_dir)
        return app_state.rerankers(cfg, kg, 0.7, 0.5).rerankers["graph"].graph  # type: ignore[attr-defined]

    shared, own = opened(app_data_dir), opened(own_env)
    assert shared is not own
    assert app_state.curator(shared).kg is shared and app_state.curator(own).kg is own
    assert graph_reranker(shared) is shared and graph_reranker(own) is own
    app_state._open_kg.clear()  # as the cache lets them go: the KGs are closed
    again = opened(own_env)
    assert again is not own and app_state.curator(again).kg is again and graph_reranker(again) is again
