"""Ranked result items as short Markdown cards: rank, document/graph badge, citation, text and every score."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import streamlit as st

from components.facts import CHANNEL_COLORS, SCORE_LABELS, channel_of, citation_of, fmt_score, score_keys
from components.text import md_literal, short
from retrieval.models import VerbalizedFact

CHANNEL_ICONS = {"document": ":material/description:", "graph": ":material/hub:"}


def channel_badge(fact: VerbalizedFact) -> str:
    """A small coloured badge, `document` or `graph` (Markdown; the words are ours, never data)."""
    channel = channel_of(fact)
    return f":{CHANNEL_COLORS[channel]}-badge[{CHANNEL_ICONS[channel]} {channel}]"


def scores_text(fact: VerbalizedFact) -> str:
    return " · ".join(f"{SCORE_LABELS.get(k, k)} {fmt_score(k, fact.scores[k])}" for k in score_keys([fact]))


def item_markdown(rank: int, fact: VerbalizedFact, tag: str = "") -> str:
    """`**rank.** [badge] [tag] citation`, the text (shortened), then every score in grey."""
    head = " ".join(x for x in (f"**{rank}.**", channel_badge(fact), tag, md_literal(citation_of(fact))) if x)
    lines = [head, md_literal(short(" ".join(fact.text.split()), 320))]
    scores = scores_text(fact)
    if scores:
        lines.append(f":gray[{md_literal(scores)}]")
    return "  \n".join(lines)


def render_items(
    items: Sequence[tuple[int, VerbalizedFact]], *, key: str, tags: Mapping[str, str] | None = None,
    empty: str = "No items.",
) -> None:
    """(rank, fact) pairs as cards in one container whose CSS class is `st-key-<key>`; `tags` by fact id."""
    with st.container(key=key):
        if not items:
            st.caption(empty)
        for rank, fact in items:
            st.markdown(item_markdown(rank, fact, (tags or {}).get(fact.id, "")))
