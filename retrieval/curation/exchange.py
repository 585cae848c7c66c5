"""A curation log as JSONL, to review and to replay elsewhere: one changeset per line (`export_log`), applied
again in order on another graph or data directory (`import_log`: each edit compiled afresh, applied or skipped
with the reason, like a re-import)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import ValidationError as PydanticValidationError

from retrieval.curation.apply import Curator
from retrieval.curation.log import CurationLog, ReplayLine
from retrieval.curation.ops import Changeset, check_op
from retrieval.errors import IngestError, RetrievalError, ValidationError

MAX_LINE_BYTES = 64 * 1024 * 1024  # an add-documents changeset carries its chunks
# Each changeset is applied as one of its own (0.1-0.5 s each on a 2-core machine): a file of more is refused before
# anything is applied, at the line that passes the limit, rather than running for hours.
MAX_IMPORT_CHANGESETS = 10_000


def export_log(log: CurationLog, path: Path) -> int:
    """Write every changeset (oldest first) as one JSON line; returns how many."""
    rows = log.changesets(newest_first=False)
    tmp = Path(path).with_name(Path(path).name + ".partial")
    with tmp.open("w", encoding="utf-8") as fh:
        for cs in rows:
            fh.write(json.dumps(cs.model_dump(mode="json"), ensure_ascii=False) + "\n")
    tmp.replace(path)
    return len(rows)


def read_log(path: Path) -> Iterator[Changeset]:
    """The changesets of a JSONL export, one at a time as the file is read (`file:line: field: reason` for a
    malformed line, an operation an edit would refuse, or a file over the limits). A line is read up to its
    limit, never whole, and nothing is kept: memory is bounded by one line."""
    try:
        fh = Path(path).open("rb")
    except OSError as exc:
        raise IngestError(str(path), 0, "file", f"cannot read it: {exc.strerror or exc}") from exc
    with fh:
        for n, raw in enumerate(iter(lambda: fh.readline(MAX_LINE_BYTES + 1), b""), 1):
            if len(raw) > MAX_LINE_BYTES:
                raise IngestError(str(path), n, "line", f"longer than {MAX_LINE_BYTES:,} bytes")
            if n > MAX_IMPORT_CHANGESETS:
                raise IngestError(str(path), n, "changeset", f"more than {MAX_IMPORT_CHANGESETS:,} changesets (one "
                                  "per line) in one file: an import applies at most that many; split the file")
            if not raw.strip():
                continue
            try:
                cs = Changeset.model_validate_json(raw)
            except PydanticValidationError as exc:
                first = exc.errors()[0]
                field = ".".join(str(p) for p in first["loc"]) or "changeset"
                raise IngestError(str(path), n, field, first["msg"]) from exc
            for i, op in enumerate(cs.ops):
                try:
                    check_op(op)
                except ValidationError as exc:
                    raise IngestError(str(path), n, f"ops.{i}", f"{op.op}: {exc}") from exc
            yield cs


def check_log(path: Path) -> int:
    """Read a whole export once, checking every line as `read_log` does (before the graph is opened); returns how
    many edits it would apply."""
    return sum(_in_force(cs) for cs in read_log(path))


def _in_force(cs: Changeset) -> bool:
    return cs.action == "edit" and cs.state == "applied"


def import_log(curator: Curator, changesets: Iterable[Changeset], *, author: str | None = None,
               source: str = "") -> Iterator[ReplayLine]:
    """Apply the edits in force of an exported log, in order, each as a new changeset here (its operations
    compiled against this graph) authored by who imports it (`author`, else the local user: never the file's
    author, which is kept in the reason as provenance); one line per edit, as it is applied: applied (the new
    changeset's id in the reason) or skipped with the reason. Undos and redos are not imported: an edit undone
    there is not in force."""
    for cs in changesets:
        if not _in_force(cs):
            continue
        why = f"imported from {source} #{cs.id} (by {cs.author} at {cs.created_at[:19]})" if source else \
            f"imported #{cs.id} (by {cs.author})"
        reason = f"{cs.reason} [{why}]" if cs.reason else why
        try:
            new = curator.apply(cs.ops, author=author, reason=reason)
        except RetrievalError as exc:
            yield ReplayLine(changeset=cs.id, status="skipped", reason=str(exc), summary=cs.summary())
            continue
        yield ReplayLine(changeset=cs.id, status="applied", reason=f"as #{new.id}", summary=new.summary())
