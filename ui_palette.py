"""The colour of each entity type, one function for every view of a graph: the live graph views on every page,
the schema, a map. A type's colour is decided by the graph (its types by frequency), never by what one view happens
to draw, so it stays after an expansion and from page to page."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

from ui_text import clean

# Tableau-like, most distinct first: the graph's most frequent types get these, in order.
PALETTE = (
    "#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2",
    "#eeca3b", "#9d755d", "#ff9da6", "#bab0ac", "#5f9ea0", "#8c6d31",
)
# For the types past the palette (a long tail of rare types), chosen by the type name's hash.
MORE = (
    "#2f4b7c", "#a05195", "#d45087", "#f95d6a", "#ff7c43", "#ffa600", "#003f5c", "#7a5195",
    "#58508d", "#bc5090", "#488f31", "#de425b", "#8a9a5b", "#6d9dc5", "#c9a227", "#7f6a93",
)


def type_key(type_: object) -> str:
    """A type as the views name it (an empty type reads `entity`)."""
    return clean(type_) or "entity"


def hashed_color(type_: object) -> str:
    """A stable colour for a type from its name alone (the same in every graph)."""
    digest = hashlib.blake2b(type_key(type_).encode("utf-8", "surrogatepass"), digest_size=4).digest()
    return MORE[int.from_bytes(digest, "big") % len(MORE)]


def type_palette(type_counts: Iterable[tuple[str, int]]) -> dict[str, str]:
    """Every entity type of one graph -> its colour: the graph's types by count (most first, ties by name) take the
    palette in order; the rest take `hashed_color`. Built from the whole graph's counts, not one view's."""
    counts: dict[str, int] = {}
    for type_, n in type_counts:
        key = type_key(type_)
        counts[key] = counts.get(key, 0) + int(n)
    return ordered_palette(sorted(counts, key=lambda t: (-counts[t], t)))


def ordered_palette(types: Iterable[str]) -> dict[str, str]:
    """Types already in the graph's order (most frequent first, ties by name: `retrieval.graph.mapdata.type_order`)
    -> their colours, as `type_palette` gives them."""
    return {t: PALETTE[i] if i < len(PALETTE) else hashed_color(t) for i, t in enumerate(types)}


def color_of(type_: object, palette: Mapping[str, str]) -> str:
    """The colour of `type_` in a graph's palette; a type the palette does not know gets its hashed colour."""
    key = type_key(type_)
    return palette.get(key) or hashed_color(key)
