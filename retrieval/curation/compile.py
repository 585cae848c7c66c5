"""Operations to changes: each operation is checked against the graph as it is, and turned into the before and
after of every record it touches (entities, relations, chunks, communities, claims). Nothing is written here.

The graph is read through a `GraphView` (the opened KG, or a version's stores during a re-import); the
operations of one changeset see each other's effects through a `Draft` laid over it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from retrieval.curation.ops import (
    AddAlias,
    AddDocuments,
    AddRelation,
    Change,
    DeleteEntity,
    DeleteRelation,
    MergeEntities,
    Op,
    RemoveAlias,
    RemoveDocument,
    RenameEntity,
    ReverseRelation,
    SetEntityDescription,
    SetEntityType,
    SetRelationDescription,
    SetRelationType,
    SetRelationWeight,
    check_name,
    check_op,
    check_text,
    check_type,
    check_weight,
)
from retrieval.errors import NotFoundError, ValidationError
from retrieval.graph.communities import Extras
from retrieval.models import Chunk, Claim, Community, Entity, Record, Relation

UNKNOWN_TYPES = frozenset({"", "unknown", "entity"})  # types a merge gives way on


class NameTaken(ValidationError):
    """A rename onto a name another entity has: the analyst is offered a merge instead."""

    def __init__(self, name: str, entity_id: str, others: Sequence[Entity]) -> None:
        self.name, self.entity_id, self.others = name, entity_id, tuple(others)
        ids = ", ".join(repr(e.id) for e in others)
        super().__init__(
            f"an entity named {name!r} exists already ({ids}): merge them instead of renaming "
            f"(`python -m retrieval edit merge {entity_id} {others[0].id}`)"
        )


class GraphView(Protocol):
    """What compiling needs to read of a graph (`retrieval.curation.views` has the implementations)."""

    @property
    def extras(self) -> Extras: ...
    def entities(self, ids: Sequence[str]) -> dict[str, Entity]: ...
    def relations(self, ids: Sequence[str]) -> dict[str, Relation]: ...
    def incident(self, entity_id: str) -> list[str]:
        """Ids of the relations touching the entity (either direction)."""
        ...
    def named(self, name: str) -> list[Entity]:
        """Entities whose name or an alias equals `name`, case-insensitively."""
        ...
    def chunks(self, ids: Sequence[str]) -> dict[str, Chunk]: ...
    def document_chunks(self, document: str) -> list[str]:
        """Ids of the chunks of a document (its book title, or its source file)."""
        ...
    def linked(self, chunk_ids: Sequence[str]) -> list[str]:
        """Ids of the entities whose sources include any of `chunk_ids`."""
        ...
    def undescribed(self) -> set[str]:
        """Ids of the relations without a description (their vector text names their ends)."""
        ...


def _key(name: str) -> str:
    return name.strip().casefold()


@dataclass
class Draft:
    """The changes of one changeset so far, laid over a view: reads see them, `changes` lists them."""

    view: GraphView
    _records: dict[tuple[str, str], Change] = field(default_factory=dict)
    _extras: Extras | None = None

    # --- reading through the draft -----------------------------------------------------------

    def _get(self, kind: str, ids: Sequence[str], base: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for i in ids:
            change = self._records.get((kind, i))
            if change is not None:
                if change.after is not None:
                    out[i] = change.record("after")
            elif i in base:
                out[i] = base[i]
        return out

    def entity(self, eid: str) -> Entity:
        found = self.entities([eid])
        if eid not in found:
            raise NotFoundError(f"no entity with id {eid!r} in this graph")
        return found[eid]

    def relation(self, rid: str) -> Relation:
        found = self.relations([rid])
        if rid not in found:
            raise NotFoundError(f"no relation with id {rid!r} in this graph")
        return found[rid]

    def entities(self, ids: Sequence[str]) -> dict[str, Entity]:
        fresh = [i for i in ids if ("entity", i) not in self._records]
        return self._get("entity", ids, self.view.entities(fresh) if fresh else {})

    def relations(self, ids: Sequence[str]) -> dict[str, Relation]:
        fresh = [i for i in ids if ("relation", i) not in self._records]
        return self._get("relation", ids, self.view.relations(fresh) if fresh else {})

    def chunks(self, ids: Sequence[str]) -> dict[str, Chunk]:
        fresh = [i for i in ids if ("chunk", i) not in self._records]
        return self._get("chunk", ids, self.view.chunks(fresh) if fresh else {})

    def incident(self, eid: str) -> list[str]:
        ids = dict.fromkeys(self.view.incident(eid))
        for (kind, rid), change in self._records.items():
            if kind != "relation":
                continue
            after = change.after
            if after is not None and eid in (after["source_id"], after["target_id"]):
                ids[rid] = None
            else:
                ids.pop(rid, None)
        return list(ids)

    def named(self, name: str) -> list[Entity]:
        key = _key(name)
        found = {e.id: e for e in self.view.named(name) if ("entity", e.id) not in self._records}
        for (kind, eid), change in self._records.items():
            if kind == "entity" and change.after is not None:
                e = change.record("after")
                if key in {_key(e.name), *(_key(a) for a in e.aliases)}:
                    found[eid] = e
        return list(found.values())

    @property
    def extras(self) -> Extras:
        return self._extras if self._extras is not None else self.view.extras

    # --- writing into the draft --------------------------------------------------------------

    def put(self, kind: str, record: Record | None, rid: str, *, before: Record | None = None,
            into: str | None = None) -> None:
        """Record `record` as the new state of (kind, rid) (None: removed), keeping the first before-state."""
        key = (kind, rid)
        old = self._records.get(key)
        first = old.before if old is not None else (None if before is None else before.model_dump(mode="json"))
        after = None if record is None else record.model_dump(mode="json")
        self._records[key] = Change(kind=kind, id=rid, before=first, after=after,  # type: ignore[arg-type]
                                    into=into if record is None else None)

    def set_extras(self, extras: Extras) -> None:
        old: dict[tuple[str, str], Record] = {("community", c.id): c for c in self.extras.communities}
        old.update({("claim", c.id): c for c in self.extras.claims})
        new: dict[tuple[str, str], Record] = {("community", c.id): c for c in extras.communities}
        new.update({("claim", c.id): c for c in extras.claims})
        for key in old.keys() | new.keys():
            if old.get(key) != new.get(key):
                self.put(key[0], new.get(key), key[1], before=old.get(key))
        self._extras = extras

    @property
    def changes(self) -> tuple[Change, ...]:
        return tuple(c for c in self._records.values() if c.before != c.after)


# --- extras (communities, claims) follow entity and relation changes -----------------------------


def _remap_extras(extras: Extras, entity_map: dict[str, str | None], relation_map: dict[str, str | None],
                  names: dict[str, str]) -> Extras:
    """Communities and claims with entity/relation ids mapped (None: removed; a claim keeps its subject as text)."""
    if not entity_map and not relation_map:
        return extras

    def ids(seq: Sequence[str], mapping: dict[str, str | None]) -> tuple[str, ...]:
        out = (mapping.get(i, i) for i in seq)
        return tuple(dict.fromkeys(i for i in out if i is not None))

    communities = []
    for c in extras.communities:
        ents, rels = ids(c.entity_ids, entity_map), ids(c.relation_ids, relation_map)
        if (ents, rels) != (c.entity_ids, c.relation_ids):
            c = c.model_copy(update={"entity_ids": ents, "relation_ids": rels, "size": len(ents)})
        communities.append(c)
    claims = []
    for claim in extras.claims:
        update: dict[str, Any] = {}
        for field_id, field_text in (("subject_id", "subject"), ("object_id", "object")):
            old = getattr(claim, field_id)
            if old is not None and old in entity_map:
                new = entity_map[old]
                update[field_id] = new
                if new is None and not getattr(claim, field_text):
                    update[field_text] = names.get(old, old)
        claims.append(claim.model_copy(update=update) if update else claim)
    return Extras(tuple(communities), tuple(claims), extras.chapter_names)


def relation_id(source_id: str, relation_type: str, target_id: str) -> str:
    """The id of a relation an analyst adds: a short hash of (source, type, target), as bundles make them."""
    key = "\x1f".join((source_id, relation_type, target_id)).encode("utf-8", "surrogatepass")
    return "r:" + hashlib.sha256(key).hexdigest()[:16]


def _join(texts: Sequence[str]) -> str:
    """Distinct non-empty texts, one per line, first-seen order."""
    return "\n".join(dict.fromkeys(t.strip() for t in texts if t and t.strip()))


# --- merge ----------------------------------------------------------------------------------------


class MergePreview(Record):
    """What merging `entity_ids` into the first gives, and what the analyst must decide first."""

    entity: Entity
    merged: tuple[Entity, ...]
    conflicts: dict[str, tuple[str, ...]] = {}  # field -> the differing values (name, type, description)
    relations_repointed: int = 0
    combined: tuple[tuple[str, str], ...] = ()  # (removed relation id, the parallel one it joined)
    self_loops: tuple[str, ...] = ()  # relations between the merged entities, removed
    communities: int = 0  # communities whose members change
    claims: int = 0


def _check_merge(op: MergeEntities) -> tuple[str, ...]:
    ids = tuple(op.entity_ids)
    if len(ids) < 2:
        raise ValidationError("a merge needs two or more entities")
    if len(set(ids)) < len(ids):
        same = next(i for i in ids if ids.count(i) > 1)
        raise ValidationError(f"an entity cannot be merged with itself ({same!r} is named twice)")
    return ids


def _merge(draft: Draft, op: MergeEntities) -> MergePreview:
    ids = _check_merge(op)
    found = draft.entities(list(ids))
    missing = [i for i in ids if i not in found]
    if missing:
        raise NotFoundError(f"cannot merge: no entity with id {missing[0]!r} in this graph")
    members = [found[i] for i in ids]
    keep = members[0]
    names = [e.name for e in members]
    types = list(dict.fromkeys(e.type for e in members))
    descriptions = [e.description for e in members if e.description.strip()]
    conflicts = {"name": tuple(dict.fromkeys(names))}
    if len(types) > 1:
        conflicts["type"] = tuple(types)
    if len(set(descriptions)) > 1:
        conflicts["description"] = tuple(dict.fromkeys(descriptions))
    name = check_name(op.name) if op.name is not None else keep.name
    known_types = [t for t in types if t.strip().lower() not in UNKNOWN_TYPES]
    etype = check_type(op.type) if op.type is not None else (keep.type if keep.type in known_types or not
                                                               known_types else known_types[0])
    description = check_text(op.description, "description", empty=True) if op.description is not None \
        else _join(descriptions)
    aliases = [a for e in members for a in (e.name, *e.aliases)]
    properties: dict[str, Any] = {}
    for e in reversed(members):  # the first entity's values win
        properties.update(e.properties)
    merged = keep.model_copy(update={
        "name": name, "type": etype, "description": description,
        "aliases": tuple(dict.fromkeys(a for a in aliases if _key(a) != _key(name))),
        "source_chunks": tuple(dict.fromkeys(c for e in members for c in e.source_chunks)),
        "properties": properties,
    })
    others = set(ids[1:])
    rel_ids = list(dict.fromkeys(r for i in ids for r in draft.incident(i)))
    rels = draft.relations(rel_ids)
    repointed = 0
    parallel: dict[tuple[str, str, str], Relation] = {}
    combined: list[tuple[str, str]] = []
    self_loops: list[str] = []
    updates: dict[str, Relation | None] = {}
    # the surviving entity's own relations first, so a parallel relation joins the one it already has
    ordered = sorted(rels.values(), key=lambda r: (r.source_id not in (keep.id,) and r.target_id != keep.id, r.id))
    for r in ordered:
        s = keep.id if r.source_id in others else r.source_id
        t = keep.id if r.target_id in others else r.target_id
        if s == t == keep.id and r.source_id != r.target_id:
            self_loops.append(r.id)
            updates[r.id] = None
            continue
        moved = (s, t) != (r.source_id, r.target_id)
        repointed += moved
        key = (s, r.relation_type, t)
        if key in parallel:
            first = parallel[key]
            joined = first.model_copy(update={
                "description": _join([first.description, r.description]),
                "weight": first.weight + r.weight,
                "source_chunks": tuple(dict.fromkeys([*first.source_chunks, *r.source_chunks])),
            })
            parallel[key] = joined
            updates[first.id] = joined
            updates[r.id] = None
            combined.append((r.id, first.id))
            continue
        parallel[key] = r.model_copy(update={"source_id": s, "target_id": t})
        if moved:
            updates[r.id] = parallel[key]
    entity_map: dict[str, str | None] = {i: keep.id for i in others}
    relation_map: dict[str, str | None] = {rid: into for rid, into in combined}
    relation_map.update(dict.fromkeys(self_loops))
    extras = _remap_extras(draft.extras, entity_map, relation_map, {e.id: e.name for e in members})
    preview = MergePreview(
        entity=merged, merged=tuple(members), conflicts=conflicts, relations_repointed=repointed,
        combined=tuple(combined), self_loops=tuple(self_loops),
        communities=sum(a != b for a, b in zip(extras.communities, draft.extras.communities, strict=True)),
        claims=sum(a != b for a, b in zip(extras.claims, draft.extras.claims, strict=True)),
    )
    draft.put("entity", merged, keep.id, before=keep)
    for e in members[1:]:
        draft.put("entity", None, e.id, before=e, into=keep.id)
    for rid, new in updates.items():
        draft.put("relation", new, rid, before=rels[rid], into=relation_map.get(rid))
    draft.set_extras(extras)
    return preview


def merge_preview(view: GraphView, op: MergeEntities) -> MergePreview:
    """The merged entity, the conflicts to resolve, and what happens to relations, communities and claims.

    Defaults when the analyst resolves nothing: the first entity's name; its type unless it is unknown and
    another's is known; every distinct description kept, one per line. Aliases: every other name and alias.
    """
    return _merge(Draft(view), op)


# --- the other operations -------------------------------------------------------------------------


def _delete_entity(draft: Draft, eid: str) -> None:
    entity = draft.entity(eid)
    rels = draft.relations(draft.incident(eid))
    for rid, r in rels.items():
        draft.put("relation", None, rid, before=r)
    draft.put("entity", None, eid, before=entity)
    draft.set_extras(_remap_extras(draft.extras, {eid: None}, dict.fromkeys(rels), {eid: entity.name}))


def _add_relation(draft: Draft, op: AddRelation) -> None:
    if op.source_id == op.target_id:
        raise ValidationError("a relation must join two different entities (a self-loop says nothing)")
    ends = draft.entities([op.source_id, op.target_id])
    for end in (op.source_id, op.target_id):
        if end not in ends:
            raise NotFoundError(f"no entity with id {end!r} in this graph")
    rtype = check_type(op.relation_type, "relation type")
    rid = relation_id(op.source_id, rtype, op.target_id)
    if draft.relations([rid]):
        raise ValidationError(f"{ends[op.source_id].name!r} -[{rtype}]-> {ends[op.target_id].name!r} exists "
                              f"already (relation {rid!r}); edit that relation instead")
    chunks: tuple[str, ...] = ()
    if op.source_chunk:
        if not draft.chunks([op.source_chunk]):
            raise NotFoundError(f"no chunk with id {op.source_chunk!r} in this graph")
        chunks = (op.source_chunk,)
    draft.put("relation", Relation(
        id=rid, source_id=op.source_id, target_id=op.target_id, relation_type=rtype,
        description=check_text(op.description, "description", empty=True), weight=check_weight(op.weight),
        source_chunks=chunks,
    ), rid)


def _entity_edit(draft: Draft, op: Op) -> None:
    entity = draft.entity(op.entity_id)  # type: ignore[union-attr]
    update: dict[str, Any]
    match op:
        case RenameEntity():
            name = check_name(op.name)
            others = [e for e in draft.named(name) if e.id != entity.id]
            if others:
                raise NameTaken(name, entity.id, others)
            update = {"name": name}
        case SetEntityType():
            update = {"type": check_type(op.type, "entity type")}
        case SetEntityDescription():
            update = {"description": check_text(op.description, "description", empty=True)}
            if len((entity.name + update["description"]).encode("utf-8")) + 2 > 65_535:
                raise ValidationError("name + description are more than the 65,535 bytes a store can hold")
        case AddAlias():
            alias = check_name(op.alias, "alias")
            if _key(alias) in {_key(entity.name), *(_key(a) for a in entity.aliases)}:
                raise ValidationError(f"{entity.name!r} is already called {alias!r}")
            update = {"aliases": (*entity.aliases, alias)}
        case RemoveAlias():
            kept = tuple(a for a in entity.aliases if _key(a) != _key(op.alias))
            if len(kept) == len(entity.aliases):
                raise NotFoundError(f"{entity.name!r} has no alias {op.alias!r}")
            update = {"aliases": kept}
        case _:
            raise AssertionError(op)
    draft.put("entity", entity.model_copy(update=update), entity.id, before=entity)


def _relation_edit(draft: Draft, op: Op) -> None:
    rel = draft.relation(op.relation_id)  # type: ignore[union-attr]
    update: dict[str, Any]
    match op:
        case SetRelationType():
            update = {"relation_type": check_type(op.relation_type, "relation type")}
        case SetRelationDescription():
            update = {"description": check_text(op.description, "description", empty=True)}
        case SetRelationWeight():
            update = {"weight": check_weight(op.weight)}
        case ReverseRelation():
            if rel.source_id == rel.target_id:
                raise ValidationError("a relation from an entity to itself has no direction to reverse")
            update = {"source_id": rel.target_id, "target_id": rel.source_id}
        case DeleteRelation():
            draft.put("relation", None, rel.id, before=rel)
            draft.set_extras(_remap_extras(draft.extras, {}, {rel.id: None}, {}))
            return
        case _:
            raise AssertionError(op)
    draft.put("relation", rel.model_copy(update=update), rel.id, before=rel)


def _add_documents(draft: Draft, op: AddDocuments) -> None:
    existing = draft.chunks([c.id for c in op.chunks])
    if existing:
        first = next(iter(existing))
        raise ValidationError(f"chunk {first!r} is in the graph already: that document was added before")
    for c in op.chunks:
        draft.put("chunk", c, c.id)
    have = draft.entities([e.id for e in op.entities])
    for e in op.entities:
        old = have.get(e.id)
        if old is None:
            draft.put("entity", e, e.id)
            continue
        draft.put("entity", old.model_copy(update={
            "source_chunks": tuple(dict.fromkeys([*old.source_chunks, *e.source_chunks])),
            "aliases": tuple(dict.fromkeys([*old.aliases, *(a for a in e.aliases if _key(a) != _key(old.name))])),
            "description": old.description or e.description,
        }), e.id, before=old)
    ends = sorted({i for r in op.relations for i in (r.source_id, r.target_id)})
    missing = [i for i in ends if i not in draft.entities(ends)]
    if missing:
        raise NotFoundError(f"an added relation names no entity with id {missing[0]!r} in this graph or in the "
                            "added documents")
    rels = draft.relations([r.id for r in op.relations])
    for r in op.relations:
        old_r = rels.get(r.id)
        if old_r is None:
            draft.put("relation", r, r.id)
            continue
        draft.put("relation", old_r.model_copy(update={
            "source_chunks": tuple(dict.fromkeys([*old_r.source_chunks, *r.source_chunks])),
            "weight": old_r.weight + r.weight,
        }), r.id, before=old_r)


def _remove_document(draft: Draft, op: RemoveDocument) -> None:
    gone = set(draft.view.document_chunks(op.document))
    if not gone:
        raise NotFoundError(f"no document {op.document!r} in this graph (a book title or a source file)")
    for cid, chunk in draft.chunks(sorted(gone)).items():
        draft.put("chunk", None, cid, before=chunk)
    entities = draft.entities(draft.view.linked(sorted(gone)))
    dead: set[str] = set()
    for eid, e in entities.items():
        kept = tuple(c for c in e.source_chunks if c not in gone)
        if kept == e.source_chunks:
            continue
        if not kept:
            dead.add(eid)
        else:
            draft.put("entity", e.model_copy(update={"source_chunks": kept}), eid, before=e)
    touched = list(dict.fromkeys(r for eid in entities for r in draft.incident(eid)))
    dead_rels: set[str] = set()
    for rid, r in draft.relations(touched).items():
        kept = tuple(c for c in r.source_chunks if c not in gone)
        if r.source_id in dead or r.target_id in dead or (r.source_chunks and not kept):
            dead_rels.add(rid)
            draft.put("relation", None, rid, before=r)
        elif kept != r.source_chunks:
            draft.put("relation", r.model_copy(update={"source_chunks": kept}), rid, before=r)
    for eid in sorted(dead):
        draft.put("entity", None, eid, before=entities[eid])
    draft.set_extras(_remap_extras(draft.extras, dict.fromkeys(dead), dict.fromkeys(dead_rels),
                                   {eid: entities[eid].name for eid in dead}))


def apply_op(draft: Draft, op: Op) -> None:
    """Check `op` on its own (`check_op`: every operation, from an edit, an import or a replay, passes the same
    checks), then against the graph as the draft sees it, and record what it changes (errors name the problem)."""
    op = check_op(op)
    match op:
        case MergeEntities():
            _merge(draft, op)
        case DeleteEntity():
            _delete_entity(draft, op.entity_id)
        case AddRelation():
            _add_relation(draft, op)
        case RenameEntity() | SetEntityType() | SetEntityDescription() | AddAlias() | RemoveAlias():
            _entity_edit(draft, op)
        case SetRelationType() | SetRelationDescription() | SetRelationWeight() | ReverseRelation() \
                | DeleteRelation():
            _relation_edit(draft, op)
        case AddDocuments():
            _add_documents(draft, op)
        case RemoveDocument():
            _remove_document(draft, op)
        case _:
            raise AssertionError(f"unknown operation {op!r}")


def compile_ops(view: GraphView, ops: Sequence[Op]) -> tuple[Change, ...]:
    """Every record `ops` change, before and after, in the order first touched (ValidationError /
    NotFoundError for an operation that cannot apply; nothing is written)."""
    if not ops:
        raise ValidationError("a changeset needs at least one operation")
    draft = Draft(view)
    for op in ops:
        apply_op(draft, op)
    return draft.changes


def claims_of(changes: Sequence[Change]) -> list[Claim]:
    return [c.record("after") for c in changes if c.kind == "claim" and c.after is not None]


def communities_of(changes: Sequence[Change]) -> list[Community]:
    return [c.record("after") for c in changes if c.kind == "community" and c.after is not None]
