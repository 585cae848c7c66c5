"""`python -m retrieval eval` on a small slice of the MuSiQue benchmark (real ingest, MiniLM, Kuzu, Milvus Lite)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from retrieval.cli.search import register
from retrieval.config import Settings
from retrieval.embedding import Embedder
from retrieval.evaluation.passage_rank import (
    EVAL_MODES,
    SEARCH_MODES,
    cited_passages,
    evaluate,
    load_hipporag_queries,
    rank_by_search,
    rank_passages,
    recall_scores,
    rrf,
)
from retrieval.graph.runtime import open_kg
from retrieval.ingest.load import load_data
from retrieval.models import SearchResult, VerbalizedFact
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


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


@pytest.fixture(scope="module")
def first_eval(slice_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """`eval` (default modes) on a fresh data directory: it ingests the slice; later tests re-use that graph."""
    data_dir = tmp_path_factory.mktemp("ev")
    res = CliRunner().invoke(_app(), ["eval", str(slice_dir), "--format", "hipporag", "--k", "2,5", "--json",
                                      "--data-dir", str(data_dir)])
    assert res.exit_code == 0, res.output
    return data_dir, json.loads(res.stdout)


@pytest.fixture(scope="module")
def slice_graph(first_eval: tuple[Path, dict[str, Any]]) -> Path:
    """The data directory holding the ingested slice (treat as read-only)."""
    return first_eval[0]


def test_recall_definition() -> None:
    rankings = [["a", "x", "b"], ["y", "z", "c"]]
    recall, all_recall = recall_scores(rankings, [["a", "b"], ["c"]], [1, 2, 3])
    assert recall == {1: 0.25, 2: 0.25, 3: 1.0}
    assert all_recall == {1: 0.0, 2: 0.0, 3: 1.0}
    assert rrf(["a", "b"], ["b", "c"])[0] == "b"


def test_eval_cli_reports_every_mode_and_reuses_the_graph(slice_dir: Path,
                                                         first_eval: tuple[Path, dict[str, Any]]) -> None:
    app = _app()
    runner = CliRunner()
    data_dir, report = first_eval
    args = ["eval", str(slice_dir), "--format", "hipporag", "--k", "2,5", "--json", "--data-dir", str(data_dir)]
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
    bad = runner.invoke(app, ["eval", str(slice_dir), "--modes", "bm25,nope", "--data-dir", str(data_dir)])
    assert bad.exit_code == 2 and "unknown mode" in bad.output


def test_cited_passages_keep_result_order_and_first_citation() -> None:
    facts = tuple(VerbalizedFact(id=str(i), type="local", text="t", chunk_ids=c)
                  for i, c in enumerate([("c3", "c1"), ("c1", "c2"), (), ("c4", "c3")]))
    assert cited_passages(SearchResult(query="q", facts=facts)) == ["c3", "c1", "c2", "c4"]


def test_every_search_mode_ranks_cited_passages(slice_dir: Path, slice_graph: Path, embedder: Embedder) -> None:
    kg = open_kg(Settings.from_env(env={}, data_dir=slice_graph), embedder=embedder)
    try:
        queries = load_hipporag_queries(slice_dir, load_data(slice_dir, "hipporag"))
        questions = [q.question for q in queries]
        dense = rank_passages(kg, questions, ["dense"])["dense"]
        rankings = {m: rank_by_search(kg, questions, m, limit=5) for m in SEARCH_MODES}
        scores = {s.mode: s for s in evaluate(kg, queries, list(SEARCH_MODES), ks=(2, 5, 10), limit=5)}
    finally:
        kg.close()
    corpus = set(dense[0])  # the dense ranker ranks every passage
    for mode, ranking in rankings.items():
        assert len(ranking) == N_QUESTIONS
        for ranked in ranking:
            assert ranked and len(ranked) == len(set(ranked)) and set(ranked) <= corpus, mode
    # the vector tool asked for 5 results cites exactly the dense ranker's top 5; dual and comprehensive put
    # those same document chunks first
    assert rankings["vector"] == [d[:5] for d in dense]
    for mode in ("dual", "comprehensive"):
        assert [r[:5] for r in rankings[mode]] == rankings["vector"], mode
    # `graph_tool` is the KG retriever with default parameters, as `kg` is
    assert rankings["graph_tool"] == rankings["kg"]
    assert set(scores) == set(SEARCH_MODES)
    for mode, s in scores.items():
        assert s.ranked == pytest.approx(sum(map(len, rankings[mode])) / N_QUESTIONS), mode
        assert 0.0 <= s.recall[2] <= s.recall[5] <= s.recall[10] <= 1.0
    # unpadded: asked for 5, the vector tool ranks 5 passages, so its R@10 stays its R@5
    assert scores["vector"].ranked == 5 and scores["vector"].recall[10] == scores["vector"].recall[5]
    assert scores["vector"].recall[5] >= 0.5


def test_eval_cli_all_modes_and_bench_uses_the_benchmark_questions(slice_dir: Path, slice_graph: Path) -> None:
    runner = CliRunner()
    args = ["eval", str(slice_dir), "--modes", "all", "--k", "2,5,10", "--json", "--data-dir", str(slice_graph)]
    res = runner.invoke(_app(), args)
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["reused"] is True and report["search_limit"] == 10
    modes = {m["mode"]: m for m in report["modes"]}
    assert list(modes) == list(EVAL_MODES)
    assert {m for m, v in modes.items() if v["kind"] == "search"} == set(SEARCH_MODES)
    assert all(set(v["recall"]) == {"2", "5", "10"} for v in modes.values())
    assert modes["vector"]["recall"] == modes["dense"]["recall"]  # limit 10: the dense top 10
    text = runner.invoke(_app(), ["eval", str(slice_dir), "--modes", "dense,graph_tool", "--k", "2",
                                  "--data-dir", str(slice_graph)])
    assert text.exit_code == 0, text.output
    assert "graph_tool     search" in text.stdout and "dense          ranker" in text.stdout
    assert "not padded" in text.stdout

    bench = runner.invoke(_app(), ["bench", "--data-dir", str(slice_graph), "--modes", "vector", "--limit", "1",
                                   "--json"])
    assert bench.exit_code == 0, bench.output
    out = json.loads(bench.stdout)
    assert out["queries"] == 1 and out["query_set"] == f"the benchmark questions of {slice_dir.resolve()}"
    assert [m["mode"] for m in out["modes"]] == ["vector"] and out["stages"] == []
