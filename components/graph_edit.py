"""Editing the graph from the live graph view: the details panel's edit forms and the context menu's merge and
relate actions come back as events; this module turns them into curation operations, applies them through the
page's `Curation` (authorised on the server, with the revision the editor saw), and says what happened.

Every value in an event is data: it is checked (text, lengths, numbers) by the operations themselves and never
reaches a query other than as a parameter.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from retrieval.curation.compile import NameTaken
from retrieval.curation.ops import (
    AddAlias,
    AddRelation,
    DeleteEntity,
    DeleteRelation,
    MergeEntities,
    Op,
    RemoveAlias,
    RenameEntity,
    ReverseRelation,
    SetEntityDescription,
    SetEntityType,
    SetRelationDescription,
    SetRelationType,
    SetRelationWeight,
    count_changes,
)
from retrieval.errors import ConflictError, RetrievalError
from retrieval.graph.runtime import KG
from ui_records import Curation
from ui_text import clean, short

HISTORY_LINES = 5
MAX_MARKS = 20


@dataclass
class EditState:
    """One view's editing state: entities marked for a merge, a relation's chosen start, the last outcome."""

    marks: list[str] = field(default_factory=list)
    relate_from: str | None = None
    preview: str | None = None  # the entity a merge preview is open on
    notice: str = ""
    error: bool = False
    offer_merge: tuple[str, str] | None = None  # (entity renamed, entity whose name it wanted)


def _text(event: Mapping[str, Any], key: str) -> str | None:
    value = event.get(key)
    return value if isinstance(value, str) else None


def _seen(event: Mapping[str, Any], kind: str, target: str) -> dict[tuple[str, str], int]:
    rev = event.get("rev")
    return {(kind, target): int(rev)} if isinstance(rev, int) and not isinstance(rev, bool) and rev >= 0 else {}


def entity_ops(kg: KG, entity_id: str, event: Mapping[str, Any]) -> list[Op]:
    """The operations a node-form save asks for: only the fields that differ from the stored entity."""
    found = kg.graph.get_entities([entity_id])
    if not found:
        return []
    e = found[0]
    ops: list[Op] = []
    name, etype, description = _text(event, "name"), _text(event, "etype"), _text(event, "description")
    if name is not None and name.strip() != e.name:
        ops.append(RenameEntity(entity_id=entity_id, name=name))
    if etype is not None and etype.strip() != e.type:
        ops.append(SetEntityType(entity_id=entity_id, type=etype))
    if description is not None and description.strip() != e.description.strip():
        ops.append(SetEntityDescription(entity_id=entity_id, description=description))
    return ops


def relation_ops(kg: KG, relation_id: str, event: Mapping[str, Any]) -> list[Op]:
    """The operations an edge-form save asks for: only the fields that differ from the stored relation."""
    found = kg.graph.get_relations([relation_id])
    if not found:
        return []
    r = found[0]
    ops: list[Op] = []
    rtype, description, weight = _text(event, "relation_type"), _text(event, "description"), event.get("weight")
    if rtype is not None and rtype.strip() != r.relation_type:
        ops.append(SetRelationType(relation_id=relation_id, relation_type=rtype))
    if description is not None and description.strip() != r.description.strip():
        ops.append(SetRelationDescription(relation_id=relation_id, description=description))
    if isinstance(weight, str):
        try:
            weight = float(weight)
        except ValueError:
            weight = math.nan
    if isinstance(weight, int | float) and not isinstance(weight, bool) and weight != r.weight:
        ops.append(SetRelationWeight(relation_id=relation_id, weight=float(weight)))
    return ops


def _ops(kg: KG, edit: EditState, event: Mapping[str, Any]) -> tuple[list[Op], dict[tuple[str, str], int]]:
    """The operations an edit event asks for, and the revisions its editor saw."""
    kind, target = event.get("type"), _text(event, "id") or ""
    what = _text(event, "what") or ""
    if kind == "edit_node":
        seen = _seen(event, "entity", target)
        if what == "save":
            return entity_ops(kg, target, event), seen
        if what == "alias_add":
            return [AddAlias(entity_id=target, alias=_text(event, "alias") or "")], seen
        if what == "alias_remove":
            return [RemoveAlias(entity_id=target, alias=_text(event, "alias") or "")], seen
        if what == "delete":
            return [DeleteEntity(entity_id=target)], seen
    if kind == "edit_edge":
        seen = _seen(event, "relation", target)
        if what == "save":
            return relation_ops(kg, target, event), seen
        if what == "reverse":
            return [ReverseRelation(relation_id=target)], seen
        if what == "delete":
            return [DeleteRelation(relation_id=target)], seen
    if kind == "merge":
        ids = (target, *edit.marks)
        return [MergeEntities(entity_ids=tuple(dict.fromkeys(i for i in ids if i)), name=_text(event, "name"),
                              type=_text(event, "etype"), description=_text(event, "description"))], {}
    if kind == "relate" and edit.relate_from:
        return [AddRelation(source_id=edit.relate_from, target_id=target,
                            relation_type=_text(event, "relation_type") or "",
                            description=_text(event, "description") or "")], {}
    return [], {}


def handle(kg: KG, curation: Curation, edit: EditState, event: Mapping[str, Any]) -> str | None:
    """Answer one editing event; returns the node or edge to select afterwards (None: keep the selection)."""
    kind, target = event.get("type"), _text(event, "id") or ""
    if kind == "mark":
        if target in edit.marks:
            edit.marks.remove(target)
        elif target:
            edit.marks = [*edit.marks, target][-MAX_MARKS:]
        return None
    if kind == "merge_preview":
        edit.preview = target or None
        return None
    if kind == "relate_start":
        edit.relate_from = target or None
        return None
    if kind == "cancel":
        edit.preview, edit.relate_from, edit.offer_merge = None, None, None
        return None
    if kind == "offer_merge" and edit.offer_merge:  # a rename onto a taken name: merge into that entity
        renamed, taken = edit.offer_merge
        edit.marks, edit.preview, edit.offer_merge = [renamed], taken, None
        return taken
    try:
        ops, seen = _ops(kg, edit, event)
        if not ops:
            edit.notice, edit.error = "Nothing to change: the graph already says that.", False
            return None
        cs = curation.apply(ops, seen, "edited in the graph view")
    except NameTaken as exc:
        edit.notice, edit.error = clean(exc), True
        edit.offer_merge = (exc.entity_id, exc.others[0].id)
        return None
    except ConflictError as exc:
        attempted = "; ".join(_describe(op) for op in ops)
        edit.notice = f"{clean(exc)}. Your change was not written: {short(attempted, 300)}"
        edit.error = True
        return None
    except (RetrievalError, ValueError) as exc:
        edit.notice, edit.error = f"Not changed: {clean(exc)}", True
        return None
    edit.notice = f"Changeset #{cs.id} by {clean(cs.author)}: {count_changes(cs.changes)}. Undo it on the " \
        "Curation page."
    edit.error = False
    if kind == "merge":
        edit.marks, edit.preview = [], None
        return target
    if kind == "relate":
        edit.relate_from = None
    return None


def _describe(op: Op) -> str:
    fields = {k: v for k, v in op.model_dump().items() if k not in ("op", "entity_id", "relation_id")}
    return f"{op.op} " + ", ".join(f"{k}={short(v, 80)!r}" for k, v in fields.items())


def panel(kg: KG, curation: Curation, edit: EditState, kind: str, target: str,
          names: Mapping[str, str]) -> dict[str, Any]:
    """The edit block of the details panel: the record's revision and recent history, merge marks and preview,
    the relation start, and the last outcome."""
    rec = "entity" if kind == "node" else "relation"
    out: dict[str, Any] = {
        "rev": curation.revision(rec, target),
        "author": clean(curation.author),
        "history": [{"id": h.changeset, "who": clean(h.author), "when": h.created_at[:19].replace("T", " "),
                     "what": short(h.what, 120), "state": h.state}
                    for h in curation.history(rec, target)[-HISTORY_LINES:]][::-1],
        "notice": edit.notice, "error": edit.error, "offer_merge": edit.offer_merge is not None,
        "marks": [[m, clean(names.get(m, m))] for m in edit.marks],
        "relate_from": [edit.relate_from, clean(names.get(edit.relate_from, edit.relate_from))]
        if edit.relate_from else None,
    }
    if kind == "node" and edit.preview == target and edit.marks:
        out["preview"] = merge_panel(curation, target, edit.marks)
    return out


def merge_panel(curation: Curation, keep: str, others: Sequence[str]) -> dict[str, Any]:
    """What merging `others` into `keep` gives, and the conflicts to choose between."""
    try:
        p = curation.preview(MergeEntities(entity_ids=tuple(dict.fromkeys([keep, *others]))))
    except (RetrievalError, ValueError) as exc:
        return {"error": f"Cannot merge: {clean(exc)}"}
    return {
        "name": clean(p.entity.name), "type": clean(p.entity.type), "description": clean(p.entity.description),
        "aliases": [clean(a) for a in p.entity.aliases],
        "merged": [[e.id, clean(e.name), clean(e.type)] for e in p.merged],
        "conflicts": {k: [clean(v) for v in vs] for k, vs in p.conflicts.items()},
        "counts": f"{p.relations_repointed} relations re-pointed, {len(p.combined)} parallel relations combined, "
                  f"{len(p.self_loops)} relations between them removed, {p.communities} communities and "
                  f"{p.claims} claims updated",
    }
