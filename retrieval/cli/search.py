"""CLI: `search` (the KG retriever), `eval` (passage Recall@k on a benchmark), `bench` (latency per mode)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer

from retrieval.cli.common import DataDirOpt, cli_errors, echo_json, settings_from
from retrieval.config import DEMO_QUESTIONS, Settings
from retrieval.errors import ValidationError

GraphOpt = typer.Option(None, "--graph", help="Graph name (default: the active graph)")
EvalDirOpt = typer.Option(None, "--data-dir", help="Where the benchmark graph is kept (default data/eval/"
                          "<folder name>; re-used, rebuilt only when the input changed)")
WARM_UP = "warm-up: build the in-memory indexes"
BENCH_LIMIT = 10  # results asked of every mode, as the search command's default


def _ints(text: str, what: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise ValidationError(f"{what} must be comma-separated integers, got {text!r}") from exc
    if not values or any(v < 1 for v in values):
        raise ValidationError(f"{what} must be positive integers, got {text!r}")
    return values


def _names(text: str, valid: Sequence[str], what: str) -> list[str]:
    """Comma-separated names, each one of `valid` ("all" = every one of them)."""
    wanted = list(valid) if text.strip() == "all" else [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in wanted if m not in valid]
    if bad or not wanted:
        raise ValidationError(f"unknown {what} {', '.join(bad) or '(none)'}; valid: {', '.join(valid)} or all")
    return list(dict.fromkeys(wanted))


def bench_questions(handle_source: str, limit: int | None) -> tuple[str, list[str]]:
    """The fixed query set and its description: a HippoRAG graph's own questions, else the demo questions."""
    source = Path(handle_source) if handle_source else None
    if source is not None and source.is_dir() and any(source.glob("openie_*.json")):
        from retrieval.evaluation.passage_rank import load_hipporag_queries
        from retrieval.ingest.load import load_data

        what = f"the benchmark questions of {source}"
        questions = [q.question for q in load_hipporag_queries(source, load_data(source, "hipporag"))]
    else:
        what = f"the demo questions ({DEMO_QUESTIONS.name})"
        questions = [q["question"] for q in json.loads(DEMO_QUESTIONS.read_text(encoding="utf-8"))]
    return what, questions[:limit] if limit else questions


def bench_modes(settings: Settings, graph: str | None, modes: Sequence[str], limit: int | None) -> dict[str, Any]:
    """End-to-end p50/p95 of each search mode (and the KG pipeline's stages) over the fixed query set.

    Each mode runs on a freshly opened graph after one warm-up query, so no mode is served from the
    query and fact vectors another mode cached; the embedding model is loaded once.
    """
    from bench.scale import _timed_runs
    from retrieval.embedding import load_embedder
    from retrieval.graph import catalog
    from retrieval.graph.runtime import open_kg
    from retrieval.search.modes import run_mode

    handle = catalog.resolve(settings.data_dir, graph or settings.graph_name or None)
    query_set, questions = bench_questions(str(handle.manifest.get("source", "")), limit)
    out: dict[str, Any] = {"graph": handle.name, "version": handle.version, "queries": len(questions),
                           "query_set": query_set, "modes": [], "stages": []}
    embedder = load_embedder(settings.embed_model)
    out["embedder"] = f"{type(embedder).__name__} {embedder.name}"
    for mode in modes:
        kg = open_kg(settings, handle.name, embedder)
        try:
            t = time.perf_counter()
            run_mode(kg, mode, WARM_UP, limit=BENCH_LIMIT, settings=settings)
            warm_s = time.perf_counter() - t
            runs = _timed_runs(questions, partial(run_mode, kg, mode, limit=BENCH_LIMIT, settings=settings))
        finally:
            kg.close()
        out["modes"].append({"mode": mode, **runs["e2e"], "warm_up_s": warm_s,
                             "empty_results": runs["empty_results"], "warnings": runs["warnings"]})
        if mode == "kg":
            out["stages"] = [{"stage": stage, **v} for stage, v in runs["stages"].items()]
    return out


