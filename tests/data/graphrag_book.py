"""A GraphRAG index of a book as GraphRAG stores one: the whole text in `documents.text` (a Project Gutenberg style
plain-text file: header, contents, chapters as heading lines of their own, licence), and text units cut by length
across the headings, each prefixed with the metadata line GraphRAG's `prepend_metadata` writes (`title: X.`).

No public-domain novel is stored on this machine and nothing may be downloaded, so the book is the shared GraphRAG
index's own novel ("Operation: Dulce", MIT; ../shared/data/graphrag_operation_dulce), its `## Chapter N` headings
turned into the heading lines of a Gutenberg text (`CHAPTER I.` over the chapter's title line), wrapped at 70
columns as Gutenberg files are, between a synthetic Gutenberg header and licence. Its entities, relationships,
communities, reports and claims are the index's own (text units remapped to where their names occur), plus two
boilerplate entities of the licence (`PROJECT GUTENBERG`, `EIN`) as an LLM extracts them from such a file.

    python tests/data/graphrag_book.py OUT      writes the index folder OUT
"""

from __future__ import annotations

import hashlib
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

TITLE = "dulce.txt"
CHAPTERS = ("CHAPTER I.", "CHAPTER II.", "CHAPTER III.")  # as the body prints them
NAMES = ("THE BRIEFING", "THE DESCENT", "THE MAINFRAME")  # the title line under each
UNIT_CHARS, OVERLAP = 2400, 300
HEADER = """The Project Gutenberg eBook of Operation: Dulce

This ebook is for the use of anyone anywhere in the United States and most other parts of the world at no cost and
with almost no restrictions whatsoever.

Title: Operation: Dulce

Author: Microsoft GraphRAG

*** START OF THE PROJECT GUTENBERG EBOOK OPERATION: DULCE ***




OPERATION: DULCE


CONTENTS

  CHAPTER I.    THE BRIEFING
  CHAPTER II.   THE DESCENT
  CHAPTER III.  THE MAINFRAME


"""
LICENCE = """


*** END OF THE PROJECT GUTENBERG EBOOK OPERATION: DULCE ***

Section 1. General Terms of Use and Redistributing Project Gutenberg electronic works

The Project Gutenberg Literary Archive Foundation is a non-profit 501(c)(3) educational corporation organized under
the laws of the state of Mississippi and granted tax exempt status by the Internal Revenue Service. The Foundation's
EIN or federal tax identification number is 64-6221541. Contributions to the Project Gutenberg Literary Archive
Foundation are tax deductible to the full extent permitted by U.S. federal laws.
"""
BOILERPLATE = (("PROJECT GUTENBERG", "ORGANIZATION",
                "Project Gutenberg publishes free electronic works and is run by its Literary Archive Foundation."),
               ("EIN", "IDENTIFIER", "The federal tax identification number of the Project Gutenberg Literary "
                                     "Archive Foundation."))


def _wrap(paragraphs: str) -> str:
    """Hard line wraps at 70 columns inside each paragraph, as Project Gutenberg's plain-text files have them."""
    return "\n\n".join(textwrap.fill(p, 70) for p in paragraphs.split("\n\n") if p.strip())


def book_text(source: str) -> str:
    """The index's Markdown novel as a Gutenberg plain-text book (headings as heading lines, hard-wrapped)."""
    parts = re.split(r"(?m)^## Chapter \d+\s*$", source)[1:]
    body = "".join(f"{head}\n{name}\n\n\n{_wrap(text.strip())}\n\n\n"
                   for head, name, text in zip(CHAPTERS, NAMES, parts, strict=True))
    return HEADER + body + LICENCE


def _units(text: str) -> list[str]:
    """Windows of UNIT_CHARS with OVERLAP, cut at a space, across the headings (GraphRAG cuts by tokens)."""
    out, start = [], 0
    while start < len(text):
        end = min(len(text), start + UNIT_CHARS)
        if end < len(text):
            end = text.rfind(" ", start + UNIT_CHARS // 2, end) + 1 or end
        out.append(text[start:end])
        if end >= len(text):
            break
        start = text.rfind(" ", start, end - OVERLAP) + 1 or end - OVERLAP
    return out


def _hash(*parts: str) -> str:
    return hashlib.sha512("\x1f".join(parts).encode()).hexdigest()


def write_graphrag_book(src: Path, dst: Path) -> Path:
    """The index folder `dst` built from the GraphRAG index `src` (see the module docstring)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def rows(name: str) -> list[dict[str, Any]]:
        return pq.read_table(src / f"{name}.parquet").to_pylist()

    def save(name: str, items: list[dict[str, Any]]) -> None:
        pq.write_table(pa.Table.from_pylist(items), dst / f"{name}.parquet")

    dst.mkdir(parents=True, exist_ok=True)
    doc = rows("documents")[0]
    text = book_text(doc["text"])
    raw = _units(text)
    units = [{"id": _hash(doc["id"], str(i), t), "human_readable_id": i + 1, "text": f"title: {TITLE}.\n{t}",
              "n_tokens": len(t.split()), "document_id": doc["id"]} for i, t in enumerate(raw)]
    save("text_units", units)
    save("documents", [{**doc, "title": TITLE, "text": text, "text_unit_ids": [u["id"] for u in units]}])
    flat = [" ".join(t.split()).lower() for t in raw]

    def mentioning(*names: str) -> list[str]:
        found = [u["id"] for u, t in zip(units, flat, strict=True) if all(n.lower() in t for n in names)]
        return found or [u["id"] for u, t in zip(units, flat, strict=True) if any(n.lower() in t for n in names)]

    boiler = [{"id": _hash("entity", name), "human_readable_id": 0, "title": name, "type": kind, "description": desc,
               "text_unit_ids": mentioning(name.split()[-1]), "frequency": 1, "degree": 1}
              for name, kind, desc in BOILERPLATE]
    ents = [{**e, "text_unit_ids": mentioning(e["title"]) or [units[0]["id"]]} for e in rows("entities")]
    save("entities", [boiler[0], *ents, boiler[1]])  # extraction order: the header's first, the licence's last
    rels = [{**r, "text_unit_ids": mentioning(r["source"], r["target"]) or [units[0]["id"]]}
            for r in rows("relationships")]
    rels.append({"id": _hash("rel", "EIN"), "human_readable_id": len(rels), "source": "PROJECT GUTENBERG",
                 "target": "EIN", "description": "The Foundation behind Project Gutenberg files under this EIN.",
                 "weight": 1.0, "combined_degree": 2, "text_unit_ids": boiler[1]["text_unit_ids"]})
    save("relationships", rels)
    units_of = {e["id"]: e["text_unit_ids"] for e in ents}
    save("communities", [{**c, "text_unit_ids": list(dict.fromkeys(u for e in c["entity_ids"]
                                                                     for u in units_of.get(e, [])))}
                         for c in rows("communities")])
    save("community_reports", rows("community_reports"))
    save("covariates", [{**c, "text_unit_id": (mentioning(c["subject_id"]) or [units[0]["id"]])[0]}
                        for c in rows("covariates")])
    return dst


if __name__ == "__main__":
    from tests.conftest import DULCE

    print(write_graphrag_book(DULCE, Path(sys.argv[1])))
