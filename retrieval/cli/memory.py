"""`memory list|search|get|traverse|store|delete`: the tenant-scoped graph memory from the shell."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from retrieval.cli.common import DataDirOpt, echo_json, settings_from
from retrieval.explore.memory import MAX_BYTES, GraphMemory, open_memory
from retrieval.models import MemoryGraphSummary, MemoryResult

TenantOpt = Annotated[str, typer.Option("--tenant", help="Tenant id ([A-Za-z0-9_-], 1-64)")]
NamespaceOpt = Annotated[str, typer.Option("--namespace", help="Namespace id")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON")]
_STORE_KEYS = {"nodes", "edges", "keywords", "tags", "metadata"}


def _memory(data_dir: Path | None) -> GraphMemory:
    return open_memory(settings_from(data_dir))


def _finish(result: MemoryResult, as_json: bool) -> MemoryResult:
    """Exit non-zero with one line on a fail result: 2 for bad input, 1 otherwise."""
    if not result.ok:
        typer.echo(f"error: {result.error}", err=True)
        raise typer.Exit(2 if result.error_kind == "invalid" else 1)
    if as_json:
        echo_json(result)
    return result


def _rows(graphs: tuple[MemoryGraphSummary, ...], scores: bool = False) -> None:
    for g in graphs:
        score = f"{g.score:.3f}  " if scores else ""
        counts = f"{g.node_count} nodes  {g.edge_count} edges"
        typer.echo(f"{score}{g.graph_id}  {counts}  {g.created_at}  [{','.join(g.tags)}]  {g.title}")


def list_cmd(
    tenant: TenantOpt, namespace: NamespaceOpt = "default", as_json: JsonOpt = False, data_dir: Path | None = DataDirOpt
) -> None:
    """Graphs in a namespace, newest first."""
    result = _finish(_memory(data_dir).list_graphs(tenant, namespace), as_json)
    if not as_json:
        _rows(result.graphs)


def search_cmd(
    tenant: TenantOpt,
    query: Annotated[str, typer.Argument(help="Keywords")] = "",
    namespace: Annotated[str | None, typer.Option("--namespace", help="Namespace (default: all)")] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="Required tag (repeatable)")] = None,
    limit: Annotated[int, typer.Option("--limit", help="Most results (1-100)")] = 10,
    as_json: JsonOpt = False,
    data_dir: Path | None = DataDirOpt,
) -> None:
    """Graphs by keyword overlap and tags, best first."""
    result = _finish(_memory(data_dir).search_graphs(tenant, query, namespace, tag, limit), as_json)
    if not as_json:
        _rows(result.graphs, scores=True)


def get_cmd(
    tenant: TenantOpt,
    graph_id: Annotated[str, typer.Argument(help="Graph id")],
    namespace: NamespaceOpt = "default",
    as_json: JsonOpt = False,
    data_dir: Path | None = DataDirOpt,
) -> None:
    """One stored graph: its nodes and edges."""
    result = _finish(_memory(data_dir).get_graph(tenant, graph_id, namespace), as_json)
    if not as_json and result.graph is not None:
        g = result.graph
        names = {n.id: n.name for n in g.nodes}
        typer.echo(f"{g.graph_id}: {len(g.nodes)} nodes, {len(g.edges)} edges; keywords {list(g.keywords)}")
        for n in g.nodes:
            typer.echo(f"node {n.id}: {n.name} ({n.type})")
        for e in g.edges:
            typer.echo(f"edge {names.get(e.source_id)} --[{e.relation_type}]--> {names.get(e.target_id)}")


def traverse_cmd(
    tenant: TenantOpt,
    graph_id: Annotated[str, typer.Argument(help="Graph id")],
    start: Annotated[str, typer.Argument(help="Start node id")],
    namespace: NamespaceOpt = "default",
    depth: Annotated[int, typer.Option("--depth", help="Max hops (0-6)")] = 2,
    relation: Annotated[list[str] | None, typer.Option("--relation", help="Follow only this type")] = None,
    direction: Annotated[str, typer.Option("--direction", help="out, in or both")] = "out",
    as_json: JsonOpt = False,
    data_dir: Path | None = DataDirOpt,
) -> None:
    """BFS in a stored graph: the paths to every node within the depth."""
    memory = _memory(data_dir)
    result = _finish(
        memory.traverse_graph(tenant, graph_id, start, depth, relation, namespace, direction=direction),  # type: ignore[arg-type]
        as_json,
    )
    if not as_json and result.traversal is not None:
        typer.echo(result.traversal.showing)
        for p in result.traversal.paths:
            typer.echo(f"{p.hops}: {p.text}")


def store_cmd(
    tenant: TenantOpt,
    file: Annotated[Path, typer.Argument(help="JSON file: {nodes, edges, keywords, tags, metadata}")],
    namespace: NamespaceOpt = "default",
    as_json: JsonOpt = False,
    data_dir: Path | None = DataDirOpt,
) -> None:
    """Store a graph from a JSON file; prints its graph id."""
    data = _read_store_file(file)
    result = _finish(
        _memory(data_dir).store_graph(
            tenant,
            namespace,
            data.get("nodes") or [],
            data.get("edges") or [],
            data.get("keywords"),
            data.get("tags"),
            data.get("metadata"),
        ),
        as_json,
    )
    if not as_json:
        typer.echo(result.graph_id)


def delete_cmd(
    tenant: TenantOpt,
    graph_id: Annotated[str, typer.Argument(help="Graph id")],
    namespace: NamespaceOpt = "default",
    yes: Annotated[bool, typer.Option("--yes", help="Confirm the deletion")] = False,
    data_dir: Path | None = DataDirOpt,
) -> None:
    """Delete a stored graph (needs --yes)."""
    if not yes:
        typer.echo("error: refusing to delete without --yes", err=True)
        raise typer.Exit(2)
    _finish(_memory(data_dir).delete_graph(tenant, graph_id, namespace), False)
    typer.echo(f"deleted {graph_id}")


def _read_store_file(file: Path) -> dict[str, Any]:
    def fail(reason: str) -> typer.Exit:
        typer.echo(f"error: {file}: {reason}", err=True)
        return typer.Exit(2)

    try:
        if file.stat().st_size > MAX_BYTES:
            raise fail(f"larger than {MAX_BYTES} bytes")
        data = json.loads(file.read_bytes())
    except OSError as exc:
        raise fail(exc.strerror or str(exc)) from exc
    except RecursionError as exc:
        raise fail("JSON nested too deeply") from exc
    except ValueError as exc:
        raise fail(f"not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise fail("expected a JSON object {nodes, edges, keywords, tags, metadata}")
    unknown = sorted(set(data) - _STORE_KEYS)
    if unknown:
        raise fail(f"unknown keys {unknown}; expected {sorted(_STORE_KEYS)}")
    if not isinstance(data.get("nodes", []), list) or not isinstance(data.get("edges", []), list):
        raise fail("nodes and edges must be lists")
    return data


def register(app: typer.Typer) -> None:
    memory_app = typer.Typer(no_args_is_help=True, help="Tenant-scoped graph memory (seed 003).")
    memory_app.command("list")(list_cmd)
    memory_app.command("search")(search_cmd)
    memory_app.command("get")(get_cmd)
    memory_app.command("traverse")(traverse_cmd)
    memory_app.command("store")(store_cmd)
    memory_app.command("delete")(delete_cmd)
    app.add_typer(memory_app, name="memory")
