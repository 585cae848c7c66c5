"""Build the demo marketing library (a native bundle) from the hand-written sources in data/demo/src/.

Run from anywhere: `python data/demo/build_demo.py` rewrites documents/chunks/entities/relations.jsonl next to
this file, deterministically, after checking every rule in docs/bundle-format.md plus the demo's own ones
(chunk length, every relation supported by a chunk naming both ends, every entity named in some chunk).

Source format (all text written for this project):
  src/entities.txt   `type | name | alias; alias | description`; the id is slug(name).
  src/<book>.txt     `# slug | title | author`, `> description`, `## chapter title`,
                     `* chunk paragraph` (one line), then `+ source-id RELATION target-id: one sentence.`
                     lines for the relations that paragraph supports.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"
BOOK_FILES = ("pricing.txt", "consumer.txt", "brand.txt", "growth.txt")
RELATION_TYPES = frozenset(
    {
        "INFLUENCES",
        "PART_OF",
        "MEASURED_BY",
        "CONTRASTS_WITH",
        "ENABLES",
        "REQUIRES",
        "DRIVES",
        "INFORMS",
        "REDUCES",
        "INCREASES",
        "USED_IN",
        "EXAMPLE_OF",
        "DEPENDS_ON",
        "DEVELOPED_BY",
        "APPLIES",
    }
)
ENTITY_TYPES = frozenset(
    {"concept", "technique", "strategy", "metric", "person", "organisation", "channel", "framework", "tool", "role"}
)
MIN_WORDS, MAX_WORDS = 60, 150
REL_LINE = re.compile(r"^\+ (\S+) ([A-Z_]+) (\S+): (.+)$")


def slug(text: str) -> str:
    """Stable id: lower-case, apostrophes dropped, other non-alphanumerics collapsed to '-'."""
    text = text.lower().replace("'", "").replace("\u2019", "")
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-")


def mention_pattern(phrase: str) -> re.Pattern[str]:
    """Whole-phrase, case-insensitive match that also accepts a plural ending (review -> reviews)."""
    return re.compile(r"(?<![\w-])" + re.escape(phrase) + r"(?:s|es)?(?![\w-])", re.IGNORECASE)


@dataclass
class EntitySrc:
    id: str
    name: str
    type: str
    description: str
    aliases: list[str]
    phrases: list[str] = field(default_factory=list)
    patterns: list[re.Pattern[str]] = field(default_factory=list)


def mentions(text: str, entities: dict[str, EntitySrc]) -> set[str]:
    """Entity ids named in `text`, longest match first, so that 'marketing mix' inside
    'marketing mix modelling' or 'revenue' inside 'net revenue retention' does not count."""
    lowered = text.lower()
    found = [
        (m.start(), m.end(), ent.id)
        for ent in entities.values()
        for phrase, pat in zip(ent.phrases, ent.patterns, strict=True)
        if phrase in lowered  # cheap pre-filter; the regex then checks word boundaries
        for m in pat.finditer(text)
    ]
    found.sort(key=lambda f: (f[0] - f[1], f[0]))
    taken: list[tuple[int, int]] = []
    ids: set[str] = set()
    for start, end, eid in found:
        if all(end <= s or start >= e for s, e in taken):
            taken.append((start, end))
            ids.add(eid)
    return ids


@dataclass
class RelationSrc:
    source_id: str
    relation_type: str
    target_id: str
    description: str
    chunks: list[str]
    where: str


def fail(errors: list[str]) -> None:
    for err in errors:
        print(err, file=sys.stderr)
    raise SystemExit(f"{len(errors)} error(s); nothing written")


def read_entities(errors: list[str]) -> dict[str, EntitySrc]:
    entities: dict[str, EntitySrc] = {}
    path = SRC / "entities.txt"
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split("|")]
        if len(parts) != 4:
            errors.append(f"{path.name}:{lineno}: expected 'type | name | aliases | description'")
            continue
        etype, name, aliases_s, desc = parts
        aliases = [a.strip() for a in aliases_s.split(";") if a.strip()]
        ent = EntitySrc(slug(name), name, etype, desc, aliases)
        ent.phrases = [p.lower() for p in (name, *aliases)]
        ent.patterns = [mention_pattern(p) for p in (name, *aliases)]
        if ent.id in entities:
            errors.append(f"{path.name}:{lineno}: duplicate entity id {ent.id}")
        if not desc.endswith("."):
            errors.append(f"{path.name}:{lineno}: description must end with a period")
        if etype not in ENTITY_TYPES:
            errors.append(f"{path.name}:{lineno}: unknown entity type {etype}")
        entities[ent.id] = ent
    return entities


def read_books(
    entities: dict[str, EntitySrc], errors: list[str]
) -> tuple[list[dict], list[dict], dict[tuple[str, str, str], RelationSrc]]:
    documents: list[dict] = []
    chunks: list[dict] = []
    relations: dict[tuple[str, str, str], RelationSrc] = {}
    for fname in BOOK_FILES:
        path = SRC / fname
        book: dict | None = None
        book_slug = ""
        chapter, ch_no, in_ch, position = "", 0, 0, 0
        current: dict | None = None
        for lineno, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            line = raw.rstrip()
            where = f"{fname}:{lineno}"
            if not line or line.startswith("//"):
                continue
            if line.startswith("# "):
                book_slug, title, author = (p.strip() for p in line[2:].split("|"))
                book = {"title": title, "author": author, "description": ""}
                documents.append(book)
            elif line.startswith("> ") and book is not None:
                book["description"] = line[2:].strip()
            elif line.startswith("## "):
                chapter, ch_no, in_ch = line[3:].strip(), ch_no + 1, 0
            elif line.startswith("* ") and book is not None:
                in_ch += 1
                text = line[2:].strip()
                current = {
                    "id": f"{book_slug}-ch{ch_no}-{in_ch:02d}",
                    "text": text,
                    "original_document": book["title"],
                    "chapter": chapter,
                    "author": book["author"],
                    "position": position,
                }
                current["mentions"] = mentions(text, entities)
                position += 1
                words = len(text.split())
                if not MIN_WORDS <= words <= MAX_WORDS:
                    errors.append(f"{where}: chunk {current['id']} has {words} words ({MIN_WORDS}-{MAX_WORDS})")
                chunks.append(current)
            elif line.startswith("+ ") and current is not None:
                m = REL_LINE.match(line)
                if not m:
                    errors.append(f"{where}: relation line does not parse")
                    continue
                src, rtype, tgt, desc = m.groups()
                check_relation(where, src, rtype, tgt, desc, current["mentions"], entities, errors)
                key = (src, rtype, tgt)
                if key in relations:
                    relations[key].chunks.append(current["id"])
                else:
                    relations[key] = RelationSrc(src, rtype, tgt, desc, [current["id"]], where)
            else:
                errors.append(f"{where}: unrecognised line")
    return documents, chunks, relations


def check_relation(
    where: str,
    src: str,
    rtype: str,
    tgt: str,
    desc: str,
    named: set[str],
    entities: dict[str, EntitySrc],
    errors: list[str],
) -> None:
    if rtype not in RELATION_TYPES:
        errors.append(f"{where}: unknown relation type {rtype}")
    if not desc.endswith(".") or re.search(r"[a-z0-9]\.\s+[A-Z]", desc[:-1]):
        errors.append(f"{where}: description must be one sentence ending with a period")
    for eid in (src, tgt):
        ent = entities.get(eid)
        if ent is None:
            errors.append(f"{where}: unknown entity id {eid}")
        elif eid not in named:
            errors.append(f"{where}: supporting chunk never names {ent.name!r} ({eid})")
    if src == tgt:
        errors.append(f"{where}: self-loop on {src}")


def build() -> dict[str, list[dict]]:
    errors: list[str] = []
    entities = read_entities(errors)
    documents, chunks, relations = read_books(entities, errors)
    if errors:
        fail(errors)

    entity_rows = []
    for ent in entities.values():
        in_chunks = [c["id"] for c in chunks if ent.id in c["mentions"]]
        named = any(mention_pattern(ent.name).search(c["text"]) for c in chunks)
        if not named or not in_chunks:
            errors.append(f"entities.txt: {ent.name!r} is never named in any chunk")
        row: dict = {"id": ent.id, "name": ent.name, "type": ent.type, "description": ent.description}
        if ent.aliases:
            row["aliases"] = ent.aliases
        row["source_chunks"] = in_chunks
        entity_rows.append(row)
    if errors:
        fail(errors)

    relation_rows = [
        {
            "id": f"{r.source_id}--{r.relation_type.lower()}--{r.target_id}",
            "source_id": r.source_id,
            "target_id": r.target_id,
            "relation_type": r.relation_type,
            "description": r.description,
            "source_chunks": r.chunks,
            "weight": 1.0,
        }
        for r in relations.values()
    ]
    chunks = [{k: v for k, v in c.items() if k != "mentions"} for c in chunks]
    return {"documents": documents, "chunks": chunks, "entities": entity_rows, "relations": relation_rows}


def write(bundle: dict[str, list[dict]], out: Path = HERE) -> None:
    for name, rows in bundle.items():
        with (out / f"{name}.jsonl").open("w", encoding="utf-8", newline="\n") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False, sort_keys=False) + "\n")


def summary(bundle: dict[str, list[dict]]) -> str:
    chapters = {(c["original_document"], c["chapter"]) for c in bundle["chunks"]}
    types = Counter(r["relation_type"] for r in bundle["relations"])
    linked = {r["source_id"] for r in bundle["relations"]} | {r["target_id"] for r in bundle["relations"]}
    isolated = [e["id"] for e in bundle["entities"] if e["id"] not in linked]
    return (
        f"books={len(bundle['documents'])} chapters={len(chapters)} chunks={len(bundle['chunks'])} "
        f"entities={len(bundle['entities'])} relations={len(bundle['relations'])}\n"
        f"relation types: {dict(sorted(types.items()))}\n"
        f"entities in no relation: {isolated}"
    )


if __name__ == "__main__":
    result = build()
    write(result)
    print(summary(result))
