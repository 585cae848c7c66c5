"""Colours the graph views share: one colour per entity type, the same on every page of one graph (the live graph
view, the Map, the schema graph and the pyvis export all call `type_colors`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

PALETTE = (
    "#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2",
    "#eeca3b", "#9d755d", "#ff9da6", "#bab0ac", "#5f9ea0", "#8c6d31",
)


def type_colors(types: Iterable[str], order: Sequence[str] = ()) -> dict[str, str]:
    """A colour for each of `types` (the types a view draws, repeats allowed), most frequent first. With `order`
    (the graph's own types, most frequent first: `retrieval.graph.mapdata.type_order`) a type's colour is its
    place in the graph, so it keeps that colour in every view of the graph, whatever the view holds; types the
    graph lacks (a stored view from elsewhere) come after, by their count in the view."""
    counts = Counter(types)
    at = {t: i for i, t in enumerate(order)}
    known = sorted((t for t in counts if t in at), key=lambda t: at[t])
    rest = sorted((t for t in counts if t not in at), key=lambda t: (-counts[t], t))
    slots = {t: at[t] for t in known} | {t: len(order) + i for i, t in enumerate(rest)}
    return {t: PALETTE[slots[t] % len(PALETTE)] for t in [*known, *rest]}
