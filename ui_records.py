"""Records the app state hands to the components: capability badges, a graph version's entity catalog, the opened
graph with its cached traversals, who is signed in (team mode). Plain data and callables, so that no component imports
the app state."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from retrieval.access import Permit
from retrieval.curation.apply import HistoryEntry
from retrieval.curation.compile import MergePreview
from retrieval.curation.duplicates import Candidate
from retrieval.curation.log import ReplayLine
from retrieval.curation.ops import Changeset, MergeEntities, Op
from retrieval.graph.runtime import KG
from retrieval.models import Subgraph, TraversalResult
from ui_text import clean

ANNOTATOR_FIELD = "annotator-input"  # the sidebar's name field: who grades, and who edits the graph


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
class Curation:
    """Changing the opened graph, for the components (`retrieval.curation`): every call is authorised on the
    server as this session's author. `apply(ops, seen, reason)`: `seen` maps (kind, id) to the revision the
    editor saw, so a change made meanwhile by someone else is refused and shown instead of overwritten."""

    apply: Callable[[Sequence[Op], Mapping[tuple[str, str], int], str], Changeset]
    revision: Callable[[str, str], int]
    history: Callable[[str, str], list[HistoryEntry]]
    preview: Callable[[MergeEntities], MergePreview]
    undo: Callable[[int | None], Changeset]
    redo: Callable[[int | None], Changeset]
    author: str
    # the Curation page: duplicate candidates, the reviewed batch (a draft), the log
    duplicates: Callable[[int], list[Candidate]] = lambda limit: []
    not_duplicates: Callable[[str, str], None] = lambda a, b: None
    batch: Callable[[], Changeset | None] = lambda: None
    add_to_batch: Callable[[Op], Changeset] | None = None
    remove_from_batch: Callable[[Op], Changeset | None] | None = None
    apply_batch: Callable[[], Changeset] | None = None
    discard_batch: Callable[[], None] = lambda: None
    changesets: Callable[[int], list[Changeset]] = lambda limit: []
    replay: Callable[[], tuple[str, list[ReplayLine]]] = lambda: ("", [])
    recovered: Callable[[], list[str]] = lambda: []


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
    curation: Curation | None = None  # None: a read-only view


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
