"""CLI: `answer` (a grounded answer with citations), `cypher` (the read-only console), `calibrate-nomatch`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from retrieval.cli.common import DataDirOpt, cli_errors, echo_json, settings_from
from retrieval.cli.search import GraphOpt
from retrieval.errors import ValidationError
from retrieval.models import Enhancements, QueryResult

CELL = 60  # characters of a cell in the text table


def emit(record: Any, as_json: bool, text: Callable[[Any], str]) -> None:
    """The record as JSON, or as the text the command prints."""
    if as_json:
        echo_json(record)
    else:
        typer.echo(text(record), nl=False)


def enhancements(text: str) -> Enhancements:
    """`all`, `none`, or comma-separated switches: graph_rerank, cross_encoder, few_shot, multi_doc."""
    names = list(Enhancements.model_fields)
    wanted = names if text.strip() == "all" else [] if text.strip() == "none" else \
        [w.strip() for w in text.split(",") if w.strip()]
    bad = [w for w in wanted if w not in names]
    if bad:
        raise ValidationError(f"unknown enhancement {bad[0]!r}; valid: {', '.join(names)}, all or none")
    return Enhancements(**{n: n in wanted for n in names})


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= CELL else text[: CELL - 1] + "…"


def table_text(result: QueryResult) -> str:
    """Columns and rows as plain text, then what the result holds and the limits it ran under."""
    cells = [[_cell(v) for v in row] for row in result.rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(result.columns)]
    lines = [" | ".join(c.ljust(w) for c, w in zip(result.columns, widths, strict=True)),
             "-+-".join("-" * w for w in widths)]
    lines += [" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    graph = result.subgraph
    drawn = f"; {len(graph.nodes)} nodes, {len(graph.edges)} relationships" if graph.nodes else ""
    lines.append(f"{result.showing}{drawn} in {result.elapsed_ms:.0f} ms (read-only {result.backend}; time limit "
                 f"{result.timeout_ms / 1000:g} s, at most {result.max_rows:,} rows)")
    return "\n".join(lines) + "\n"


def register(app: typer.Typer) -> None:
    @app.command("answer")
    def answer_cmd(
        query: Annotated[str, typer.Argument(help="The question")],
        as_json: bool = typer.Option(False, "--json", help="Print the Answer record as JSON"),
        enhance: str = typer.Option("graph_rerank,few_shot", "--enhance",
                                    help="use_enhancements: graph_rerank, cross_encoder, few_shot, multi_doc "
                                    "(comma-separated), all or none"),
        data_dir: Path = DataDirOpt,
        graph: str = GraphOpt,
    ) -> None:
        """Answer from the graph with [n] citations: Gemini with GEMINI_API_KEY, else extractive; kind no_match
        when nothing matches."""
        from retrieval.answer.synthesis import answer_question, to_markdown
        from retrieval.graph.runtime import open_kg

        settings = settings_from(data_dir)
        with cli_errors():
            switches = enhancements(enhance)
            kg = open_kg(settings, graph)
            try:
                answer = answer_question(kg, query, settings=settings, enhancements=switches)
            finally:
                kg.close()
        emit(answer, as_json, to_markdown)

    @app.command("cypher")
    def cypher_cmd(
        query: Annotated[str, typer.Argument(help="One read Cypher statement")],
        params: str = typer.Option("", "--params", help='Parameters as a JSON object, e.g. {"name": "x"}'),
        as_json: bool = typer.Option(False, "--json", help="Print the QueryResult as JSON"),
        timeout_ms: int = typer.Option(10_000, "--timeout-ms", help="Time limit (100-600,000 ms)"),
        max_rows: int = typer.Option(1_000, "--max-rows", help="Rows kept (1-100,000)"),
        data_dir: Path = DataDirOpt,
        graph: str = GraphOpt,
    ) -> None:
        """Run a read-only Cypher query on the graph (writes are refused by the engine)."""
        from retrieval.explore.console import parse_params, run_query
        from retrieval.graph import catalog

        settings = settings_from(data_dir)
        with cli_errors():
            values = parse_params(params)
            handle = catalog.resolve(settings.data_dir, graph or settings.graph_name or None)
            result = run_query(settings, handle, query, values, timeout_ms=timeout_ms, max_rows=max_rows)
        emit(result, as_json, table_text)

    @app.command("calibrate-nomatch")
    def calibrate_cmd(
        data_dir: Path = DataDirOpt,
        graph: str = typer.Option("demo", "--graph", help="The demo graph (questions: data/demo/questions.json)"),
        musique: Annotated[Path | None, typer.Option(
            "--musique", help="A MuSiQue folder (HippoRAG format): its graph is built once, its questions are the "
            "answerable set")] = None,
        musique_data_dir: Annotated[Path | None, typer.Option("--musique-data-dir", help="Where the MuSiQue graph "
                                                              "is kept (default data/eval/<folder name>)")] = None,
        as_json: bool = typer.Option(False, "--json", help="Print JSON"),
    ) -> None:
        """Measure the no-match signal: precision / recall / F1 on answerable and unanswerable questions."""
        with cli_errors():
            report = calibration(settings_from(data_dir), graph, musique, musique_data_dir, progress=not as_json)
        emit(report, as_json, calibration_text)


def calibration(settings: Any, graph: str, musique: Path | None, musique_data_dir: Path | None, *,
                progress: bool) -> dict[str, Any]:
    """Score every calibration question on its graph, fit the threshold, and report per set and per graph."""
    from retrieval.config import DEMO_QUESTIONS
    from retrieval.embedding import load_embedder
    from retrieval.evaluation import calibration as cal
    from retrieval.graph.runtime import open_kg
    from retrieval.search.nomatch import THRESHOLD

    embedder = load_embedder(settings.embed_model)
    sets: list[tuple[Any, str, str, list[tuple[str, str]]]] = []
    demo = [("answerable", q["question"]) for q in json.loads(DEMO_QUESTIONS.read_text(encoding="utf-8"))]
    sets.append((settings, graph, "demo", demo))
    if musique is not None:
        from retrieval.evaluation.passage_rank import load_hipporag_queries
        from retrieval.ingest.build import build_graph
        from retrieval.ingest.load import default_name, load_data

        name = default_name(musique)
        msettings = settings_from(musique_data_dir or Path("data/eval") / name)
        data = load_data(musique, "hipporag")
        build_graph(msettings, data, name, embedder=embedder, progress=progress, source=str(musique.resolve()))
        sets.append((msettings, name, "musique", [("answerable", q.question)
                                                  for q in load_hipporag_queries(musique, data)]))
    rows: list[cal.Labelled] = []
    for graph_settings, name, kind, answerable in sets:
        kg = open_kg(graph_settings.with_(gemini_api_key=""), name, embedder)  # offline: the signal needs no LLM
        try:
            rows += cal.score_questions(kg, kind, answerable + cal.unanswerable_questions(kind))
        finally:
            kg.close()
    fitted = cal.calibrate(rows)
    shipped = THRESHOLD
    graphs = list(dict.fromkeys(r.graph for r in rows))
    groups = [(g, [r for r in rows if r.graph == g]) for g in graphs] + ([("all", rows)] if len(graphs) > 1 else [])
    return {
        "shipped_threshold": shipped, "calibrated_threshold": fitted.threshold,
        "rule": f"best F1 among thresholds silencing at most {cal.MAX_FALSE_FIRES:.0%} of answerable questions",
        "sets": cal.set_rows(rows, shipped),
        "graphs": [{"graph": g, **vars(cal.quality(group, shipped))} for g, group in groups],
        "held_out": cal.held_out(rows),
        "scores": [vars(r) for r in rows],
    }


def calibration_text(report: dict[str, Any]) -> str:
    lines = [f"no-match threshold shipped {report['shipped_threshold']:.2f}; calibrated on these sets "
             f"{report['calibrated_threshold']:.2f} ({report['rule']})", "",
             f"{'graph':<9} {'set':<14} {'questions':>9} {'no match':>9} {'rate':>6}"]
    lines += [f"{r['graph']:<9} {r['set']:<14} {r['questions']:>9} {r['no_match']:>9} {r['rate']:>6.2f}"
              for r in report["sets"]]
    lines += ["", f"{'graph':<9} {'precision':>9} {'recall':>7} {'F1':>6} {'answerable silenced':>20}"]
    lines += [f"{g['graph']:<9} {g['precision']:>9.3f} {g['recall']:>7.3f} {g['f1']:>6.3f} "
              f"{g['false_fires']:>12} of {g['answerable']:<5}" for g in report["graphs"]]
    for h in report["held_out"]:
        lines.append(f"held out: calibrated on {h['calibrated_on']} alone -> {h['threshold']:.2f}; on "
                     f"{h['measured_on']}: precision {h['precision']:.3f}, recall {h['recall']:.3f}, "
                     f"F1 {h['f1']:.3f}, {h['false_fires']} of {h['answerable']} answerable silenced")
    return "\n".join(lines) + "\n"
