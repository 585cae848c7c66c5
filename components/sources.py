"""Sources: book → chapter → the chunk text behind the facts, with the facts citing each chunk; each chunk gradable."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import streamlit as st

from components.grader import GradeRow, GradeTarget, Tag, render_grader
from retrieval.items import chunk_item_id
from retrieval.models import Chunk, VerbalizedFact
from ui_text import md_literal, reading, short


@dataclass
class ChunkCite:
    chunk_id: str
    chunk: Chunk | None
    facts: list[int] = field(default_factory=list)  # fact indexes (0-based) citing it


@dataclass
class BookGroup:
    book: str
    author: str
    chapters: dict[str, list[ChunkCite]] = field(default_factory=dict)


def quote(text: str) -> str:
    """A Markdown block quote that renders chunk `text` literally, as a reader expects it (`reading`: hard line
    wraps joined, paragraph breaks kept)."""
    return "> " + md_literal(reading(text)).replace("\n", "  \n> ")


def group_sources(facts: Sequence[VerbalizedFact], chunks: dict[str, Chunk]) -> list[BookGroup]:
    """Books in order of their best-ranked citing fact; chapters and chunks likewise."""
    cites: dict[str, ChunkCite] = {}
    meta: dict[str, tuple[str, str, str]] = {}  # chunk id -> (book, chapter, author) from fact sources
    for i, f in enumerate(facts):
        for s in f.sources:
            if s.chunk_id:
                meta.setdefault(s.chunk_id, (s.original_document, s.chapter, s.author))
        for cid in dict.fromkeys([*f.chunk_ids, *(s.chunk_id for s in f.sources if s.chunk_id)]):
            cites.setdefault(cid, ChunkCite(cid, chunks.get(cid))).facts.append(i)
    books: dict[str, BookGroup] = {}
    for cid, cite in cites.items():
        c = cite.chunk
        book, chapter, author = (c.original_document, c.chapter, c.author) if c else meta.get(cid, ("", "", ""))
        group = books.setdefault(book or "(unknown book)", BookGroup(book or "(unknown book)", author))
        group.chapters.setdefault(chapter or "(no chapter)", []).append(cite)
    return list(books.values())


def source_rows(groups: Sequence[BookGroup], query: str, picked: int | None = None) -> tuple[list[GradeRow], int]:
    """The cited chunks as gradable rows under book › chapter headers, and the first row the picked fact cites."""
    rows: list[GradeRow] = []
    start = -1
    for g in groups:
        by = f" — {g.author}" if g.author else ""
        for chapter, cites in g.chapters.items():
            for n, cite in enumerate(cites):
                mine = picked is not None and picked in cite.facts
                if mine and start < 0:
                    start = len(rows)
                text = reading(cite.chunk.text) if cite.chunk else \
                    "(chunk text not found in the DocumentChunks collection)"
                rows.append(GradeRow(
                    key=cite.chunk_id, query=query, item_id=chunk_item_id(cite.chunk_id), text=text,
                    head=f"{g.book}{by} › {chapter}" if n == 0 else "",
                    tags=(Tag("cited by the picked fact", "green"),) if mine else (),
                    meta=f"{short(cite.chunk_id, 48)} · cited by fact {', '.join(f'#{i + 1}' for i in cite.facts)}",
                ))
    return rows, max(start, 0)


def render_sources(facts: Sequence[VerbalizedFact], chunks: dict[str, Chunk], *, query: str, key: str,
                   target: GradeTarget, picked: int | None = None) -> None:
    """The chunks behind the facts, book → chapter, each gradable; the picked fact's chunks are marked."""
    groups = group_sources(facts, chunks)
    rows, start = source_rows(groups, query, picked)
    if not rows:
        st.info("No source text: these facts cite no source chunks (a graph imported without text, such as a "
                "GraphML or CSV export, has none).")
        return
    st.caption(f"{len(rows)} chunks from {len(groups)} book{'s' if len(groups) != 1 else ''}")
    render_grader(rows, key=key, target=target, start=start)
