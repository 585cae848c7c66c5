"""Bring your own graph, end to end on the real stores: the issue's Must-show commands on the shared GraphRAG index
(ingest, stats --json, communities, a search whose sources name book and chapter), and a graph without any text
(a CSV export) answering on every page's engine calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from retrieval.cli import communities as communities_cli
from retrieval.cli import data as data_cli
from retrieval.cli import search as search_cli
from retrieval.config import Settings
from retrieval.embedding import Embedder
from retrieval.graph.runtime import open_kg
from retrieval.graph.stats import graph_stats
from retrieval.graph.traverse import k_shortest_paths, resolve_entity
from retrieval.ingest.build import ingest
from retrieval.search.modes import MODES, NO_TEXT, TEXT_MODES, run_mode
from tests.conftest import DULCE, ROOT

pytestmark = pytest.mark.integration
MOVIES = ROOT / "tests" / "data" / "csv" / "movies"
QUESTION = "What is Alex Mercer's role in Operation: Dulce?"


def cli() -> typer.Typer:
    app = typer.Typer()
    for module in (data_cli, communities_cli, search_cli):
        module.register(app)
    return app


def run(*args: str) -> str:
    out = CliRunner().invoke(cli(), list(args), env={"HF_HUB_OFFLINE": "1"})
    assert out.exit_code == 0, out.output
    return out.stdout


def test_graphrag_must_show(dulce_data_dir: Path) -> None:
    dd = ("--data-dir", str(dulce_data_dir))
    stats = json.loads(run("stats", "--json", *dd))
    assert (stats["books"], stats["chunks"], stats["entities"], stats["relations"]) == (1, 5, 41, 107)
    assert stats["communities"] == 10
    assert stats["chapter_names"] == {"dulce.txt": ["Chapter 1", "Chapter 2", "Chapter 3"]}
    listed = json.loads(run("communities", "--json", *dd))
    assert listed["count"] == 10 and [c["level"] for c in listed["communities"]] == [0] * 7 + [1] * 3
    assert len(listed["unattached_claims"]) == 7 and all(c["subject_id"] is None for c in listed["unattached_claims"])
    top = [c["rank"] for c in listed["communities"] if c["level"] == 0]
    assert top == sorted(top, reverse=True)  # by level, then rank
    assert json.loads(run("communities", "--level", "1", "--json", *dd))["count"] == 3
    assert "claims without an entity (7:" in run("communities", *dd)
    text = run("communities", "--entity", "ALEX MERCER", *dd)
    assert "ALEX MERCER (PERSON" in text and "claim: ALEX MERCER [MENTORSHIP, TRUE] SAM RIVERA" in text
    bad = CliRunner().invoke(cli(), ["communities", "--level", "4", *dd])
    assert bad.exit_code == 2 and "no communities at level 4; levels: 0, 1" in bad.output
    result = json.loads(run("search", QUESTION, "--json", *dd))
    sources = [s for f in result["facts"] for s in f["sources"]]
    assert sources and all(s["original_document"] == "dulce.txt" for s in sources)
    assert {s["chapter"] for s in sources} <= {"Chapter 1", "Chapter 2", "Chapter 3"} and all(
        s["chapter"] for s in sources)
    assert any("ALEX MERCER" in f["text"] for f in result["facts"][:3])
    again = run("ingest", str(DULCE), "--format", "graphrag", "--name", "dulce", "--no-progress", *dd)
    assert again.startswith("unchanged graph 'dulce'")  # idempotent: same content, no rebuild


def test_a_graph_without_text_answers_in_every_mode(tmp_path: Path, embedder: Embedder) -> None:
    settings = Settings.from_env(env={}, data_dir=tmp_path / "kg")
    report = ingest(settings, MOVIES, fmt="auto", name="movies", embedder=embedder, progress=False)
    assert report.counts["chunks"] == 0 and report.counts["communities"] >= 1
    kg = open_kg(settings, "movies", embedder)
    try:
        for mode in MODES:
            result = run_mode(kg, mode, "Who acted in The Matrix?", limit=5)
            assert (NO_TEXT in result.warnings) == (mode in TEXT_MODES), mode
            if mode in ("kg", "graph"):
                assert any("ACTED_IN" in f.text for f in result.facts) and not any(f.sources for f in result.facts)
        keanu = resolve_entity(kg.graph, "Keanu Reeves")
        lana = resolve_entity(kg.graph, "Lana Wachowski")
        paths = k_shortest_paths(kg.index, keanu.id, lana.id, k=2, details=kg.graph, vectors=kg.vectors)
        assert paths.paths and paths.paths[0].hops == 2 and paths.paths[0].sources == ()
        stats = graph_stats(kg.handle, kg.graph, kg.vectors)
        assert (stats.books, stats.chunks, stats.chapter_names) == (0, 0, {})
        assert {e for c in kg.communities.communities for e in c.entity_ids} >= {keanu.id, lana.id}
    finally:
        kg.close()
