"""The hostile-data corpus (payloads.json) as import files.

- `write_bundle`: a native bundle (docs/bundle-format.md) in which every accepted payload is an entity's id,
  name, type, description, alias and properties, a relation's id, type and description, a chunk's id, text,
  source, author, chapter and book title. A hub entity, Eve Evilname, knows every payload entity, so a
  search for `QUERY` reaches them and any two payload entities are connected through her.
- `write_rejected`: the same bundle with one field of one line set to a payload the format refuses
  (NUL, lone surrogates); `expected_error` is the `file:line: field: reason` message it must raise.
- `write_bombs`: malformed import files (deep nesting, over-long lines, huge arrays) that must be refused
  with a clear error in bounded time and memory.

`python tests/data/hostile/make_bundle.py OUT` writes the bundle to OUT (for `python -m retrieval ingest OUT`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PAYLOADS = HERE / "payloads.json"
HUB_ID = "eve"
HUB_NAME = "Eve Evilname"
HUB_CHUNK = "eve-archive"
HUB_BOOK = "The Archive"
QUERY = "Who does Eve Evilname know?"
MAX_ID_BYTES = 512  # docs/bundle-format.md: ids are at most 512 bytes of UTF-8
PWNED = "__pwned"  # every script payload sets window.__pwned (or parent.__pwned); a test asserts it stays unset
EVIL_HOST = "evil.example"  # every network payload points here; a test asserts nothing leaves localhost


@dataclass(frozen=True)
class Payload:
    """One hostile string: `reject` names the reason the bundle format refuses it ('' = it must ingest)."""

    id: str
    category: str
    value: str
    note: str
    reject: str = ""

    @property
    def ident(self) -> str:
        """The payload itself as an id where the format allows one, else a stable stand-in."""
        try:
            fits = 0 < len(self.value.encode("utf-8")) <= MAX_ID_BYTES
        except UnicodeEncodeError:
            fits = False
        return self.value if fits and not self.reject else f"p:{self.id}"


def load_payloads(path: Path = PAYLOADS) -> list[Payload]:
    """Every payload of the corpus; `repeat` builds the long ones (the file stays readable)."""
    rows = json.loads(path.read_text(encoding="utf-8"))
    return [
        Payload(r["id"], r["category"], r["value"] * int(r.get("repeat", 1)), r["note"], r.get("reject", ""))
        for r in rows
    ]


def accepted(payloads: Iterable[Payload] | None = None) -> list[Payload]:
    return [p for p in (load_payloads() if payloads is None else payloads) if not p.reject]


def rejected(payloads: Iterable[Payload] | None = None) -> list[Payload]:
    return [p for p in (load_payloads() if payloads is None else payloads) if p.reject]


def bundle_rows(payloads: Iterable[Payload]) -> dict[str, list[dict[str, Any]]]:
    """The four JSONL files of the hostile bundle as rows (hub first, then one row per payload)."""
    items = list(payloads)
    rows: dict[str, list[dict[str, Any]]] = {
        "documents": [{"title": HUB_BOOK, "author": "The Archivist", "description": "Where Eve keeps names."}],
        "chunks": [{"id": HUB_CHUNK, "text": f"{HUB_NAME} knows everyone whose name is in the archive.",
                    "original_document": HUB_BOOK, "chapter": "Index", "position": 0}],
        "entities": [{"id": HUB_ID, "name": HUB_NAME, "type": "person", "description": "Keeper of the archive.",
                      "source_chunks": [HUB_CHUNK]}],
        "relations": [],
    }
    for i, p in enumerate(items, start=1):
        v, ident = p.value, p.ident
        rows["documents"].append({"title": v, "author": v, "description": v})
        rows["chunks"].append({"id": ident, "text": v, "original_document": v, "chapter": v, "author": v,
                               "source": v, "position": i})
        rows["entities"].append({"id": ident, "name": v, "type": v, "description": v, "aliases": [v],
                                 "properties": {"payload": v, v: [v, {"nested": v}]}, "source_chunks": [ident]})
        rows["relations"].append({"id": ident, "source_id": HUB_ID, "target_id": ident, "relation_type": v,
                                  "description": v, "source_chunks": [ident, HUB_CHUNK]})
    return rows


def _write_rows(folder: Path, rows: dict[str, list[dict[str, Any]]], *, ascii_only: bool) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, items in rows.items():
        text = "".join(json.dumps(r, ensure_ascii=ascii_only) + "\n" for r in items)
        (folder / f"{name}.jsonl").write_text(text, encoding="utf-8")
    return folder


def write_bundle(folder: Path, payloads: Iterable[Payload] | None = None) -> Path:
    """The hostile bundle of every accepted payload, raw UTF-8 (RTL overrides, U+2028 ... as they are)."""
    return _write_rows(folder, bundle_rows(accepted(payloads)), ascii_only=False)


# (file, field) of every text field a rejected payload is tried in; the row is the first payload's
REJECT_FIELDS: tuple[tuple[str, str], ...] = (
    ("documents", "title"), ("chunks", "text"), ("chunks", "chapter"), ("entities", "name"),
    ("entities", "description"), ("relations", "relation_type"), ("relations", "description"),
)


def write_rejected(folder: Path, payload: Payload, file: str, field: str) -> Path:
    """The hostile bundle with `field` of the first payload's line in `file` set to a refused payload.

    Written as ASCII JSON, so lone surrogates and NUL reach the reader as the \\uXXXX escapes JSON allows.
    """
    rows = bundle_rows(accepted())
    row = rows[file][1]
    if file == "documents":  # a book title is referenced by chunks: keep the bundle otherwise consistent
        for chunk in rows["chunks"]:
            if chunk["original_document"] == row["title"]:
                chunk["original_document"] = payload.value
    row[field] = payload.value
    return _write_rows(folder, rows, ascii_only=True)


def expected_error(folder: Path, payload: Payload, file: str, field: str) -> str:
    """The `file:line: field: reason` message `write_rejected(folder, payload, file, field)` must raise."""
    reason = "contains a NUL character" if payload.reject == "NUL" else "contains a lone surrogate (not valid Unicode)"
    return f"{folder / f'{file}.jsonl'}:2: {field}: {reason}"


# --- JSON bombs ---------------------------------------------------------------------------------


def _hub_bundle(folder: Path) -> Path:
    return _write_rows(folder, bundle_rows([]), ascii_only=True)


def _append(path: Path, *parts: bytes, repeat: tuple[bytes, int] | None = None, tail: bytes = b"") -> None:
    """Append one JSONL line made of `parts`, then `repeat[0]` written `repeat[1]` times, then `tail`."""
    with path.open("ab") as fh:
        for part in parts:
            fh.write(part)
        if repeat is not None:
            block, times = repeat
            for _ in range(times):
                fh.write(block)
        fh.write(tail + b"\n")


def write_bombs(folder: Path, max_line_bytes: int, max_nesting: int) -> dict[str, tuple[Path, str]]:
    """Malformed import files, each with the substring its error must contain. Bundles (entities.jsonl line 2):

    - deep-brackets: properties nested 100,000 levels (a RecursionError in a naive reader)
    - deep-objects: 50,000 nested objects
    - over-nesting: nesting one past the limit (parses fine, then refused)
    - long-line: one line 4 x the line limit (a huge array; refused before it is read whole)
    - huge-array: a 100,000-element alias array holding one non-string
    - hipporag-deep: an openie_*.json nested 100,000 levels
    - memory-deep: a graph-memory store file nested 100,000 levels
    """
    out: dict[str, tuple[Path, str]] = {}
    head = b'{"id": "bomb", "name": "bomb", "properties": {"x": '

    deep = _hub_bundle(folder / "deep-brackets")
    _append(deep / "entities.jsonl", head, b"[" * 100_000, b"]" * 100_000, tail=b"}}")
    out["deep-brackets"] = (deep, "entities.jsonl:2: json: nested too deeply")

    objects = _hub_bundle(folder / "deep-objects")
    _append(objects / "entities.jsonl", head, b'{"a": ' * 50_000, b"1", b"}" * 50_000, tail=b"}}")
    out["deep-objects"] = (objects, "entities.jsonl:2: json: nested too deeply")

    over = _hub_bundle(folder / "over-nesting")
    _append(over / "entities.jsonl", head, b"[" * max_nesting, b"]" * max_nesting, tail=b"}}")
    out["over-nesting"] = (over, f"nested more than {max_nesting} levels deep")

    long_line = _hub_bundle(folder / "long-line")
    block = b"0," * 32_768
    _append(long_line / "entities.jsonl", head, b"[", repeat=(block, 4 * max_line_bytes // len(block)), tail=b"0]}}")
    out["long-line"] = (long_line, f"entities.jsonl:2: line: longer than {max_line_bytes} bytes")

    huge = _hub_bundle(folder / "huge-array")
    _append(huge / "entities.jsonl", b'{"id": "bomb", "name": "bomb", "aliases": [', repeat=(b'"a",', 100_000),
            tail=b"7]}")
    out["huge-array"] = (huge, "entities.jsonl:2: aliases[100000]: expected a string, got int")

    hippo = folder / "hipporag-deep"
    hippo.mkdir(parents=True, exist_ok=True)
    (hippo / "x_corpus.json").write_text('[{"title": "t", "text": "x"}]', encoding="utf-8")
    (hippo / "openie_x.json").write_bytes(b'{"docs": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    out["hipporag-deep"] = (hippo, "openie_x.json:0: json: nested too deeply")

    memory = folder / "memory-deep.json"
    memory.write_bytes(b'{"nodes": [{"id": "a"}], "metadata": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    out["memory-deep"] = (memory, "nested too deeply")
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/data/hostile/make_bundle.py OUT_DIR")
    where = write_bundle(Path(sys.argv[1]))
    print(f"wrote the hostile bundle ({len(accepted())} payloads) to {where}")