def register(app: typer.Typer) -> None:
    @app.command("search")
    def search_cmd(
        query: Annotated[str, typer.Argument(help="The question")],
        as_json: bool = typer.Option(False, "--json", help="Print the SearchResult as JSON"),
        max_results: int = typer.Option(10, "--max-results", help="Facts returned (1-50)"),
        max_hops: int = typer.Option(None, "--max-hops", help="Path length (1-4; default: 2 for relationship queries)"),
        rerank: str = typer.Option("mmr", "--rerank", help="mmr | llm | none"),
        mode: str = typer.Option("kg", "--mode", help="kg | vector | graph | hybrid | comprehensive | dual | multidoc"),
        limit: int = typer.Option(None, "--limit", help="Results for the non-KG modes (1-50; default --max-results)"),
        text_weight: float = typer.Option(0.3, "--text-weight", help="BM25 weight in hybrid mode (0.0-1.0)"),
        data_dir: Path = DataDirOpt,
        graph: str = GraphOpt,
    ) -> None:
        """Search the knowledge graph; prints the agent Markdown (or --json)."""
        from retrieval.graph.runtime import open_kg
        from retrieval.models import SearchParams
        from retrieval.search.modes import MODES, run_mode, to_text
        from retrieval.search.tools import HybridParams
        from retrieval.search.verbalize import to_markdown

        settings = settings_from(data_dir)
        with cli_errors():
            if mode not in MODES:
                raise ValidationError(f"unknown mode {mode!r}; valid: {', '.join(MODES)}")
            params = SearchParams.model_validate({"max_results": max_results, "max_hops": max_hops, "rerank": rerank})
            n = max_results if limit is None else limit
            HybridParams.model_validate({"query": query, "limit": n, "text_weight": text_weight})
            kg = open_kg(settings, graph)
            try:
                result = run_mode(kg, mode, query, limit=n, text_weight=text_weight, params=params, settings=settings)
            finally:
                kg.close()
        if as_json:
            echo_json(result)
        else:
            typer.echo(to_markdown(result) if mode == "kg" else to_text(result), nl=False)

    @app.command("eval")
    def eval_cmd(
        path: Annotated[Path, typer.Argument(help="Benchmark folder (HippoRAG: corpus, openie_*, questions; "
                                             "documents: the passages as documents beside the questions)")],
        fmt: str = typer.Option("hipporag", "--format", help="hipporag (the OpenIE graph) | documents (a graph "
                                "built from the passages by the documents reader; gold matched on title + text)"),
        modes: str = typer.Option(",".join(("bm25", "dense", "ppr", "fused", "graph")), "--modes",
                                  help="Comma-separated modes or `all`: passage rankers bm25, dense, ppr, fused, "
                                  "graph; search modes vector, hybrid, kg, graph_tool, comprehensive, dual, "
                                  "multidoc (ranked by the passages their results cite)"),
        ks: str = typer.Option("2,5,10", "--k", help="Comma-separated cut-offs"),
        limit: int = typer.Option(None, "--limit", help="Results asked of each search mode (1-50; default max k)"),
        as_json: bool = typer.Option(False, "--json", help="Print JSON"),
        data_dir: Path = EvalDirOpt,
    ) -> None:
        """Ingest a benchmark (once) and print passage Recall@k and AR@k per mode."""
        from retrieval.embedding import load_embedder
        from retrieval.evaluation.passage_rank import (
            EVAL_MODES,
            MAX_SEARCH_LIMIT,
            SEARCH_MODES,
            evaluate,
            load_hipporag_queries,
        )
        from retrieval.graph.runtime import open_kg
        from retrieval.ingest import IngestOptions
        from retrieval.ingest.build import build_graph
        from retrieval.ingest.load import default_name, load_data

        with cli_errors():
            if fmt not in ("hipporag", "documents"):
                raise ValidationError(f"unknown benchmark format {fmt!r}; valid: hipporag, documents")
            cut = _ints(ks, "--k")
            wanted = _names(modes, EVAL_MODES, "mode(s)")
            n = limit or min(max(cut), MAX_SEARCH_LIMIT)
            if not 1 <= n <= MAX_SEARCH_LIMIT:
                raise ValidationError(f"--limit must be 1-{MAX_SEARCH_LIMIT}, got {n}")
            name = default_name(path)
            settings = settings_from(data_dir or Path("data/eval") / name)
            data = load_data(path, fmt, IngestOptions(settings=settings))
            queries = load_hipporag_queries(path, data)
            embedder = load_embedder(settings.embed_model)
            t = time.perf_counter()
            report = build_graph(settings, data, name, embedder=embedder, progress=not as_json,
                                 source=str(path.resolve()))  # bench finds the questions from any directory
            ingest_s = time.perf_counter() - t
            kg = open_kg(settings, name, embedder)
            try:
                scores = evaluate(kg, queries, wanted, cut, limit=n)
            finally:
                kg.close()
        if as_json:
            echo_json({
                "graph": name, "version": report.version, "queries": len(queries), "reused": report.unchanged,
                "search_limit": n,
                "modes": [{"mode": s.mode, "kind": "search" if s.mode in SEARCH_MODES else "ranker",
                           "recall": s.recall, "all_recall": s.all_recall, "ranked": s.ranked, "seconds": s.seconds}
                          for s in scores],
            })
            return
        what = "re-used" if report.unchanged else f"built in {ingest_s:.0f} s"
        typer.echo(f"{name}: {len(queries)} queries, graph version {report.version} ({what})")
        if any(m in SEARCH_MODES for m in wanted):
            typer.echo(f"rankers rank every passage; search modes (limit {n}) rank only the passages their "
                       "results cite, in result order, not padded (ranked = mean passages per query)")
        head = " ".join(f"{'R@' + str(k):>6}" for k in cut) + " " + " ".join(f"{'AR@' + str(k):>6}" for k in cut)
        typer.echo(f"{'mode':<14} {'kind':<7} {head} {'ranked':>7} {'time':>7}")
        for s in scores:
            cells = " ".join(f"{100 * s.recall[k]:6.1f}" for k in cut) + " "
            cells += " ".join(f"{100 * s.all_recall[k]:6.1f}" for k in cut)
            kind = "search" if s.mode in SEARCH_MODES else "ranker"
            typer.echo(f"{s.mode:<14} {kind:<7} {cells} {s.ranked:7.1f} {s.seconds:6.1f}s")

    @app.command("bench")
    def bench_cmd(
        data_dir: Path = DataDirOpt,
        graph: str = GraphOpt,
        limit: int = typer.Option(None, "--limit", help="Use only the first N questions"),
        as_json: bool = typer.Option(False, "--json", help="Print JSON"),
        modes: str = typer.Option("all", "--modes", help="Comma-separated search modes: kg, vector, graph, "
                                  "hybrid, comprehensive, dual, multidoc (default all)"),
        scale: bool = typer.Option(False, "--scale", help="Scale benchmark: synthetic 10k/100k/1M relations on "
                                   "every back-end pair (bench.scale); --data-dir/--graph are ignored"),
        sizes: str = typer.Option("10k,100k,1m", "--sizes", help="--scale: relation counts (entities, chunks /10)"),
        pairs: str = typer.Option(",".join(("kuzu+milvus-lite", "falkordb+milvus-server")), "--pairs",
                                  help="--scale: back-end pairs"),
        out: Annotated[Path | None, typer.Option("--out", help="--scale: also write the JSON report here")] = None,
        work_dir: Annotated[Path, typer.Option("--work-dir", help="--scale: bundles, data, servers")] = Path(
            "data/scale"),
        readme: Annotated[Path | None, typer.Option("--readme", help="Print the README tables of a --scale JSON "
                                                    "report")] = None,
    ) -> None:
        """p50/p95 end to end per search mode, and per stage of kg, over a fixed query set (no LLM).

        The query set: the benchmark's questions for a graph ingested from a HippoRAG folder, else the
        demo questions. Each mode gets a freshly opened graph and one warm-up query first.
        """
        if scale or readme:
            from bench.scale import cli_scale

            with cli_errors():
                cli_scale(sizes, pairs, work_dir, out, readme, as_json, limit)
            return
        from retrieval.search.modes import MODES

        settings = settings_from(data_dir).with_(gemini_api_key="")
        with cli_errors():
            report = bench_modes(settings, graph, _names(modes, MODES, "mode(s)"), limit)
        if as_json:
            echo_json(report)
            return
        typer.echo(f"graph {report['graph']} version {report['version']}: {report['queries']} queries "
                   f"({report['query_set']}), limit {BENCH_LIMIT}, no LLM, {report['embedder']}")
        typer.echo(f"{'mode':<14} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8} {'warm-up s':>10}")
        for r in report["modes"]:
            typer.echo(f"{r['mode']:<14} {r['p50_ms']:8.1f} {r['p95_ms']:8.1f} {r['mean_ms']:8.1f} "
                       f"{r['warm_up_s']:10.2f}")
        if report["stages"]:
            typer.echo("\nkg stages")
            typer.echo(f"{'stage':<14} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8}")
            for r in report["stages"]:
                typer.echo(f"{r['stage']:<14} {r['p50_ms']:8.1f} {r['p95_ms']:8.1f} {r['mean_ms']:8.1f}")
