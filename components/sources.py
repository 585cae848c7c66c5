"""Source cards: book → chapter → the chunk text behind the facts, with the facts citing each chunk."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import streamlit as st

from components.text import md_literal, short
from retrieval.models import Chunk, VerbalizedFact


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
    """A Markdown block quote that renders `text` literally, line breaks kept."""
    return "> " + md_literal(text).replace("\n", "  \n> ")


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


def render_sources(facts: Sequence[VerbalizedFact], chunks: dict[str, Chunk], *, picked: int | None = None) -> None:
    """Book headers, chapter captions, one expander per chunk; the picked fact's chunks open first."""
    groups = group_sources(facts, chunks)
    if not groups:
        st.info("No source text: these facts cite no source chunks (a graph imported without text, such as a "
                "GraphML or CSV export, has none).")
        return
    n_chunks = sum(len(v) for g in groups for v in g.chapters.values())
    st.caption(f"{n_chunks} chunks from {len(groups)} books")
    for g in groups:
        by = f" — {md_literal(g.author)}" if g.author else ""
        st.markdown(f"##### :material/menu_book: {md_literal(g.book)}{by}")
        for chapter, cites in g.chapters.items():
            st.markdown(f"**{md_literal(chapter)}**")
            for cite in cites:
                tags = ", ".join(f"#{i + 1}" for i in cite.facts)
                mine = picked is not None and picked in cite.facts
                label = f"{md_literal(short(cite.chunk_id, 48))} · cited by fact {tags}"
                with st.expander(label, expanded=mine, icon=":material/format_quote:" if mine else None):
                    if cite.chunk is None:
                        st.caption("chunk text not found in the DocumentChunks collection")
                    else:
                        st.markdown(quote(cite.chunk.text))
                    for i in cite.facts:
                        st.markdown(f"- **#{i + 1}** {md_literal(short(facts[i].text, 300))}")
