"""Corrections survive a re-import: the curation log of a graph name is replayed onto a new version of it.

Each edit in force is compiled again against the new data (its targets found by id, else by the name they had
when edited) and written to the new version's stores before that version is committed, so nobody sees it
uncorrected. An edit whose target is gone, or whose field changed upstream since the edit, is skipped with the
reason; every edit is listed (applied / skipped), never dropped silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from retrieval.curation.compile import compile_ops
from retrieval.curation.log import CurationLog, ReplayLine, has_log
from retrieval.curation.ops import (
    AddRelation,
    Change,
    Changeset,
    MergeEntities,
    Op,
    RenameEntity,
    SetEntityDescription,
    SetEntityType,
    SetRelationDescription,
    SetRelationType,
    SetRelationWeight,
)
from retrieval.curation.views import StoreView
from retrieval.curation.write import Version, write_changes
from retrieval.errors import RetrievalError
from retrieval.models import Record

# the field each single-field edit changes: replayed only if the new data still has the value it was edited from
_FIELD = {
    RenameEntity: ("entity", "name"), SetEntityType: ("entity", "type"),
    SetEntityDescription: ("entity", "description"), SetRelationType: ("relation", "relation_type"),
    SetRelationDescription: ("relation", "description"), SetRelationWeight: ("relation", "weight"),
}


class Replayed(Record):
    """One replayed edit: its report line and, if applied, what it changed in the new version."""

    line: ReplayLine
    changes: tuple[Change, ...] = ()


def _recorded(cs: Changeset, kind: str, rid: str) -> dict[str, Any] | None:
    return next((c.before for c in cs.changes if (c.kind, c.id) == (kind, rid)), None)


def _resolve(view: StoreView, cs: Changeset, eid: str, notes: list[str]) -> str:
    """The id of the entity an edit named: the same id, else the one entity now called what it was called."""
    if view.entities([eid]):
        return eid
    before = _recorded(cs, "entity", eid)
    name = before.get("name") if before else None
    if name:
        found = view.named(name)
        if len(found) == 1:
            notes.append(f"{name!r} found by name (id {found[0].id!r}, was {eid!r})")
            return found[0].id
    raise LookupError(f"entity {name or eid!r} is not in the new data")


def _retarget(view: StoreView, cs: Changeset, op: Op, notes: list[str]) -> Op:
    """`op` with its entity ids found in the new data (LookupError if one is gone)."""
    if isinstance(op, MergeEntities):
        found, gone = [], []
        for eid in op.entity_ids:
            try:
                found.append(_resolve(view, cs, eid, notes))
            except LookupError as exc:
                gone.append(str(exc))
        if len(found) < 2:
            raise LookupError("; ".join(gone) or "fewer than two of the merged entities are in the new data")
        notes.extend(gone)
        return op.model_copy(update={"entity_ids": tuple(dict.fromkeys(found))})
    if isinstance(op, AddRelation):
        return op.model_copy(update={"source_id": _resolve(view, cs, op.source_id, notes),
                                     "target_id": _resolve(view, cs, op.target_id, notes)})
    if hasattr(op, "entity_id"):
        return op.model_copy(update={"entity_id": _resolve(view, cs, op.entity_id, notes)})  # type: ignore[union-attr]
    if hasattr(op, "relation_id") and not view.relations([op.relation_id]):  # type: ignore[union-attr]
        raise LookupError(f"relation {op.relation_id!r} is not in the new data")  # type: ignore[union-attr]
    return op


def _upstream_change(view: StoreView, cs: Changeset, op: Op) -> str:
    """Why a single-field edit no longer applies (its field changed upstream since), or ''."""
    spec = _FIELD.get(type(op))
    if spec is None:
        return ""
    kind, field = spec
    target = str(getattr(op, "entity_id", None) or getattr(op, "relation_id", ""))
    before = _recorded(cs, kind, target)
    now = (view.entities([target]) if kind == "entity" else view.relations([target])).get(target)
    if before is None or now is None or field not in before:
        return ""
    if getattr(now, field) != before[field]:
        return f"{field} changed upstream: it is {getattr(now, field)!r} in the new data (was {before[field]!r} " \
               "when edited)"
    return ""


def replay(log: CurationLog, version: Version, view: StoreView) -> list[Replayed]:
    """Replay every edit in force onto `version` (its stores, before its commit); one line per edit."""
    out = []
    for cs in log.effective():
        notes: list[str] = []
        try:
            ops = [_retarget(view, cs, op, notes) for op in cs.ops]
            why = next((w for w in (_upstream_change(view, cs, op) for op in ops) if w), "")
            if why:
                raise LookupError(why)
            changes = compile_ops(view, ops)
        except (LookupError, RetrievalError) as exc:
            out.append(Replayed(line=ReplayLine(changeset=cs.id, status="skipped", reason=str(exc),
                                                summary=cs.summary())))
            continue
        if changes:
            write_changes(version, changes)
            version.chunk_ids = _after_chunks(version.chunk_ids, changes)
            version.extras = view.extras = _after_extras(view, changes)
        reason = "; ".join(notes) if notes else ("" if changes else "already so in the new data")
        out.append(Replayed(line=ReplayLine(changeset=cs.id, status="applied", reason=reason,
                                            summary=cs.summary()), changes=changes))
    return out


def _after_chunks(ids: Sequence[str], changes: Sequence[Change]) -> list[str]:
    gone = {c.id for c in changes if c.kind == "chunk" and c.after is None}
    new = [c.id for c in changes if c.kind == "chunk" and c.before is None]
    return [i for i in ids if i not in gone] + new


def _after_extras(view: StoreView, changes: Sequence[Change]) -> Any:
    from retrieval.curation.write import apply_extras

    return apply_extras(view.extras, changes) or view.extras


def pending_log(data_dir: Any, name: str) -> CurationLog | None:
    """The log of graph `name` if it has edits in force (what a re-import must replay), else None."""
    if not has_log(data_dir, name):
        return None
    log = CurationLog(data_dir, name)
    if not log.effective():
        log.close()
        return None
    return log
