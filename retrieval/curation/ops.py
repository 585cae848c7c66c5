"""The curation vocabulary: the operations an analyst applies, the before and after of every record one touches,
and the changesets that group them (author, time, reason)."""

from __future__ import annotations

import json
import math
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from retrieval.errors import ValidationError
from retrieval.models import Chunk, Claim, Community, Entity, Record, Relation

MAX_NAME_CHARS = 500  # an entity name or alias (descriptions may be long; a name is a label)
MAX_TYPE_CHARS = 100  # an entity or relation type
MAX_TEXT_BYTES = 65_535  # what a store can hold in one string (Milvus VARCHAR)
MAX_REASON_CHARS = 2_000
MAX_WEIGHT = 1e12


def check_text(value: str, what: str, *, max_chars: int | None = None, empty: bool = False,
               strip: bool = True) -> str:
    """`value` stripped (unless `strip` is off), refused (ValidationError naming `what`) if empty, too long, or not
    storable."""
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be text, got {type(value).__name__}")
    text = value.strip() if strip else value
    if not text and not empty:
        raise ValidationError(f"{what} must not be empty")
    if "\x00" in text:
        raise ValidationError(f"{what} contains a NUL character, which no store can hold")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ValidationError(f"{what} contains a lone surrogate (not valid Unicode)") from exc
    if max_chars is not None and len(text) > max_chars:
        raise ValidationError(f"{what} is {len(text):,} characters long; the limit is {max_chars:,}")
    if size > MAX_TEXT_BYTES:
        raise ValidationError(f"{what} is {size:,} bytes of UTF-8; at most {MAX_TEXT_BYTES:,} can be stored")
    return text


def check_name(value: str, what: str = "name") -> str:
    return check_text(value, what, max_chars=MAX_NAME_CHARS)


def check_type(value: str, what: str = "type") -> str:
    return check_text(value, what, max_chars=MAX_TYPE_CHARS)


