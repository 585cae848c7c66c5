"""AppTest tier: pages run in-process against a tmp data dir holding the demo graph (built once per session)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st

from retrieval.embedding import Embedder
from tests.app.graphs import build_app_data_dir

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")


@pytest.fixture(scope="session")
def app_data_dir(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Path:
    return build_app_data_dir(tmp_path_factory, embedder)


@pytest.fixture
def app_env(monkeypatch: pytest.MonkeyPatch, app_data_dir: Path) -> Path:
    """Environment the app reads through Settings.from_env: the shared data dir, no Gemini key, hub offline."""
    monkeypatch.setenv("KG_DATA_DIR", str(app_data_dir))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("KG_GRAPH", raising=False)
    return app_data_dir


@pytest.fixture
def empty_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A fresh, empty data dir (for the no-graph state and imports)."""
    data_dir = tmp_path / "kg"
    monkeypatch.setenv("KG_DATA_DIR", str(data_dir))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("KG_GRAPH", raising=False)
    return data_dir


def clear_caches() -> None:
    """Forget every cached graph and result. The app's caches key results on a graph's name and revision, which is
    unique within a data dir (a server has one) but not across the copies of the demo data dir that tests edit: a
    copy's `demo` after one merge and the shared dir's after one edit are both revision `<version>+1`."""
    st.cache_resource.clear()  # closes the graphs it held
    st.cache_data.clear()


@pytest.fixture
def own_caches() -> Iterator[None]:
    """For a test on a data dir of its own that changes a graph: no result of another dir's is served to it, and
    none of its results is left for the tests after it."""
    clear_caches()
    yield
    clear_caches()
