"""Records the app state hands to the components: capability badges, a graph version's entity catalog, the opened
graph with its cached traversals, who is signed in (team mode). Plain data and callables, so that no component imports
the app state."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from retrieval.access import Permit
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
    (one node's neighbours) and `edges(node ids, relation types)` (every relation among those nodes); `colors`,
    every entity type's colour in this graph (`ui_palette.type_palette`)."""

    kg: KG
    bfs: Callable[[str, int, str, tuple[str, ...], int], TraversalResult]
    expand: Callable[[str, int, str, tuple[str, ...]], TraversalResult]
    edges: Callable[[tuple[str, ...], tuple[str, ...]], Subgraph]
    colors: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SignIn:
    """Team mode, before any data is shown: the providers to sign in with (`st.login`'s argument, None for the
    `[auth]` table's own provider, and a label), or what keeps this user out (a broken set-up, no grant)."""

    providers: tuple[tuple[str | None, str], ...] = ()
    problem: str = ""
    who: str = ""  # signed in, but the access file grants them nothing


SIGNED = "annotator-signed"  # session_state: team mode's Signed for this page run, set by app_state.settings (not a
# widget key: no message from the browser can set it); absent in local mode


@dataclass(frozen=True)
class Signed:
    """Team mode: the signed-in user (grades are stored under `key`), their role on the open graph, and the permit
    every grade is checked against on the server."""

    key: str
    display: str
    role: str
    grade: Permit
