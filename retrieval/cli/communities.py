"""`communities`: the graph's communities by level and rank, or the communities and claims of one entity."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from retrieval.cli.common import DataDirOpt, cli_errors, echo_json, settings_from
from retrieval.errors import ValidationError
from retrieval.graph import catalog
from retrieval.graph.communities import CommunityIndex, claim_text, load_extras
from retrieval.models import Community, Entity
from retrieval.stores.base import open_graph_store


def _line(c: Community) -> str:
    rank = f"rank {c.rank:>4.1f}" if c.rank is not None else "computed"
    parent = f" (in {c.parent})" if c.parent is not None else ""
    return f"  {c.id:>5}  {rank}  {c.size:>4} entities{parent}  {c.title}"


def communities(
    level: Annotated[int | None, typer.Option("--level", help="Only this level (0 = top)")] = None,
    entity: Annotated[str | None, typer.Option("--entity", help="An entity id or name: its communities and claims")]
    = None,
    graph: Annotated[str | None, typer.Option("--graph", help="Graph name (default: the active graph)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    data_dir: Path | None = DataDirOpt,
) -> None:
    """List the communities (GraphRAG's with their reports, or computed by Leiden at ingest) by level and rank."""
    with cli_errors():
        settings = settings_from(data_dir, graph_name=graph)
        handle = catalog.resolve(settings.data_dir, settings.graph_name or None)
        index = CommunityIndex.of(load_extras(handle.dir))
        if level is not None and level not in index.levels:
            have = ", ".join(map(str, index.levels)) or "none"
            raise ValidationError(f"no communities at level {level}; levels: {have}")
        if entity is not None:
            _entity_view(settings, handle, index, entity, as_json)
            return
    rows = index.ranked(level)
    if as_json:
        echo_json({"graph": handle.name, "version": handle.version, "level": level, "count": len(rows),
                   "communities": rows, "unattached_claims": index.unattached_claims})
        return
    levels = ", ".join(map(str, index.levels)) or "none"
    typer.echo(f"graph {handle.name}  version {handle.version}: {len(index.communities)} communities, levels {levels}")
    for lvl in sorted({c.level for c in rows}):
        typer.echo(f"level {lvl}")
        for c in rows:
            if c.level == lvl:
                typer.echo(_line(c))
    loose = index.unattached_claims
    if loose:
        typer.echo(f"claims without an entity ({len(loose)}: their subject is no entity of the graph)")
        for claim in loose:
            typer.echo(f"  claim: {claim_text(claim)}")


def _entity_view(settings: Any, handle: catalog.GraphHandle, index: CommunityIndex, key: str, as_json: bool) -> None:
    from retrieval.graph.traverse import resolve_entity

    store = open_graph_store(settings, handle.location)
    try:
        found: list[Entity] = store.get_entities([key], chunks=False)
        target = found[0] if found else resolve_entity(store, key)
        claims = index.claims_by_entity.get(target.id, [])
        mine = index.of_entity(target.id)
        ids = {c.object_id for c in claims if c.object_id}
        names = {e.id: e.name for e in store.get_entities(sorted(ids), chunks=False)} | {target.id: target.name}
    finally:
        store.close()
    if as_json:
        echo_json({"graph": handle.name, "entity": target.model_copy(update={"source_chunks": ()}),
                   "communities": mine, "claims": claims})
        return
    plural = "community" if len(mine) == 1 else "communities"
    typer.echo(f"{target.name} ({target.type}, id {target.id}): {len(mine)} {plural}, {len(claims)} claims")
    for c in sorted(mine, key=lambda c: (c.level, c.id)):
        typer.echo(f"level {c.level}" + _line(c))
    for claim in claims:
        typer.echo(f"  claim: {claim_text(claim, names)}")


def register(app: typer.Typer) -> None:
    app.command("communities")(communities)
