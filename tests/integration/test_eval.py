"""`python -m retrieval eval` on a small slice of the MuSiQue benchmark (real ingest, MiniLM, Kuzu, Milvus Lite)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from retrieval.cli.search import register
from retrieval.passage_rank import recall_scores, rrf
from tests.conftest import MUSIQUE

pytestmark = [pytest.mark.integration, pytest.mark.slow]
N_QUESTIONS = 2


@pytest.fixture(scope="module")
def slice_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first questions of MuSiQue with only their own 20 candidate passages as the corpus."""
    questions = json.loads((MUSIQUE / "musique_train.json").read_text())[:N_QUESTIONS]
    corpus = json.loads((MUSIQUE / "musique_train_corpus.json").read_text())
    openie = json.loads(next(MUSIQUE.glob("openie_*.json")).read_text())
    wanted = {(p["title"], p["paragraph_text"]) for q in questions for p in q["paragraphs"]}
    keep = [i for i, c in enumerate(corpus) if (c["title"], c["text"]) in wanted]
    out = tmp_path_factory.mktemp("bench") / "musique_slice"
    out.mkdir()
    (out / "musique_slice.json").write_text(json.dumps(questions))
    (out / "musique_slice_corpus.json").write_text(json.dumps([corpus[i] for i in keep]))
    (out / "openie_musique_slice.json").write_text(json.dumps({"docs": [openie["docs"][i] for i in keep]}))
    return out


def test_recall_definition() -> None:
    rankings = [["a", "x", "b"], ["y", "z", "c"]]
    recall, all_recall = recall_scores(rankings, [["a", "b"], ["c"]], [1, 2, 3])
    assert recall == {1: 0.25, 2: 0.25, 3: 1.0}
    assert all_recall == {1: 0.0, 2: 0.0, 3: 1.0}
    assert rrf(["a", "b"], ["b", "c"])[0] == "b"


def test_eval_cli_reports_every_mode_and_reuses_the_graph(slice_dir: Path, tmp_path: Path) -> None:
    app = typer.Typer()
    register(app)
    runner = CliRunner()
    args = ["eval", str(slice_dir), "--format", "hipporag", "--k", "2,5", "--json", "--data-dir", str(tmp_path / "ev")]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    report = json.loads(first.stdout)
    assert report["queries"] == N_QUESTIONS and report["reused"] is False
    modes = {m["mode"]: m for m in report["modes"]}
    assert set(modes) == {"bm25", "dense", "ppr", "fused", "graph"}
    for m in modes.values():
        assert 0.0 <= m["recall"]["2"] <= m["recall"]["5"] <= 1.0
        assert m["all_recall"]["5"] <= m["recall"]["5"]
    # 40 passages: the graph modes find most gold passages in the top 5
    assert modes["graph"]["recall"]["5"] >= 0.5 and modes["dense"]["recall"]["5"] >= 0.5
    again = runner.invoke(app, args)
    assert again.exit_code == 0 and json.loads(again.stdout)["reused"] is True
    bad = runner.invoke(app, ["eval", str(slice_dir), "--modes", "bm25,nope", "--data-dir", str(tmp_path / "ev")])
    assert bad.exit_code == 2 and "unknown mode" in bad.output
