"""Records the app state hands to the components: capability badges, a graph version's entity catalog, the opened
graph with its cached traversals. Plain data and callables, so that no component imports the app state."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from retrieval.graph.runtime import KG
from retrieval.models import Subgraph, TraversalResult
from ui_text import clean


@dataclass(frozen=True)
class Capability:
    """A badge: live (green), pending (loading) or off with a one-word reason and the full detail."""

    name: str
    state: Literal["live", "loading", "off"]
    word: str
    detail: str = ""


@dataclass(frozen=True)
class EntityCatalog:
    """Picker options and filter vocabularies of one graph version."""

    options: tuple[str, ...]  # entity ids offered by the pickers, sorted by label
    labels: Mapping[str, str]  # id -> "name (type)" for every entity
    by_label: Mapping[str, str]  # and back (a bound picker keeps its label in the URL)
    relation_types: tuple[str, ...]
    node_types: tuple[str, ...]
    count: int

    def label(self, entity_id: object) -> str:
        key = clean(entity_id)
        return self.labels.get(key, key)


@dataclass(frozen=True)
class LiveGraph:
    """The opened graph behind a live graph view, with its traversals cached per graph version:
    `bfs(start, depth, direction, relation types, node budget)`, `expand(node, budget, direction, relation types)`
    (one node's neighbours) and `edges(node ids, relation types)` (every relation among those nodes)."""

    kg: KG
    bfs: Callable[[str, int, str, tuple[str, ...], int], TraversalResult]
    expand: Callable[[str, int, str, tuple[str, ...]], TraversalResult]
    edges: Callable[[tuple[str, ...], tuple[str, ...]], Subgraph]
