"""Chapters of chunks taken from a document: the chapter in force where a chunk's text starts.

Shared by the readers of formats whose chunks come from documents they also hold (GraphRAG, LightRAG). The chapters
of a document's text are found as the documents format finds them in a file (`books.chapter_cuts`: Markdown
headings, else heading lines such as `CHAPTER I.` or `STAVE ONE`, a table of contents skipped, a Gutenberg licence
left out). A chunk that opens with headings belongs to the last of them (its text starts below them); a heading
later in the chunk starts the next chunk's chapter, not this one's.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence

from retrieval.ingest.books import chapter_cuts

# ATX headings (`#` to `######`): a chunk that opens with them starts below them
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_LOCATE_PREFIX = 200  # characters of a chunk looked for in its document when the whole chunk is not found


def chapter_marks(text: str) -> list[tuple[int, str]]:
    """(offset, chapter) from each cut of `text` on: a left-out span (a table of contents, the book's title) keeps
    the chapter before it."""
    out: list[tuple[int, str]] = []
    for start, _, title in chapter_cuts(text):
        out.append((start, title if title is not None else (out[-1][1] if out else "")))
    return out


def body_start(text: str) -> int:
    """Offset of the first line of `text` that is neither blank nor a Markdown heading (len(text) if none)."""
    offset = 0
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        if bare.strip() and not _HEADING.match(bare):
            return offset
        offset += len(line)
    return offset


def chapter_at(marks: Sequence[tuple[int, str]], offset: int) -> str:
    """The chapter of the last mark at or before `offset` ('' before the first)."""
    i = bisect_right(marks, offset, key=lambda h: h[0])
    return marks[i - 1][1] if i else ""


def locate(document: str, chunks: Sequence[str]) -> list[int | None]:
    """Where each chunk (in document order; windows may overlap) starts in `document`; None if not found."""
    out: list[int | None] = []
    cursor = 0
    for text in chunks:
        probe = text.strip()[:_LOCATE_PREFIX]
        at = document.find(probe, cursor) if probe else -1
        if at < 0 and probe:
            at = document.find(probe)
        if at >= 0:
            # the stripped probe may start after leading blank lines of the chunk
            at = max(at - (len(text) - len(text.lstrip())), 0)
            cursor = at + 1
        out.append(at if at >= 0 else None)
    return out


def chapters(document: str | None, chunks: Sequence[str]) -> list[str]:
    """The chapter of each chunk of one document, chunks in document order.

    With the document's text, each chunk is located in it; without it (or where a chunk is not found), the
    chunks themselves, joined in order, stand for the document.
    """
    doc_marks = chapter_marks(document) if document else []
    found = locate(document, chunks) if document else [None] * len(chunks)
    joined_marks: list[tuple[int, str]] = []
    starts_joined: list[int] = []
    if None in found:  # only then do the chunks, joined in order, stand for the document
        joined_marks = chapter_marks("\n".join(chunks))
        pos = 0
        for text in chunks:
            starts_joined.append(pos)
            pos += len(text) + 1
    out = []
    for i, text in enumerate(chunks):
        skip = body_start(text)
        at = found[i]
        if at is not None:
            out.append(chapter_at(doc_marks, at + skip))
        else:
            out.append(chapter_at(joined_marks, starts_joined[i] + skip))
    return out
