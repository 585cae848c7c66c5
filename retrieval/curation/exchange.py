"""A curation log as JSONL, to review and to replay elsewhere: one changeset per line (`export_log`), applied
again in order on another graph or data directory (`import_log`: each edit compiled afresh, applied or skipped
with the reason, like a re-import)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from pydantic import ValidationError as PydanticValidationError

from retrieval.curation.apply import Curator
from retrieval.curation.log import CurationLog, ReplayLine
from retrieval.curation.ops import Changeset
from retrieval.errors import IngestError, RetrievalError

MAX_LINE_BYTES = 64 * 1024 * 1024  # an add-documents changeset carries its chunks


def export_log(log: CurationLog, path: Path) -> int:
    """Write every changeset (oldest first) as one JSON line; returns how many."""
    rows = log.changesets(newest_first=False)
    tmp = Path(path).with_name(Path(path).name + ".partial")
    with tmp.open("w", encoding="utf-8") as fh:
        for cs in rows:
            fh.write(json.dumps(cs.model_dump(mode="json"), ensure_ascii=False) + "\n")
    tmp.replace(path)
    return len(rows)


def read_log(path: Path) -> list[Changeset]:
    """The changesets of a JSONL export (`file:line: field: reason` for a malformed line)."""
    out = []
    with Path(path).open("rb") as fh:
        for n, raw in enumerate(fh, 1):
            if len(raw) > MAX_LINE_BYTES:
                raise IngestError(str(path), n, "line", f"longer than {MAX_LINE_BYTES} bytes")
            if not raw.strip():
                continue
            try:
                out.append(Changeset.model_validate_json(raw))
            except PydanticValidationError as exc:
                first = exc.errors()[0]
                field = ".".join(str(p) for p in first["loc"]) or "changeset"
                raise IngestError(str(path), n, field, first["msg"]) from exc
    return out


def import_log(curator: Curator, changesets: Iterable[Changeset], *, author: str | None = None,
               source: str = "") -> list[ReplayLine]:
    """Apply the edits in force of an exported log, in order, each as a new changeset here (its operations
    compiled against this graph); one line per edit: applied (the new changeset's id in the reason) or
    skipped with the reason. Undos and redos are not imported: an edit undone there is not in force."""
    lines = []
    for cs in changesets:
        if cs.action != "edit" or cs.state != "applied":
            continue
        why = f"imported from {source} #{cs.id} (by {cs.author} at {cs.created_at[:19]})" if source else \
            f"imported #{cs.id} (by {cs.author})"
        reason = f"{cs.reason} [{why}]" if cs.reason else why
        try:
            new = curator.apply(cs.ops, author=author or cs.author, reason=reason)
        except RetrievalError as exc:
            lines.append(ReplayLine(changeset=cs.id, status="skipped", reason=str(exc), summary=cs.summary()))
            continue
        lines.append(ReplayLine(changeset=cs.id, status="applied", reason=f"as #{new.id}", summary=new.summary()))
    return lines
