"""`paths A B`: why are two entities connected? Ranked k shortest simple paths with their sources."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from retrieval.cli.common import DataDirOpt, cli_errors, echo_json, settings_from
from retrieval.models import PathResult


def paths(
    entity_a: Annotated[str, typer.Argument(help="First entity: its name or an alias, any case (a name no entity "
                                                 "has is refused, with the closest names)")],
    entity_b: Annotated[str, typer.Argument(help="Second entity")],
    k: Annotated[int, typer.Option("--k", help="Paths to show (1-20)")] = 5,
    max_hops: Annotated[int, typer.Option("--max-hops", help="Longest path in hops (1-6)")] = 4,
    query: Annotated[str, typer.Option("--query", help="Rank equal-length paths by similarity to this")] = "",
    relation: Annotated[list[str] | None, typer.Option("--relation", help="Follow only this relation type")] = None,
    graph: Annotated[str | None, typer.Option("--graph", help="Graph name (default: the active graph)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON")] = False,
    data_dir: Path | None = DataDirOpt,
) -> None:
    """Up to k shortest simple paths between two entities, verbalized with their sources."""
    from retrieval.embedding import HashEmbedder
    from retrieval.graph.runtime import open_kg
    from retrieval.graph.traverse import k_shortest_paths, resolve_entity

    with cli_errors():
        settings = settings_from(data_dir, graph_name=graph)
        # Without a query the embedder is never called, so skip loading the sentence-transformers model.
        kg = open_kg(settings, embedder=None if query.strip() else HashEmbedder())
        try:
            a = resolve_entity(kg.graph, entity_a)
            b = resolve_entity(kg.graph, entity_b)
            result = k_shortest_paths(
                kg.index,
                a.id,
                b.id,
                k=k,
                max_hops=max_hops,
                query=query,
                relation_types=relation,
                details=kg.graph,
                vectors=kg.vectors,
                embedder=kg.embedder if query.strip() else None,
            )
        finally:
            kg.close()
    if as_json:
        echo_json(result)
    else:
        typer.echo(render(result))


def render(result: PathResult) -> str:
    """Plain-text listing: one numbered path per block, its scores and its sources."""
    lines = [
        f"{result.source.name} -> {result.target.name}: {len(result.paths)} path(s) "
        f"(k={result.k}, max {result.max_hops} hops, {result.candidates} candidates)"
    ]
    for i, path in enumerate(result.paths, 1):
        sim = "" if path.query_similarity is None else f", query {path.query_similarity:.3f}"
        lines.append(f"{i}. [{path.hops} hops, score {path.score:.3f}, ppr {path.ppr_mass:.4f}{sim}] {path.text}")
        for s in path.sources:
            where = " / ".join(x for x in (s.original_document, s.chapter, s.author) if x) or s.source
            lines.append(f"   source: {where} ({s.chunk_id})")
    lines.extend(f"warning: {w}" for w in result.warnings)
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    app.command("paths")(paths)
