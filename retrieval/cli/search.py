"""CLI: `search` (the KG retriever), `eval` (passage Recall@k on a benchmark), `bench` (stage latencies)."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from retrieval.cli.common import DataDirOpt, cli_errors, echo_json, settings_from
from retrieval.errors import ValidationError

GraphOpt = typer.Option(None, "--graph", help="Graph name (default: the active graph)")
EvalDirOpt = typer.Option(None, "--data-dir", help="Where the benchmark graph is kept (default data/eval/"
                          "<folder name>; re-used, rebuilt only when the input changed)")
DEMO_QUESTIONS = Path(__file__).resolve().parents[2] / "data" / "demo" / "questions.json"


def _ints(text: str, what: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise ValidationError(f"{what} must be comma-separated integers, got {text!r}") from exc
    if not values or any(v < 1 for v in values):
        raise ValidationError(f"{what} must be positive integers, got {text!r}")
    return values


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else 0.0


def bench_questions(handle_source: str, limit: int | None) -> list[str]:
    """The fixed query set: a HippoRAG graph's own questions, else the demo questions."""
    source = Path(handle_source) if handle_source else None
    if source is not None and source.is_dir() and any(source.glob("openie_*.json")):
        from retrieval.ingest.build import load_data
        from retrieval.passage_rank import load_hipporag_queries

        questions = [q.question for q in load_hipporag_queries(source, load_data(source, "hipporag"))]
    else:
        questions = [q["question"] for q in json.loads(DEMO_QUESTIONS.read_text(encoding="utf-8"))]
    return questions[:limit] if limit else questions


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
        from retrieval.models import SearchParams
        from retrieval.modes import MODES, run_mode, to_text
        from retrieval.runtime import open_kg
        from retrieval.tools import HybridParams
        from retrieval.verbalize import to_markdown

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
        path: Annotated[Path, typer.Argument(help="Benchmark folder (HippoRAG: corpus, openie_*, questions)")],
        fmt: str = typer.Option("hipporag", "--format", help="Benchmark format (hipporag)"),
        modes: str = typer.Option(",".join(("bm25", "dense", "ppr", "fused", "graph")), "--modes",
                                  help="Comma-separated ranking modes"),
        ks: str = typer.Option("2,5,10", "--k", help="Comma-separated cut-offs"),
        as_json: bool = typer.Option(False, "--json", help="Print JSON"),
        data_dir: Path = EvalDirOpt,
    ) -> None:
        """Ingest a benchmark (once) and print passage Recall@k and AR@k per mode."""
        from retrieval.embedding import load_embedder
        from retrieval.ingest.build import build_graph, default_name, load_data
        from retrieval.passage_rank import MODES, evaluate, load_hipporag_queries
        from retrieval.runtime import open_kg

        with cli_errors():
            if fmt != "hipporag":
                raise ValidationError(f"unknown benchmark format {fmt!r}; valid: hipporag")
            cut = _ints(ks, "--k")
            wanted = [m.strip() for m in modes.split(",") if m.strip()]
            bad = [m for m in wanted if m not in MODES]
            if bad or not wanted:
                raise ValidationError(f"unknown mode(s) {', '.join(bad) or '(none)'}; valid: {', '.join(MODES)}")
            name = default_name(path)
            settings = settings_from(data_dir or Path("data/eval") / name)
            data = load_data(path, fmt)
            queries = load_hipporag_queries(path, data)
            embedder = load_embedder(settings.embed_model)
            t = time.perf_counter()
            report = build_graph(settings, data, name, embedder=embedder, progress=not as_json, source=str(path))
            ingest_s = time.perf_counter() - t
            kg = open_kg(settings, name, embedder)
            try:
                scores = evaluate(kg, queries, wanted, cut)
            finally:
                kg.close()
        if as_json:
            echo_json({
                "graph": name, "version": report.version, "queries": len(queries), "reused": report.unchanged,
                "modes": [{"mode": s.mode, "recall": s.recall, "all_recall": s.all_recall, "seconds": s.seconds}
                          for s in scores],
            })
            return
        what = "re-used" if report.unchanged else f"built in {ingest_s:.0f} s"
        typer.echo(f"{name}: {len(queries)} queries, graph version {report.version} ({what})")
        head = " ".join(f"{'R@' + str(k):>6}" for k in cut) + " " + " ".join(f"{'AR@' + str(k):>6}" for k in cut)
        typer.echo(f"{'mode':<8} {head} {'time':>7}")
        for s in scores:
            cells = " ".join(f"{100 * s.recall[k]:6.1f}" for k in cut) + " "
            cells += " ".join(f"{100 * s.all_recall[k]:6.1f}" for k in cut)
            typer.echo(f"{s.mode:<8} {cells} {s.seconds:6.1f}s")

    @app.command("bench")
    def bench_cmd(
        data_dir: Path = DataDirOpt,
        graph: str = GraphOpt,
        limit: int = typer.Option(None, "--limit", help="Use only the first N questions"),
        as_json: bool = typer.Option(False, "--json", help="Print JSON"),
    ) -> None:
        """p50/p95 per stage and end to end over a fixed query set (no LLM), after one warm-up query."""
        from retrieval.retriever import search
        from retrieval.runtime import open_kg

        settings = settings_from(data_dir).with_(gemini_api_key="")
        per_stage: dict[str, list[float]] = {}
        with cli_errors():
            kg = open_kg(settings, graph)
            try:
                questions = bench_questions(str(kg.handle.manifest.get("source", "")), limit)
                t = time.perf_counter()
                search(kg, "warm-up: build the in-memory indexes", settings=settings)
                warm_s = time.perf_counter() - t
                for q in questions:
                    for timing in search(kg, q, settings=settings).timings:
                        per_stage.setdefault(timing.stage, []).append(timing.ms)
            finally:
                kg.close()
        rows: list[dict[str, Any]] = [
            {"stage": stage, "p50_ms": _percentile(v, 50), "p95_ms": _percentile(v, 95),
             "mean_ms": statistics.fmean(v), "n": len(v)}
            for stage, v in per_stage.items()
        ]
        if as_json:
            echo_json({"graph": kg.name, "version": kg.version, "queries": len(questions),
                       "warm_up_s": warm_s, "stages": rows})
            return
        typer.echo(f"graph {kg.name} version {kg.version}: {len(questions)} queries, warm-up {warm_s:.2f} s")
        typer.echo(f"{'stage':<10} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8}")
        for r in rows:
            typer.echo(f"{r['stage']:<10} {r['p50_ms']:8.1f} {r['p95_ms']:8.1f} {r['mean_ms']:8.1f}")