def check_weight(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not 0 <= value <= MAX_WEIGHT:
        raise ValidationError(f"weight must be a number from 0 to {MAX_WEIGHT:g}, got {value!r}")
    return float(value)


# --- operations -------------------------------------------------------------------------------


class RenameEntity(Record):
    op: Literal["rename_entity"] = "rename_entity"
    entity_id: str
    name: str


class SetEntityType(Record):
    op: Literal["set_entity_type"] = "set_entity_type"
    entity_id: str
    type: str


class SetEntityDescription(Record):
    op: Literal["set_entity_description"] = "set_entity_description"
    entity_id: str
    description: str


class AddAlias(Record):
    op: Literal["add_alias"] = "add_alias"
    entity_id: str
    alias: str


class RemoveAlias(Record):
    op: Literal["remove_alias"] = "remove_alias"
    entity_id: str
    alias: str


class DeleteEntity(Record):
    op: Literal["delete_entity"] = "delete_entity"
    entity_id: str


class SetRelationType(Record):
    op: Literal["set_relation_type"] = "set_relation_type"
    relation_id: str
    relation_type: str


class SetRelationDescription(Record):
    op: Literal["set_relation_description"] = "set_relation_description"
    relation_id: str
    description: str


class SetRelationWeight(Record):
    op: Literal["set_relation_weight"] = "set_relation_weight"
    relation_id: str
    weight: float


class ReverseRelation(Record):
    op: Literal["reverse_relation"] = "reverse_relation"
    relation_id: str


class DeleteRelation(Record):
    op: Literal["delete_relation"] = "delete_relation"
    relation_id: str


class AddRelation(Record):
    op: Literal["add_relation"] = "add_relation"
    source_id: str
    target_id: str
    relation_type: str
    description: str = ""
    weight: float = 1.0
    source_chunk: str = ""  # optional: the chunk that states it


class MergeEntities(Record):
    """Merge `entity_ids` into the first; `name`, `type`, `description` resolve the conflicts (None: the
    default rule of `retrieval.curation.compile.merge_preview`)."""

    op: Literal["merge_entities"] = "merge_entities"
    entity_ids: tuple[str, ...]
    name: str | None = None
    type: str | None = None
    description: str | None = None


class AddDocuments(Record):
    """New chunks with what was extracted from them; entities and relations that exist already gain sources."""

    op: Literal["add_documents"] = "add_documents"
    documents: tuple[str, ...] = ()  # the books added (for the log)
    chunks: tuple[Chunk, ...] = ()
    entities: tuple[Entity, ...] = ()
    relations: tuple[Relation, ...] = ()


class RemoveDocument(Record):
    """Remove a document's chunks, and the entities and relations no other chunk supports."""

    op: Literal["remove_document"] = "remove_document"
    document: str


Op = Annotated[
    RenameEntity | SetEntityType | SetEntityDescription | AddAlias | RemoveAlias | DeleteEntity | SetRelationType
    | SetRelationDescription | SetRelationWeight | ReverseRelation | DeleteRelation | AddRelation | MergeEntities
    | AddDocuments | RemoveDocument,
    Field(discriminator="op"),
]
OPS: TypeAdapter[Op] = TypeAdapter(Op)
OP_NAMES = tuple(sorted(cls.model_fields["op"].default for cls in (
    RenameEntity, SetEntityType, SetEntityDescription, AddAlias, RemoveAlias, DeleteEntity, SetRelationType,
    SetRelationDescription, SetRelationWeight, ReverseRelation, DeleteRelation, AddRelation, MergeEntities,
    AddDocuments, RemoveDocument)))


def op_targets(op: Op) -> list[tuple[str, str]]:
    """(kind, id) of the existing records an operation names (what a draft "still uses")."""
    if isinstance(op, MergeEntities):
        return [("entity", i) for i in op.entity_ids]
    if isinstance(op, AddRelation):
        return [("entity", op.source_id), ("entity", op.target_id)]
    if hasattr(op, "entity_id"):
        return [("entity", op.entity_id)]
    if hasattr(op, "relation_id"):
        return [("relation", op.relation_id)]
    return []


def describe_op(op: Op, names: dict[str, str] | None = None) -> str:
    """One line saying what an operation does (names shown where known)."""
    n = names or {}

    def who(eid: str) -> str:
        return repr(n.get(eid, eid))

    match op:
        case RenameEntity():
            return f"rename {who(op.entity_id)} to {op.name!r}"
        case SetEntityType():
            return f"set the type of {who(op.entity_id)} to {op.type!r}"
        case SetEntityDescription():
            return f"edit the description of {who(op.entity_id)}"
        case AddAlias():
            return f"add alias {op.alias!r} to {who(op.entity_id)}"
        case RemoveAlias():
            return f"remove alias {op.alias!r} from {who(op.entity_id)}"
        case DeleteEntity():
            return f"delete entity {who(op.entity_id)}"
        case SetRelationType():
            return f"set the type of relation {op.relation_id!r} to {op.relation_type!r}"
        case SetRelationDescription():
            return f"edit the description of relation {op.relation_id!r}"
        case SetRelationWeight():
            return f"set the weight of relation {op.relation_id!r} to {op.weight:g}"
        case ReverseRelation():
            return f"reverse relation {op.relation_id!r}"
        case DeleteRelation():
            return f"delete relation {op.relation_id!r}"
        case AddRelation():
            return f"add relation {who(op.source_id)} -[{op.relation_type}]-> {who(op.target_id)}"
        case MergeEntities():
            return f"merge {', '.join(who(i) for i in op.entity_ids)}"
        case AddDocuments():
            return f"add {len(op.documents) or len({c.original_document for c in op.chunks})} document(s), " \
                   f"{len(op.chunks)} chunks"
        case RemoveDocument():
            return f"remove document {op.document!r}"
    raise AssertionError(f"unknown operation {op!r}")


# --- checking an operation on its own ------------------------------------------------------------

MAX_ID_BYTES = 512  # bytes of UTF-8 in a record id: the vector stores' primary-key limit (stores/milvus.MAX_ID)


def _show(value: str) -> str:
    return repr(value if len(value) <= 60 else value[:59] + "…")


def check_id(value: str, what: str) -> str:
    """A record id as given (ids are keys: never stripped), refused if empty, not storable or over 512 bytes."""
    check_text(value, what, strip=False)
    size = len(value.encode("utf-8"))
    if size > MAX_ID_BYTES:
        raise ValidationError(f"{what} {_show(value)} is {size:,} bytes of UTF-8; the limit is {MAX_ID_BYTES}")
    return value


def check_entity(e: Entity) -> Entity:
    """An entity record an operation adds, checked as an edit checks each of its fields; its texts stripped."""
    eid = check_id(e.id, "entity id")
    at = f"entity {_show(eid)}"
    name = check_name(e.name, f"{at}: name")
    description = check_text(e.description, f"{at}: description", empty=True)
    if len((name + description).encode("utf-8")) + 2 > MAX_TEXT_BYTES:
        raise ValidationError(f"{at}: name + description are more than the {MAX_TEXT_BYTES:,} bytes a store can hold")
    try:
        props = json.dumps(e.properties, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as exc:
        raise ValidationError(f"{at}: properties cannot be stored: {exc}") from exc
    if len(props) > MAX_TEXT_BYTES:
        raise ValidationError(f"{at}: properties are {len(props):,} bytes of JSON; at most {MAX_TEXT_BYTES:,} can be "
                              "stored")
    for c in e.source_chunks:
        check_id(c, f"{at}: source chunk")
    return e.model_copy(update={"name": name, "type": check_type(e.type, f"{at}: type"), "description": description,
                                "aliases": tuple(check_name(a, f"{at}: alias") for a in e.aliases)})


def check_relation(r: Relation) -> Relation:
    """A relation record an operation adds: ids, two different ends, type, description, weight; texts stripped."""
    at = f"relation {_show(check_id(r.id, 'relation id'))}"
    for end in (r.source_id, r.target_id):
        check_id(end, f"{at}: end")
    if r.source_id == r.target_id:
        raise ValidationError(f"{at}: a relation must join two different entities (a self-loop says nothing)")
    for c in r.source_chunks:
        check_id(c, f"{at}: source chunk")
    return r.model_copy(update={"relation_type": check_type(r.relation_type, f"{at}: type"),
                                "description": check_text(r.description, f"{at}: description", empty=True),
                                "weight": check_weight(r.weight)})


def check_chunk(c: Chunk) -> Chunk:
    """A chunk an operation adds: its id, its text (not empty) and its book, chapter, author and source."""
    at = f"chunk {_show(check_id(c.id, 'chunk id'))}"
    check_text(c.text, f"{at}: text")
    for field in ("source", "original_document", "chapter", "author"):
        check_text(getattr(c, field), f"{at}: {field}", empty=True)
    if c.position < 0:
        raise ValidationError(f"{at}: position must not be negative, got {c.position}")
    return c


def check_op(op: Op) -> Op:
    """`op` checked on its own, before the graph is read: ids, names, types, texts, weights and self-loops, with
    the limits of an edit (`compile` then checks it against the graph). Its added records come back stripped."""
    for field in ("entity_id", "relation_id", "source_id", "target_id"):
        if hasattr(op, field):
            check_id(getattr(op, field), field.replace("_", " "))
    match op:
        case RenameEntity():
            check_name(op.name)
        case AddAlias() | RemoveAlias():
            check_name(op.alias, "alias")
        case SetEntityType():
            check_type(op.type, "entity type")
        case SetRelationType():
            check_type(op.relation_type, "relation type")
        case SetEntityDescription() | SetRelationDescription():
            check_text(op.description, "description", empty=True)
        case SetRelationWeight():
            check_weight(op.weight)
        case AddRelation():
            if op.source_id == op.target_id:
                raise ValidationError("a relation must join two different entities (a self-loop says nothing)")
            check_type(op.relation_type, "relation type")
            check_text(op.description, "description", empty=True)
            check_weight(op.weight)
            if op.source_chunk:
                check_id(op.source_chunk, "source chunk")
        case MergeEntities():
            for eid in op.entity_ids:
                check_id(eid, "entity id")
            if op.name is not None:
                check_name(op.name)
            if op.type is not None:
                check_type(op.type)
            if op.description is not None:
                check_text(op.description, "description", empty=True)
        case AddDocuments():
            return op.model_copy(update={
                "documents": tuple(check_text(d, "document", empty=True) for d in op.documents),
                "chunks": tuple(check_chunk(c) for c in op.chunks),
                "entities": tuple(check_entity(e) for e in op.entities),
                "relations": tuple(check_relation(r) for r in op.relations)})
        case RemoveDocument():
            check_text(op.document, "document")
    return op


# --- what an operation changed ----------------------------------------------------------------

Kind = Literal["entity", "relation", "chunk", "community", "claim"]
RECORD_TYPES: dict[str, type[Record]] = {
    "entity": Entity, "relation": Relation, "chunk": Chunk, "community": Community, "claim": Claim,
}


class Change(Record):
    """One record before and after a changeset (None: absent). `into`: the record that took over a removed
    one (a merged entity, a combined parallel relation), so that grades and history follow it."""

    kind: Kind
    id: str
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    into: str | None = None

    def record(self, which: Literal["before", "after"]) -> Any:
        value = self.before if which == "before" else self.after
        return None if value is None else RECORD_TYPES[self.kind].model_validate(value)

    def inverse(self) -> Change:
        return Change(kind=self.kind, id=self.id, before=self.after, after=self.before)


Action = Literal["edit", "undo", "redo"]
State = Literal["draft", "applying", "applied", "undone", "rolled_back", "skipped"]


class Changeset(Record):
    """A unit of curation: who, when, why, the operations asked for and every record they changed.

    An edit is `applied` (or `undone`, once an undo acted on it); an undo or redo is its own entry naming the
    edit it acted on (`target`). `applying`: written before the stores were touched, so a crash says so.
    `skipped`: a re-import could not replay it (its target is gone or changed upstream); redo applies it again.
    """

    id: int = 0
    graph: str
    action: Action = "edit"
    target: int | None = None
    author: str
    created_at: str = ""
    reason: str = ""
    ops: tuple[Op, ...] = ()
    changes: tuple[Change, ...] = ()
    state: State = "applying"
    version: str = ""  # the graph version it was applied to
    generation: int = 0  # the graph's generation once it was applied

    def names(self) -> dict[str, str]:
        """Entity id -> the name it had when the operations were asked for (from the records changed)."""
        side = "after" if self.action == "undo" else "before"
        out = {}
        for c in self.changes:
            rec = getattr(c, side) or c.after or c.before or {}
            if c.kind == "entity" and "name" in rec:
                out[c.id] = rec["name"]
        return out

    def summary(self, names: dict[str, str] | None = None) -> str:
        names = {**self.names(), **(names or {})}
        what = "; ".join(describe_op(op, names) for op in self.ops) if self.ops else ""
        if self.action != "edit":
            what = f"{self.action} of #{self.target}" + (f" ({what})" if what else "")
        counts = count_changes(self.changes)
        return f"#{self.id} {self.author} {self.created_at[:19]} [{self.state}] {what}: {counts}"


def count_changes(changes: tuple[Change, ...] | list[Change]) -> str:
    """`2 entities changed, 1 removed, 3 relations changed` ..."""
    tally: dict[tuple[str, str], int] = {}
    for c in changes:
        verb = "added" if c.before is None else "removed" if c.after is None else "changed"
        tally[(c.kind, verb)] = tally.get((c.kind, verb), 0) + 1
    plural = {"entity": "entities", "relation": "relations", "chunk": "chunks", "community": "communities",
              "claim": "claims"}
    parts = [f"{n} {plural[k] if n != 1 else k} {verb}" for (k, verb), n in sorted(tally.items())]
    return ", ".join(parts) or "nothing changed"


def _short(value: Any, limit: int = 80) -> str:
    text = " ".join(str(value).split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def change_lines(changes: tuple[Change, ...] | list[Change], limit: int = 40,
                 names: dict[str, str] | None = None) -> list[str]:
    """What changed, one line per entity or relation (fields before → after); chunks, communities and claims
    counted. `names`: entity names for relation ends the changes do not hold."""
    names = {**(names or {}), **{c.id: (c.after or c.before or {}).get("name", c.id) for c in changes
                                 if c.kind == "entity"}}

    def label(kind: str, rec: dict[str, Any]) -> str:
        if kind == "entity":
            return f"entity {_short(rec.get('name', ''), 60)}"
        ends = (names.get(rec.get("source_id", ""), rec.get("source_id", "")),
                names.get(rec.get("target_id", ""), rec.get("target_id", "")))
        return f"relation {_short(ends[0], 40)} -[{rec.get('relation_type', '')}]-> {_short(ends[1], 40)}"

    lines: list[str] = []
    counted: dict[str, int] = {}
    for c in changes:
        if c.kind not in ("entity", "relation"):
            verb = "added" if c.before is None else "removed" if c.after is None else "changed"
            counted[f"{c.kind} {verb}"] = counted.get(f"{c.kind} {verb}", 0) + 1
            continue
        rec = c.after or c.before or {}
        if c.before is None:
            lines.append(f"+ {label(c.kind, rec)} added")
        elif c.after is None:
            into = f" (into {_short(names.get(c.into, c.into), 60)})" if c.into else ""
            lines.append(f"- {label(c.kind, rec)} removed{into}")
        else:
            diffs = [f"{k}: {_short(c.before.get(k))} → {_short(v)}" for k, v in c.after.items()
                     if c.before.get(k) != v]
            lines.append(f"~ {label(c.kind, c.before)}: {'; '.join(diffs)}")
    if len(lines) > limit:
        lines = [*lines[:limit], f"… and {len(lines) - limit} more"]
    return lines + [f"  {n} {what}" for what, n in counted.items()]
