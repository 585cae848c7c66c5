"""CLI: `labels import|export` (TREC qrels) and `eval-labels` (metrics per reranker from hand labels)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated

import typer

from retrieval.cli.common import DataDirOpt, cli_errors, echo_json, settings_from
from retrieval.errors import NotFoundError, RetrievalError, ValidationError
from retrieval.models import VerbalizedFact

POOL_SIZE = 50  # candidates retrieved per query before reranking (SearchParams.max_results upper bound)


def _active_version(data_dir: Path) -> str:
    from retrieval import catalog

    try:
        return catalog.resolve(data_dir).version
    except NotFoundError:
        return ""


def _parse_ks(text: str) -> list[int]:
    try:
        ks = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValidationError(f"--k: expected comma-separated integers, got {text!r}") from None
    if not ks or min(ks) < 1:
        raise ValidationError(f"--k: cutoffs must be positive, got {text!r}")
    return ks


def retriever_pool(kg: object, size: int = POOL_SIZE) -> Callable[[str], Sequence[VerbalizedFact]]:
    """query -> the retriever's facts before reranking (rerank="none"), up to `size`."""
    try:
        retriever = importlib.import_module("retrieval.retriever")
    except ModuleNotFoundError as exc:
        raise RetrievalError("eval-labels needs retrieval.retriever, which is not in this tree yet") from exc
    from retrieval.models import SearchParams

    params = SearchParams.model_validate({"max_results": size, "rerank": "none"})

    def pool(query: str) -> Sequence[VerbalizedFact]:
        facts: Sequence[VerbalizedFact] = retriever.search(kg, query, params).facts
        return facts

    return pool


QueriesOpt = Annotated[
    Path | None, typer.Option("--queries", help="query_id<TAB>text file (default: queries.tsv beside FILE)")
]
VersionOpt = Annotated[str | None, typer.Option("--graph-version", help="Graph version of the labels")]


def register(app: typer.Typer) -> None:
    labels_app = typer.Typer(help="Relevance labels: import/export TREC qrels.", no_args_is_help=True)
    app.add_typer(labels_app, name="labels")

    @labels_app.command("import")
    def labels_import(
        file: Annotated[Path, typer.Argument(help="TREC qrels: `query_id 0 item_id grade` per line")],
        queries: QueriesOpt = None,
        graph_version: VersionOpt = None,
        annotator: Annotated[str, typer.Option("--annotator")] = "import",
        data_dir: Path | None = DataDirOpt,
    ) -> None:
        """Import graded labels (0-3) from TREC qrels (default version: the active graph's); all-or-nothing."""
        from retrieval.labels import LabelStore, import_qrels

        with cli_errors():
            settings = settings_from(data_dir)
            version = _active_version(settings.data_dir) if graph_version is None else graph_version
            store = LabelStore.in_data_dir(settings.data_dir)
            n = import_qrels(store, file, queries, graph_version=version, annotator=annotator)
            typer.echo(f"imported {n} labels (graph version {version or '-'}) into {store.path}")

    @labels_app.command("export")
    def labels_export(
        format: Annotated[str, typer.Option("--format", help="qrels (runs: eval-labels --runs-out)")] = "qrels",
        out: Annotated[Path, typer.Option("--out", help="Directory for qrels.txt and queries.tsv")] = Path("."),
        graph_version: VersionOpt = None,
        data_dir: Path | None = DataDirOpt,
    ) -> None:
        """Export labels as TREC qrels plus queries.tsv (default: the latest label per query and item)."""
        from retrieval.labels import QRELS_FILE, QUERIES_FILE, LabelStore, current_labels, export_qrels

        with cli_errors():
            if format != "qrels":
                raise ValidationError(f"--format: only 'qrels' is supported, got {format!r}")
            store = LabelStore.in_data_dir(settings_from(data_dir).data_dir)
            labels = current_labels(store.all_labels(graph_version))
            n = export_qrels(labels, out / QRELS_FILE, out / QUERIES_FILE)
            typer.echo(f"wrote {n} labels to {out / QRELS_FILE} and {out / QUERIES_FILE}")

    @app.command("eval-labels")
    def eval_labels(
        as_json: Annotated[bool, typer.Option("--json", help="Print the full report as JSON")] = False,
        ks: Annotated[str, typer.Option("--k", help="Cutoffs, e.g. 5,10")] = "10",
        graph_version: VersionOpt = None,
        runs_out: Annotated[Path | None, typer.Option("--runs-out", help="Write a TREC run per reranker here")] = None,
        data_dir: Path | None = DataDirOpt,
    ) -> None:
        """Re-run each labelled query under every reranker; print nDCG@k, P@k, R@k, MRR and lift over no rerank."""
        from retrieval.evaluate import evaluate_rerankers
        from retrieval.labels import LabelStore, export_run
        from retrieval.rerank import build_rerankers
        from retrieval.retriever import kg_fact_vectors
        from retrieval.runtime import open_kg

        with cli_errors():
            cutoffs = _parse_ks(ks)
            settings = settings_from(data_dir)
            labels = LabelStore.in_data_dir(settings.data_dir).all_labels(graph_version)
            if not labels:
                raise NotFoundError(f"no labels in {settings.data_dir}: label in the Rerank Inspector or import qrels")
            kg = open_kg(settings)
            try:
                rerankers = build_rerankers(settings, kg.embedder, kg, kg_fact_vectors(kg))
                report, runs = evaluate_rerankers(labels, retriever_pool(kg), rerankers, cutoffs)
            finally:
                kg.close()
            if runs_out is not None:
                for name, ranking in runs.runs.items():
                    export_run(ranking, runs_out / f"run.{name}.txt", name)
            if as_json:
                echo_json(report)
                return
            typer.echo(report.table())
            for q in report.skipped_queries:
                typer.echo(f"skipped (no relevant label): {q}")
            for w in report.warnings:
                typer.echo(f"warning: {w}", err=True)
