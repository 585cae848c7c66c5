"""Grades follow the graph: item ids (`retrieval.items`) mapped through the curation log.

A rename, a type or description edit and a direction change keep the ids (the items too); a merge hands the
merged entities to the one kept, and a parallel relation combined into another to that one; a delete leaves the
item without evidence. Walking every applied change in order (undos included, which hand records back) gives
where each id stands now.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from retrieval.curation.log import CurationLog, has_log
from retrieval.curation.ops import Changeset
from retrieval.items import CHUNK_PREFIX, ENTITY_PREFIX, path_item_id, relation_item_id
from retrieval.models import Record


class Followed(Record):
    """Where a graded item stands now: `item_id` (the same, or the item that took it over) and `status`."""

    item_id: str
    status: str  # same | moved | deleted | unknown (a path whose parts are not known)
    note: str = ""


@dataclass
class ItemMap:
    """Old entity / relation id -> the id standing for it now (None: deleted)."""

    entities: dict[str, str | None] = field(default_factory=dict)
    relations: dict[str, str | None] = field(default_factory=dict)
    rel_items: dict[str, str] = field(default_factory=dict)  # `rel:` item id -> relation id, for mapped ones

    @staticmethod
    def _chase(table: dict[str, str | None], key: str) -> str | None:
        seen = set()
        while key in table and table[key] != key:
            if key in seen:  # a cycle cannot come from the log; stop rather than loop
                break
            seen.add(key)
            nxt = table[key]
            if nxt is None:
                return None
            key = nxt
        return key

    def entity(self, eid: str) -> str | None:
        return self._chase(self.entities, eid)

    def relation(self, rid: str) -> str | None:
        return self._chase(self.relations, rid)

    def follow(self, item_id: str, parts: tuple[Sequence[str], Sequence[str]] | None = None) -> Followed:
        """Where item `item_id` stands now. A path needs its parts (node ids, edge ids) to be followed."""
        if item_id.startswith(ENTITY_PREFIX):
            old = item_id[len(ENTITY_PREFIX):]
            return self._result(item_id, old, self.entity(old), ENTITY_PREFIX + "{}", "entity")
        if item_id.startswith("rel:"):
            rid = self.rel_items.get(item_id)
            if rid is None:
                return Followed(item_id=item_id, status="same")
            now = self.relation(rid)
            return self._result(item_id, rid, now, None, "relation")
        if item_id.startswith("path:") and parts is not None:
            nodes = [self.entity(n) for n in parts[0]]
            edges = [self.relation(e) for e in parts[1]]
            if any(n is None for n in nodes) or any(e is None for e in edges):
                return Followed(item_id=item_id, status="deleted", note="part of this path was deleted")
            new = path_item_id([n for n in nodes if n], [e for e in edges if e])
            return Followed(item_id=new, status="same" if new == item_id else "moved")
        if item_id.startswith(CHUNK_PREFIX) or not item_id.startswith("path:"):
            return Followed(item_id=item_id, status="same")
        return Followed(item_id=item_id, status="unknown")

    @staticmethod
    def _result(item_id: str, old: str, now: str | None, fmt: str | None, kind: str) -> Followed:
        if now is None:
            return Followed(item_id=item_id, status="deleted", note=f"its {kind} was deleted from the graph")
        if now == old:
            return Followed(item_id=item_id, status="same")
        new = fmt.format(now) if fmt else relation_item_id(now)
        return Followed(item_id=new, status="moved", note=f"{kind} {old!r} is now part of {now!r}")


def item_map(changesets: Iterable[Changeset]) -> ItemMap:
    """The map after every change that reached the graph (edits, undos, redos), in the order applied."""
    out = ItemMap()
    applied = [cs for cs in changesets if cs.state in ("applied", "undone")]  # undone: applied, then undone
    for cs in sorted(applied, key=lambda c: c.generation):
        for c in cs.changes:
            table = out.entities if c.kind == "entity" else out.relations if c.kind == "relation" else None
            if table is None:
                continue
            if c.kind == "relation":
                out.rel_items[relation_item_id(c.id)] = c.id
            table[c.id] = c.id if c.after is not None else c.into
    return out


def graph_item_map(data_dir: object, name: str) -> ItemMap:
    """The item map of graph `name` (empty when it was never curated)."""
    from pathlib import Path

    if not has_log(Path(str(data_dir)), name):
        return ItemMap()
    log = CurationLog(Path(str(data_dir)), name)
    try:
        return item_map(log.changesets(newest_first=False))
    finally:
        log.close()
