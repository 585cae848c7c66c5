"""CLI: ingest, demo, stats, graphs, use (the data directory's graphs)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from retrieval.cli.common import DataDirOpt, cli_errors, echo_json, settings_from
from retrieval.config import DEMO_DIR, Settings
from retrieval.errors import StoreError
from retrieval.graph import catalog
from retrieval.ingest import FORMATS
from retrieval.ingest.progress import StageBars
from retrieval.models import GraphStats
from retrieval.stores.base import open_graph_store, open_vector_store


def _ingest(
    settings: Settings, path: Path, fmt: str, name: str | None, progress: bool, mapping: dict[str, str] | None = None
) -> None:
    from retrieval.ingest import IngestOptions
    from retrieval.ingest.build import ingest

    start = time.perf_counter()
    bars = StageBars() if progress else None
    with cli_errors():
        try:
            # the stage bars show every reader and build stage (embedding too): the build's own bars stay off
            report = ingest(settings, path, fmt=fmt, name=name, progress=False,
                            options=IngestOptions(settings=settings, progress=bars, mapping=mapping or {}))
        finally:
            if bars is not None:
                bars.close()  # before an error line is printed
    wall = time.perf_counter() - start
    stages = ", ".join(f"{k} {v:.1f}s" for k, v in report.seconds.items())
    typer.echo(f"{report.summary()}; wall {wall:.1f} s ({stages})")
    for warning in report.warnings:
        typer.echo(f"warning: {warning}", err=True)


def read_stats(settings: Settings, name: str | None = None) -> tuple[GraphStats, tuple[str, ...]]:
    """Count graph `name` (default: active) from its stores, then close them; warnings say what was left out."""
    from retrieval.graph.stats import graph_stats

    handle = catalog.resolve(settings.data_dir, name or settings.graph_name or None)
    graph = open_graph_store(settings, handle.location)
    try:
        try:
            vectors = open_vector_store(settings, handle.location)
        except StoreError as exc:
            # Milvus Lite admits one process per file: a running app keeps `stats` from counting vectors.
            return graph_stats(handle, graph, None), (f"vector counts unavailable: {exc}",)
        try:
            return graph_stats(handle, graph, vectors), ()
        finally:
            vectors.close()
    finally:
        graph.close()


def register(app: typer.Typer) -> None:
    @app.command("ingest")
    def ingest_cmd(
        path: Annotated[Path, typer.Argument(help="A folder in one of the formats (see --format)")],
        fmt: str = typer.Option("auto", "--format", help=f"{' | '.join(FORMATS)} | auto (detect from the files)"),
        name: str = typer.Option(None, "--name", help="Graph name (default: the folder name)"),
        name_attr: str = typer.Option(None, "--name-attr", help="graphml/csv: node attribute holding the name"),
        type_attr: str = typer.Option(None, "--type-attr", help="graphml/csv: node attribute holding the type"),
        description_attr: str = typer.Option(
            None, "--description-attr", help="graphml/csv: node and edge attribute holding the description"),
        relation_type_attr: str = typer.Option(
            None, "--relation-type-attr", help="graphml/csv: edge attribute holding the relation type"),
        weight_attr: str = typer.Option(None, "--weight-attr", help="graphml/csv: edge attribute holding the weight"),
        data_dir: Path = DataDirOpt,
        progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress bars"),
        chunk_tokens: int = typer.Option(None, "--chunk-tokens",
                                         help="documents: tokens per chunk (default $KG_CHUNK_TOKENS or 200)"),
        chunk_overlap: int = typer.Option(None, "--chunk-overlap",
                                          help="documents: tokens shared by neighbouring chunks (default 40)"),
        noun_phrases: bool = typer.Option(None, "--noun-phrases/--no-noun-phrases",
                                          help="documents, offline extractor: noun phrases named by 2+ chunks "
                                          "become entities too (default $KG_OFFLINE_NOUN_PHRASES or off)"),
    ) -> None:
        """Build a graph from PATH into a new version and swap it in (unchanged input: no rebuild)."""
        flags = {"name": name_attr, "type": type_attr, "description": description_attr,
                 "relation_type": relation_type_attr, "weight": weight_attr}
        with cli_errors():
            settings = settings_from(data_dir, chunk_tokens=chunk_tokens, chunk_overlap=chunk_overlap,
                                     offline_noun_phrases=noun_phrases)
        _ingest(settings, path, fmt, name, progress, {k: v for k, v in flags.items() if v})

    @app.command("demo")
    def demo_cmd(
        data_dir: Path = DataDirOpt,
        progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress bars"),
    ) -> None:
        """Build the demo marketing library (data/demo) as graph 'demo'."""
        _ingest(settings_from(data_dir), DEMO_DIR, "bundle", "demo", progress)

    @app.command("stats")
    def stats_cmd(
        as_json: bool = typer.Option(False, "--json", help="Print JSON"),
        data_dir: Path = DataDirOpt,
        graph: str = typer.Option(None, "--graph", help="Graph name (default: the active graph)"),
    ) -> None:
        """Counts of books, chapters, chunks, entities and relations, read from the stores."""
        with cli_errors():
            stats, warnings = read_stats(settings_from(data_dir), graph)
        for warning in warnings:
            typer.echo(f"warning: {warning}", err=True)
        if as_json:
            echo_json(stats)
            return
        typer.echo(f"graph     {stats.name}  version {stats.version}  ({stats.created_at})")
        typer.echo(f"back ends {stats.graph_backend} + {stats.vector_backend}, embeddings {stats.embed_model}")
        typer.echo(
            f"counts    {stats.books} books, {stats.chapters} chapters, {stats.chunks} chunks, "
            f"{stats.entities} entities, {stats.relations} relations, {stats.communities} communities"
        )
        for book, names in list(stats.chapter_names.items())[:10]:
            shown = ", ".join(names[:8]) + (f" … ({len(names)})" if len(names) > 8 else "")
            typer.echo(f"chapters  {book}: {shown}")
        if len(stats.chapter_names) > 10:
            typer.echo(f"chapters  … {len(stats.chapter_names) - 10} more books (see --json)")
        typer.echo("vectors   " + (", ".join(f"{k} {v}" for k, v in stats.vectors.items()) or "(not counted)"))

    @app.command("graphs")
    def graphs_cmd(data_dir: Path = DataDirOpt) -> None:
        """List the graphs of the data directory; '*' marks the active one."""
        settings = settings_from(data_dir)
        active = catalog.active_name(settings.data_dir)
        names = catalog.list_graphs(settings.data_dir)
        if not names:
            typer.echo(f"no graph in {settings.data_dir}; build one with `python -m retrieval demo`")
        with cli_errors():
            for name in names:
                handle = catalog.resolve(settings.data_dir, name)
                c = handle.manifest.get("counts", {})
                mark = "*" if name == active else " "
                typer.echo(
                    f"{mark} {name}  {handle.version}  {c.get('chunks', 0)} chunks, {c.get('entities', 0)} entities, "
                    f"{c.get('relations', 0)} relations"
                )

    @app.command("use")
    def use_cmd(name: Annotated[str, typer.Argument(help="Graph name")], data_dir: Path = DataDirOpt) -> None:
        """Make graph NAME the active one."""
        settings = settings_from(data_dir)
        with cli_errors():
            catalog.set_active(settings.data_dir, name)
        typer.echo(f"active graph: {name}")

    @app.command("delete")
    def delete_cmd(
        name: Annotated[str, typer.Argument(help="Graph name")],
        yes: Annotated[bool, typer.Option("--yes", help="Really delete it")] = False,
        data_dir: Path = DataDirOpt,
    ) -> None:
        """Delete graph NAME and every version of it (its few-shot examples stay)."""
        settings = settings_from(data_dir)
        if not yes:
            typer.echo("error: refusing to delete without --yes", err=True)
            raise typer.Exit(2)
        from retrieval.ingest.versions import delete_graph

        with cli_errors():
            removed = delete_graph(settings, name)
        typer.echo(f"deleted graph {name} ({len(removed)} version{'s' if len(removed) != 1 else ''}); "
                   f"active graph: {catalog.active_name(settings.data_dir) or 'none'}")
