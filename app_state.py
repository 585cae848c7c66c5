"""The app's shared state: Settings once per session, and every cached engine call the pages make (stores and
models per graph version, searches, traversals, the label store, Graph Memory, the Rerank Inspector's pools).
Pages hand what a component needs to it as data or callables; no component imports this module."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import numpy as np
import streamlit as st

from retrieval.access import (
    LOCAL_GATE,
    AccessPolicy,
    AuditLog,
    Gate,
    Identity,
    identity_for,
    load_policy,
    unresolved,
)
from retrieval.config import DEMO_DIR, Settings
from retrieval.curation.access import authorise
from retrieval.curation.apply import Curator
from retrieval.curation.duplicates import Candidate, find_duplicates
from retrieval.curation.items import ItemMap, graph_item_map
from retrieval.curation.log import ReplayLine, has_log
from retrieval.curation.ops import Changeset, Op
from retrieval.embedding import Embedder, load_embedder
from retrieval.errors import AccessDenied, ConfigError, NotFoundError, RetrievalError
from retrieval.evaluation.evaluate import EvalReport, evaluate, rerank_runs
from retrieval.evaluation.follow import follow_labels, gone_note
from retrieval.evaluation.inspect import Inspection, Memo, Pool, PoolKind, candidate_pool, pool_order
from retrieval.evaluation.labels import Label, LabelStore
from retrieval.explore.export import induced_edges
from retrieval.explore.memory import GraphMemory, open_memory
from retrieval.graph import catalog, traverse
from retrieval.graph.runtime import KG
from retrieval.graph.traverse import bfs, degrees, expand, k_shortest_paths, read_chunks
from retrieval.models import Chunk, GraphStats, PathResult, SearchParams, SearchResult, Subgraph, TraversalResult
from retrieval.rerank import GraphReranker, MMRReranker, Reranker, build_rerankers
from retrieval.rerank.cross_encoder import CrossEncoderReranker
from retrieval.search import modes
from retrieval.search.retriever import kg_fact_vectors, search
from retrieval.search.verbalize import to_markdown
from retrieval.stores.base import CHUNKS
from ui_map import MapBody, encode_body
from ui_palette import type_palette
from ui_records import ANNOTATOR_FIELD, SIGNED, Capability, Curation, EntityCatalog, LiveGraph, Signed, SignIn
from ui_text import entity_label, md_code, md_literal


def shell_settings() -> Settings:
    """Settings built once per session from the environment (KG_* variables), for the app shell (which shows the
    sign-in page itself)."""
    if "settings" not in st.session_state:
        st.session_state["settings"] = Settings.from_env()
    return st.session_state["settings"]


def settings() -> Settings:
    """A page's first call: the Settings, once this session may see data (team mode: signed in and granted a role);
    otherwise the page stops here, before drawing anything. Streamlit runs a page without app.py when a URL names it
    before any run of app.py has called st.navigation (it takes the `pages/` folder for an old-style multipage app):
    such a run must not get past this either."""
    cfg = shell_settings()
    who = signed(gate(cfg), current_handle(cfg))
    if who is None:
        st.session_state.pop(SIGNED, None)
    else:  # who grades on this page: the signed-in identity (set here, not by the shell: a page may run without it)
        st.session_state[SIGNED] = who
    return cfg


# --- who is working: local mode (one user, `local`, every role) or team mode (OIDC sign-in + the access file) ----

LOGIN_AUDITED = "access-login"  # session_state: the identity whose sign-in this session has logged
REFUSED_LINK = "access-refused-link"  # session_state: the last `?graph=` refused (logged once, not on every rerun)


def _auth_table() -> Mapping[str, object] | None:
    """The `[auth]` table of the secrets (`.streamlit/secrets.toml`, or `--secrets.files`), or None."""
    if not st.secrets.load_if_toml_exists() or "auth" not in st.secrets:
        return None
    table = st.secrets["auth"]
    return table if isinstance(table, Mapping) else None


def providers(auth: Mapping[str, object]) -> tuple[tuple[str | None, str], ...]:
    """The sign-in buttons: one per named provider table ([auth.NAME]), or the [auth] table's own provider."""
    named = [(k, k.capitalize()) for k, v in auth.items() if isinstance(v, Mapping) and "client_id" in v]
    return tuple(named) if named else ((None, "your organisation's account"),)


def team_problem(cfg: Settings, auth: Mapping[str, object] | None) -> str:
    """What is missing from a team set-up ('' when complete). Either half alone is refused, never served open."""
    if auth is None:
        return ("KG_ACCESS_FILE is set, but the secrets have no [auth] table: team mode needs both (README, "
                "Deploy for a team). Nothing is shown until it is complete.")
    if not cfg.access_file:
        return ("The secrets have an [auth] table, but KG_ACCESS_FILE is not set: team mode needs an access file "
                "granting roles (README, Deploy for a team). Nothing is shown until it is complete.")
    return ""


@st.cache_resource(max_entries=4, show_spinner=False)
def _policy(path: str, stamp: tuple[int, int]) -> AccessPolicy:
    return load_policy(Path(path))


@st.cache_resource(max_entries=512, show_spinner=False)
def _identity(path: str, stamp: tuple[int, int], claims: str) -> Identity:
    return identity_for(_policy(path, stamp), json.loads(claims))


def identity(cfg: Settings, claims: Mapping[str, object]) -> Identity:
    """The signed-in user's identity under the access file, resolved again whenever the file changes (a revoked grant
    holds from the user's next click); once per file version and user, not on every call of a run."""
    path = Path(cfg.access_file)
    try:
        stat = path.stat()
    except OSError as exc:
        raise ConfigError(f"access file {path}: {exc.strerror or exc}") from exc
    return _identity(str(path), (stat.st_mtime_ns, stat.st_size), json.dumps(claims, sort_keys=True, default=str))


@st.cache_resource(show_spinner=False)
def _audit_log(data_dir: str) -> AuditLog:
    return AuditLog.in_data_dir(Path(data_dir))


def audit_log(cfg: Settings) -> AuditLog:
    """One audit log (DATA_DIR/audit.sqlite) per data dir for this server process."""
    return _audit_log(str(cfg.data_dir))


def access(cfg: Settings) -> Gate | SignIn:
    """Who this session is: the gate it acts through, or what the sign-in page shows instead of any data.

    Local mode (no `[auth]` table, no KG_ACCESS_FILE): `local`, with every role and no audit log. Team mode: the
    signed-in user's roles from the access file; their first run in a session logs the sign-in."""
    auth = _auth_table()
    if auth is None and not cfg.access_file:
        return LOCAL_GATE
    problem = team_problem(cfg, auth)
    if problem:
        return SignIn(problem=problem)
    if not st.user.is_logged_in:
        return SignIn(providers(auth or {}))
    try:
        log = audit_log(cfg)
        who = identity(cfg, st.user.to_dict())
    except ConfigError as exc:
        return SignIn(problem=str(exc), who=unresolved(st.user.to_dict()))
    except AccessDenied as exc:  # claims that name nobody: logged under a name no identity can have
        label = unresolved(st.user.to_dict())
        if st.session_state.get(LOGIN_AUDITED) != label:
            log.record(label, "login", outcome="refused", detail=str(exc))
            st.session_state[LOGIN_AUDITED] = label
        return SignIn(problem=str(exc), who=label)
    if st.session_state.get(LOGIN_AUDITED) != who.key:
        log_sign_in(log, who, st.user.get("iat"))
        st.session_state[LOGIN_AUDITED] = who.key
    if not who.granted:
        return SignIn(problem=f"You are signed in as {who.key}, but the access file grants you no role on any "
                              "graph or tenant. Ask an admin to add you or one of your groups.", who=who.key)
    return Gate(who, log)


def log_sign_in(log: AuditLog, identity: Identity, issued: object) -> None:
    """Log a sign-in once: each page load is a new Streamlit session on the same sign-in (the ID token's `iat`)."""
    when = datetime.fromtimestamp(issued, UTC).isoformat() if isinstance(issued, int | float) else "unknown"
    detail = f"token issued {when}; groups: {', '.join(identity.groups) or 'none'}"
    last = log.last(identity.key, "login")
    if last is None or last.detail != detail:
        log.record(identity.key, "login", outcome="ok" if identity.granted else "refused", detail=detail)


def gate(cfg: Settings) -> Gate:
    """The session's gate (the app shell has shown the sign-in page and stopped when there is none)."""
    found = access(cfg)
    if isinstance(found, SignIn):
        st.stop()
    assert isinstance(found, Gate)
    return found


def sign_out(cfg: Settings) -> None:
    """Log the sign-out, then end the session's login (Streamlit clears its cookie and asks the provider)."""
    found = access(cfg)
    if isinstance(found, Gate) and found.audit is not None:
        found.record("logout")
    elif isinstance(found, SignIn) and found.who:
        audit_log(cfg).record(found.who, "logout")
    st.session_state.pop(LOGIN_AUDITED, None)
    st.logout()


def signed(allowed: Gate, handle: catalog.GraphHandle | None) -> Signed | None:
    """Team mode: who is signed in, their role on the open graph and whether they may grade it (None: local mode)."""
    if allowed.identity.local:
        return None
    name = handle.name if handle is not None else None
    role = allowed.identity.role("graph", name) if name else None
    return Signed(allowed.identity.key, allowed.identity.name, role.label if role else "",
                  allowed.permit("grade", graph=name))


def graph_names(cfg: Settings) -> list[str]:
    """The graphs of the data directory this user may open (every graph in local mode)."""
    allowed = gate(cfg)
    return [n for n in catalog.list_graphs(cfg.data_dir) if allowed.allows("view", graph=n)]


GRAPH_KEY = "graph-in-use"  # the graph this session works on (the sidebar's page links drop `?graph=`)
PICKED_KEY = "graph-picked"  # a graph just picked in the sidebar, for the run that follows the click


def chosen_graph(cfg: Settings) -> str | None:
    """The graph picked in the sidebar just now, else `?graph=NAME` in the URL (a copied link names its graph), else
    the graph this session was on (a page link drops the URL's parameters), else KG_GRAPH, else the active graph:
    the server-wide default for new sessions; in team mode only among the graphs the user may open."""
    names = graph_names(cfg)
    for wanted in (st.session_state.get(PICKED_KEY), st.query_params.get("graph"), st.session_state.get(GRAPH_KEY),
                   cfg.graph_name):
        if wanted in names:
            return str(wanted)
    active = catalog.active_name(cfg.data_dir)
    return active if active in names else (names[0] if names else None)


def pick_graph(name: str) -> None:
    """Switch this session to graph `name` on its next run (the sidebar picker's and the Data page's one click)."""
    st.session_state[PICKED_KEY] = name


def keep_graph(name: str | None) -> tuple[str | None, bool]:
    """Remember `name` as this session's graph and name it in the URL; returns the graph the session was on before
    when this run changes it (None otherwise), and whether the analyst picked it (not a link)."""
    picked = st.session_state.pop(PICKED_KEY, None) is not None
    before = st.session_state.get(GRAPH_KEY)
    if name is None:
        return None, False
    st.session_state[GRAPH_KEY] = name
    if st.query_params.get("graph") != name:
        st.query_params["graph"] = name
    return (before if before and before != name else None), picked


def graph_notice(cfg: Settings) -> str:
    """Why `?graph=NAME` in the link cannot be used (no such graph here, or, in team mode, none this user may open:
    the two read alike, so a link cannot probe for names) and which graph is shown, or ''."""
    wanted = st.query_params.get("graph")
    names = graph_names(cfg)
    if wanted is None or wanted in names:
        return ""
    allowed = gate(cfg)
    if not allowed.identity.local and st.session_state.get(REFUSED_LINK) != wanted:
        allowed.record("view", graph=wanted, outcome="refused", detail="a link named a graph this user may not open")
        st.session_state[REFUSED_LINK] = wanted
    name = chosen_graph(cfg)
    shown = f"graph **{md_literal(name)}** is shown" if name else "no graph is open"
    have = ", ".join(md_literal(n) for n in names) or "none"
    where = "in this data directory" if allowed.identity.local else "that you may open"
    return f"{md_code(f'graph={wanted}')} in the link names no graph {where} ({have}): {shown}."


def graph_choices(cfg: Settings) -> dict[str, dict[str, int]]:
    """Every graph of the data directory with the counts its manifest records (no store is opened)."""
    out: dict[str, dict[str, int]] = {}
    for name in graph_names(cfg):
        try:
            out[name] = catalog.resolve(cfg.data_dir, name).counts
        except RetrievalError:
            continue  # swapped away while listing
    return out


def current_handle(cfg: Settings) -> catalog.GraphHandle | None:
    """The committed version of the chosen graph, resolved on every run (one small JSON read)."""
    name = chosen_graph(cfg)
    if not name:
        return None
    try:
        return catalog.resolve(cfg.data_dir, name)
    except NotFoundError:
        return None  # swapped away between listing and reading: the next run sees the new state


@st.cache_resource(show_spinner="Loading the embedding model…")
def embedder(model: str) -> Embedder:
    """One embedder per model name for the whole server."""
    return load_embedder(model)


def _close(kg: KG) -> None:
    with _ATTACHED_LOCK:
        for key in [k for k in _ATTACHED if k[0] == id(kg)]:
            del _ATTACHED[key]
    kg.close()


# What belongs to one opened KG (its curator, its rerankers): made on first use, remade when `stamp` (the revision)
# changes, dropped when the open-graph cache closes the KG. A cache keyed by the graph's name and version instead kept
# the first KG opened under them: a closed one once the open-graph cache had let it go.
_ATTACHED: dict[tuple[int, str], tuple[KG, str, object]] = {}
_ATTACHED_LOCK = threading.Lock()
T = TypeVar("T")


def _attached(kg: KG, what: str, make: Callable[[], T], stamp: str = "") -> T:
    key = (id(kg), what)  # an entry holds its KG, so no other object takes this id while the entry lives
    with _ATTACHED_LOCK:
        found = _ATTACHED.get(key)
    if found is None or found[1] != stamp:
        made = (kg, stamp, make())  # outside the lock: building rerankers takes a while
        with _ATTACHED_LOCK:  # of two sessions making it at once, the first one stored is kept
            found = _ATTACHED.get(key)
            if found is None or found[1] != stamp:
                found = _ATTACHED[key] = made
    return found[2]  # type: ignore[return-value]


@st.cache_resource(max_entries=4, on_release=_close, show_spinner="Opening the graph…")
def _open_kg(_cfg: Settings, data_dir: str, name: str, version: str, backends: tuple[str, str],
             _draw: Callable[[Subgraph], object] | None) -> KG:
    handle = catalog.resolve(Path(data_dir), name)
    if handle.version != version:  # re-ingested between resolve and open: open exactly what was asked
        raise NotFoundError(f"graph {name!r} moved from version {version} to {handle.version}; reload the page")
    kg = KG(_cfg, handle, embedder(_cfg.embed_model))
    _curator(kg)  # a changeset a crash left half-written is rolled back before anything reads
    warm_up(kg, _draw)
    return kg


def sample_question(kg: KG) -> str | None:
    """A relationship question from the graph's substance (None for an empty graph)."""
    return traverse.sample_question(kg.index)


def warm_up(kg: KG, draw: Callable[[Subgraph], object] | None = None) -> None:
    """Pay the one-off costs on open, not in the analyst's first search: CSR index, BM25, name matcher,
    collection loads and first inference, by running one relationship query between two of its entities,
    then reading its chunks and, with `draw` (the graph view's layout), laying out its subgraph once (igraph's
    first call is slower)."""
    _ = kg.bm25
    question = sample_question(kg)
    if question:
        result = search(kg, question, SearchParams.model_validate({}))
        kg.vectors.get(CHUNKS, [c for f in result.facts[:3] for c in f.chunk_ids])
        if draw is not None:
            draw(result.subgraph)


def open_kg(cfg: Settings, handle: catalog.GraphHandle, *, warm: Callable[[Subgraph], object] | None = None) -> KG:
    """The opened KG for this graph version; a re-ingest changes the version, hence a fresh open. `warm`: how the
    app shell's graph view lays out a subgraph, run once on the warm-up search (the first opener's is used).
    Every open first catches up with curation changes made elsewhere (`curator`)."""
    kg = _open_kg(cfg, str(cfg.data_dir), handle.name, handle.version, (cfg.graph_backend, cfg.vector_backend),
                  warm)
    curator(kg)
    return kg


def page_handle(cfg: Settings, to_do: str) -> catalog.GraphHandle:
    """The chosen graph's version (a small JSON read); without one the page says why (to the Data page) and stops."""
    handle = current_handle(cfg)
    if handle is None:
        st.info(f"No graph to {to_do} yet. Build the demo graph on the **Data** page.", icon=":material/info:")
        st.page_link("pages/data.py", label="Open Data", icon=":material/database:")
        st.stop()
    return handle


def page_kg(cfg: Settings, handle: catalog.GraphHandle, *, warm: Callable[[Subgraph], object] | None = None) -> KG:
    """`handle` opened (the first view of a version pays for it, under a spinner); otherwise the page says why and
    stops. A page draws what needs no graph first, so its first view is not grey skeletons while the graph opens."""
    try:
        kg = open_kg(cfg, handle, warm=warm)
    except RetrievalError as exc:
        st.error(f"Cannot open graph **{md_literal(handle.name)}**: {md_literal(exc)}", icon=":material/error:")
        st.stop()
        raise AssertionError("st.stop() ends the run") from exc
    for line in curator(kg).recovered:  # a changeset a crash interrupted was rolled back on open: said where seen
        st.sidebar.warning(md_literal(line), icon=":material/restore:")
    return kg


def page_graph(cfg: Settings, to_do: str) -> tuple[catalog.GraphHandle, KG]:
    """The chosen graph, opened; otherwise the page says why (no graph yet: to the Data page) and stops."""
    handle = page_handle(cfg, to_do)
    return handle, page_kg(cfg, handle)


def open_kg_or_none(cfg: Settings) -> KG | None:
    """The chosen graph opened, or None when there is none or it cannot open (said in a warning)."""
    handle = current_handle(cfg)
    try:
        return open_kg(cfg, handle) if handle is not None else None
    except RetrievalError as exc:
        st.warning(f"Cannot open graph **{md_literal(handle.name if handle else '')}**: {md_literal(exc)}",
                   icon=":material/error:")
        return None


def run_mode(
    kg: KG, graph: str, version: str, mode: str, query: str, *, limit: int, text_weight: float, params_json: str
) -> SearchResult:
    """One search in any `retrieval.search.modes` mode, cached on (graph, version, mode, query, the parameters it
    uses): KG takes the search parameters; the tools take `limit`, and hybrid also `text_weight`."""
    kg_mode = mode == "kg"
    return _run_mode(kg, graph, version, mode, query, None if kg_mode else limit,
                     text_weight if mode == "hybrid" else None, params_json if kg_mode else None)


@st.cache_data(max_entries=256, show_spinner=False)
def _run_mode(_kg: KG, graph: str, version: str, mode: str, query: str, limit: int | None,
              text_weight: float | None, params_json: str | None) -> SearchResult:
    params = SearchParams.model_validate_json(params_json) if params_json is not None else None
    tool = {"limit": limit, "text_weight": text_weight}  # None: this mode does not use it
    return modes.run_mode(_kg, mode, query, params=params, **{k: v for k, v in tool.items() if v is not None})


@st.cache_data(max_entries=256, show_spinner=False)
def agent_markdown(_result: SearchResult, graph: str, version: str, query: str, params_json: str) -> str:
    """The Markdown the agent tool returns for this result."""
    return to_markdown(_result)


@st.cache_data(max_entries=256, show_spinner=False)
def chunks(_kg: KG, version: str, ids: tuple[str, ...]) -> dict[str, Chunk]:
    """Chunk records (text, book, chapter) by id, read from the DocumentChunks collection."""
    return read_chunks(_kg.vectors, ids)


# --- optional capabilities --------------------------------------------------------------------


class _Probe:
    """Loads the cross-encoder in a background thread: a hub fetch can take a minute to fail offline."""

    def __init__(self, model: str) -> None:
        self.reranker = CrossEncoderReranker(model)
        self.done = threading.Event()
        self.started = time.monotonic()
        threading.Thread(target=self._run, name=f"probe-{model}", daemon=True).start()

    def _run(self) -> None:
        try:
            _ = self.reranker.available
        finally:
            self.done.set()


@st.cache_resource(show_spinner=False)
def _cross_encoder_probe(model: str) -> _Probe:
    return _Probe(model)


def cross_encoder(cfg: Settings) -> CrossEncoderReranker:
    """The shared CrossEncoderReranker (loading may still be in progress; check cross_encoder_status)."""
    return _cross_encoder_probe(cfg.cross_encoder_model).reranker


def _why(reason: str) -> str:
    """The badge's word for a `retrieval.rerank.cross_encoder.unavailable` sentence."""
    low = reason.lower()
    if "offline" in low or "could not be reached" in low:
        return "offline"
    if "no such file" in low or "no model by that name" in low:
        return "model not found"
    return "failed to load"


# An offline miss is told in milliseconds: the first status read waits up to this long rather than draw "loading…"
# (later reads never wait; the sidebar redraws its badges until a real load settles).
PROBE_WAIT_S = 1.0


def cross_encoder_status(cfg: Settings) -> Capability:
    probe = _cross_encoder_probe(cfg.cross_encoder_model)
    if not probe.done.wait(max(0.0, probe.started + PROBE_WAIT_S - time.monotonic())):
        return Capability("Cross-encoder", "loading", "loading…", cfg.cross_encoder_model)
    if probe.reranker.available:
        return Capability("Cross-encoder", "live", "loaded", cfg.cross_encoder_model)
    return Capability("Cross-encoder", "off", _why(probe.reranker.reason), probe.reranker.reason)


def unavailable_rerankers(cfg: Settings) -> dict[str, str]:
    """The rerankers this configuration cannot run (name -> why): the cross-encoder that did not load, the LLM
    without a key. A form does not pre-select them."""
    out: dict[str, str] = {}
    ce = cross_encoder_status(cfg)
    if ce.state != "live":
        out["cross_encoder"] = ce.detail if ce.state == "off" else f"{cfg.cross_encoder_model} is still loading"
    if not cfg.gemini_enabled:
        out["llm"] = "GEMINI_API_KEY is not set"
    return out


def gemini_status(cfg: Settings) -> Capability:
    if cfg.gemini_enabled:
        return Capability("Gemini", "live", cfg.gemini_model, "GEMINI_API_KEY is set")
    return Capability("Gemini", "off", "no key", "set GEMINI_API_KEY to enable LLM decomposition and reranking")


@st.cache_data(max_entries=32, show_spinner=False)
def _graph_stats(_kg: KG, name: str, version: str) -> GraphStats:
    from retrieval.graph.stats import graph_stats

    return graph_stats(_kg.handle, _kg.graph, _kg.vectors)


def graph_stats(kg: KG) -> GraphStats:
    """Counts read from the open stores, once per graph revision (a curation changes them)."""
    return _graph_stats(kg, kg.name, kg.revision)


@st.cache_data(show_spinner=False)
def demo_questions(limit: int = 4) -> list[str]:
    """The multi-hop questions shipped with the demo bundle (data/demo/questions.json)."""
    path = DEMO_DIR / "questions.json"
    if not path.is_file():
        return []
    rows = json.loads(path.read_text(encoding="utf-8"))
    return [r["question"] for r in rows if r.get("kind") == "multi-hop"][:limit]


@st.cache_data(max_entries=32, show_spinner=False)
def _type_counts(_kg: KG, name: str, version: str) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    arrays = _kg.index.arrays
    return Counter(arrays.node_types).most_common(), Counter(arrays.relation_types).most_common()


def type_counts(kg: KG) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """(entity type, count) and (relation type, count), most frequent first, from the in-memory index."""
    return _type_counts(kg, kg.name, kg.revision)


@st.cache_data(max_entries=32, show_spinner=False)
def _schema(_kg: KG, name: str, version: str) -> Subgraph:
    from retrieval.graph.index import schema

    return schema(_kg.index)


def schema(kg: KG) -> Subgraph:
    """The graph's schema (entity types joined by their relation types), from the in-memory index."""
    return _schema(kg, kg.name, kg.revision)


# --- the Map ----------------------------------------------------------------------------------


@st.cache_resource(max_entries=2, show_spinner=False)
def _map_body(_kg: KG, name: str, version: str, _progress: Callable[[str, int, int], None] | None) -> MapBody:
    from retrieval.graph.mapdata import map_data

    layout = _kg.layout(_progress)
    return encode_body(map_data(_kg.index, layout, _kg.communities, version))


def map_body(kg: KG, progress: Callable[[str, int, int], None] | None = None) -> MapBody:
    """The whole graph as the Map draws it, encoded once per graph version; a version whose layout is not stored
    yet gets it computed now (`progress` hears it) and stored with the version."""
    return _map_body(kg, kg.name, kg.revision, progress)


def map_layout_ready(kg: KG) -> bool:
    """Whether the version's map layout is at hand (stored or computed), so the map opens without computing it."""
    return kg.stored_layout() is not None


# --- traversals: the Paths page and every live graph view ---------------------------------------


@st.cache_data(max_entries=256, show_spinner=False)
def _bfs(_kg: KG, version: str, start: str, depth: int, direction: str, rels: tuple[str, ...],
         budget: int) -> TraversalResult:
    return bfs(_kg.index, start, depth, relation_types=rels or None, direction=direction,  # type: ignore[arg-type]
               node_budget=budget, details=_kg.graph)


@st.cache_data(max_entries=256, show_spinner=False)
def _expansion(_kg: KG, version: str, node: str, budget: int, direction: str,
               rels: tuple[str, ...]) -> TraversalResult:
    """A node's neighbours within a budget (traverse.expand), cached per graph version."""
    return expand(_kg.index, node, budget, relation_types=rels or None, direction=direction,  # type: ignore[arg-type]
                  details=_kg.graph)


@st.cache_data(max_entries=256, show_spinner=False)
def _view_edges(_kg: KG, version: str, ids: tuple[str, ...], rels: tuple[str, ...]) -> Subgraph:
    """Every relation among a view's nodes, so a view grown step by step shows all of them."""
    return Subgraph(edges=tuple(induced_edges(_kg.index, ids, _kg.graph, rels)))


def type_colors(kg: KG) -> dict[str, str]:
    """Every entity type's colour in this graph (`ui_palette.type_palette` over its type counts), per revision: the
    same on every page, in every view and after every expansion."""
    return type_palette(type_counts(kg)[0])


def live_graph(kg: KG, *, editable: bool = True) -> LiveGraph:
    """The opened graph with its traversals cached per graph revision, for the components that draw or grow a
    view; `editable`: with the curation calls (the details panel and the context menu edit the graph)."""
    return LiveGraph(
        kg,
        bfs=lambda start, depth, direction, rels, budget: _bfs(kg, kg.revision, start, depth, direction, rels, budget),
        expand=lambda node, budget, direction, rels: _expansion(kg, kg.revision, node, budget, direction, rels),
        edges=lambda ids, rels: _view_edges(kg, kg.revision, ids, rels),
        colors=type_colors(kg),
        curation=curation(kg) if editable else None,
    )


# --- curation: one Curator per opened graph (`_attached`); every edit authorised on the server ----------------


def _curator(kg: KG) -> Curator:
    return _attached(kg, "curator", lambda: Curator(kg))


def curator(kg: KG) -> Curator:
    """The curator of the opened graph; it first catches up with changes another process made (server back
    ends shared with the CLI): one small read when there are none, so every session sees every change."""
    found = _curator(kg)
    found.refresh()
    return found


def author() -> str:
    """Who this session's edits are recorded under: team mode's signed-in identity (never a typed name); in local
    mode the sidebar's name, else the local user (`retrieval.curation.access.authorise` checks the name)."""
    who = st.session_state.get(SIGNED)
    if isinstance(who, Signed):
        return authorise(who.key)
    return authorise(str(st.session_state.get(ANNOTATOR_FIELD, "") or "") or None)


def _editor(kg: KG) -> Callable[[str], str]:
    """The server-side check before every curation write: the session's role must allow `edit` on this graph (team
    mode: curator or admin; a refusal names the role and is logged); returns the author the change is recorded
    under. Each call checks again, so a grant revoked meanwhile holds from the next click."""
    def editor(what: str) -> str:
        gate(shell_settings()).check("edit", graph=kg.name, detail=what)
        return author()
    return editor


def _logged(kg: KG, changeset: Changeset) -> Changeset:
    """An applied changeset, written to the audit log too (team mode; local mode keeps none)."""
    gate(shell_settings()).record("edit", graph=kg.name,
                                  detail=f"changeset #{changeset.id} ({changeset.action}, {len(changeset.ops)} ops)")
    return changeset


def curation(kg: KG) -> Curation:
    """The curation calls of the opened graph, as this session's author (authorised again on every call)."""
    cur = curator(kg)
    editor = _editor(kg)

    def apply(ops: Sequence[Op], seen: Mapping[tuple[str, str], int], reason: str) -> Changeset:
        return _logged(kg, cur.apply(ops, author=editor("edit"), reason=reason, seen=dict(seen)))

    def changesets(limit: int) -> list[Changeset]:
        return cur.log.changesets(limit=limit) if has_log(kg.settings.data_dir, kg.name) else []

    def replay() -> tuple[str, list[ReplayLine]]:
        return cur.log.last_replay() if has_log(kg.settings.data_dir, kg.name) else ("", [])

    def apply_batch() -> Changeset:
        return _logged(kg, cur.apply_draft(author=editor("apply a reviewed batch")))

    return Curation(
        apply=apply,
        revision=cur.revision,
        history=cur.history,
        preview=cur.merge_preview,
        undo=lambda cid: _logged(kg, cur.undo(author=editor("undo"), changeset=cid)),
        redo=lambda cid: _logged(kg, cur.redo(author=editor("redo"), changeset=cid)),
        author=author(),
        duplicates=lambda limit: duplicates(kg, limit),
        not_duplicates=lambda a, b: cur.mark_not_duplicates(a, b, author=editor("not duplicates")),
        batch=lambda: cur.draft(author()),
        add_to_batch=lambda op: cur.add_to_draft(op, author=editor("add to a batch"),
                                                 reason="a reviewed batch of merges"),
        remove_from_batch=lambda op: cur.remove_from_draft(op, author=editor("remove from a batch")),
        apply_batch=apply_batch,
        discard_batch=lambda: cur.discard_draft(author=editor("discard a batch")),
        changesets=changesets,
        replay=replay,
        recovered=lambda: list(cur.recovered),
    )


def documents(kg: KG) -> tuple[Callable[[Path, Callable[[str, int, int], None]], tuple[Changeset, tuple[str, ...]]],
                               Callable[[str, Callable[[str, int, int], None]], Changeset]]:
    """Add documents to the opened graph / remove one, as this session's author (curation changesets, each checked
    like any edit)."""
    from retrieval.ingest.update import add_documents, remove_document

    cur = curator(kg)
    editor = _editor(kg)

    def add(folder: Path, progress: Callable[[str, int, int], None]) -> tuple[Changeset, tuple[str, ...]]:
        changeset, notes = add_documents(cur, folder, author=editor(f"add documents from {folder.name}"),
                                         progress=progress)
        return _logged(kg, changeset), notes

    return (add, lambda document, progress: _logged(kg, remove_document(
        cur, document, author=editor("remove a document"), progress=progress)))


@st.cache_data(max_entries=8, show_spinner=False)
def _item_map(data_dir: str, name: str, revision: str) -> ItemMap:
    return graph_item_map(Path(data_dir), name)


def follow(kg: KG, labels: Sequence[Label]) -> list[Label]:
    """Labels with their items mapped through the graph's curation: a grade on a merged entity counts for the
    entity kept; a grade whose evidence was deleted is left out (`gone_grades` says so)."""
    return follow_labels(labels, _item_map(str(kg.settings.data_dir), kg.name, kg.revision))[0]


def gone_grades(kg: KG, labels: Sequence[Label]) -> str:
    """A sentence on the grades whose evidence the graph's curation deleted ('' if none)."""
    return gone_note(follow_labels(labels, _item_map(str(kg.settings.data_dir), kg.name, kg.revision))[1])


@st.cache_data(max_entries=16, show_spinner=False)
def _duplicates(_kg: KG, name: str, revision: str, refused: frozenset[tuple[str, str]], limit: int
                ) -> list[Candidate]:
    return find_duplicates(_kg, limit=limit, not_duplicates=set(refused))


def duplicates(kg: KG, limit: int = 50) -> list[Candidate]:
    """Likely duplicate entities with their evidence, once per graph revision and set of "not duplicates"."""
    return _duplicates(kg, kg.name, kg.revision, frozenset(curator(kg).not_duplicates()), limit)


PICKER_LIMIT = 1000  # entities offered in a picker (best-connected first); any other is found by typing its name


@st.cache_resource(max_entries=4, show_spinner="Reading entity names…")
def _entity_catalog(_kg: KG, version: str) -> EntityCatalog:
    a = _kg.index.arrays
    labels = {i: entity_label(n, t) for i, n, t in zip(a.node_ids, a.node_names, a.node_types, strict=True)}
    degree = degrees(_kg.index)
    top = np.argsort(-degree, kind="stable")[:PICKER_LIMIT]
    options = sorted((a.node_ids[i] for i in top.tolist()), key=lambda i: labels[i].lower())
    by_label: dict[str, str] = {}
    for i, lab in labels.items():
        by_label.setdefault(lab, i)
    return EntityCatalog(tuple(options), labels, by_label, tuple(sorted(set(a.relation_types))),
                         tuple(sorted(set(a.node_types))), len(a.node_ids))


def entity_catalog(kg: KG) -> EntityCatalog:
    """The Paths pickers' options and filter vocabularies, once per graph version."""
    return _entity_catalog(kg, kg.revision)


@st.cache_data(max_entries=128, show_spinner=False)
def _ranked_paths(_kg: KG, version: str, a: str, b: str, k: int, hops: int, query: str,
                  rels: tuple[str, ...]) -> PathResult:
    return k_shortest_paths(_kg.index, a, b, k, hops, query=query, relation_types=rels or None,
                            details=_kg.graph, vectors=_kg.vectors,
                            embedder=_kg.embedder if query.strip() else None)


def ranked_paths(kg: KG, a: str, b: str, k: int, hops: int, query: str, rels: tuple[str, ...]) -> PathResult:
    """The k shortest simple paths between two entities, ranked (traverse.k_shortest_paths), per graph version."""
    return _ranked_paths(kg, kg.revision, a, b, k, hops, query, rels)


# --- the stores every page shares: labels and Graph Memory ----------------------------------------


@st.cache_resource(show_spinner=False)
def _label_store(data_dir: str) -> LabelStore:
    return LabelStore.in_data_dir(Path(data_dir))


def label_store(cfg: Settings) -> LabelStore:
    """One label store (one SQLite connection) per data dir for this server process."""
    return _label_store(str(cfg.data_dir))


@st.cache_resource(show_spinner=False)
def _memory(_cfg: Settings, data_dir: str) -> GraphMemory:
    return open_memory(_cfg)


def memory_store(cfg: Settings) -> GraphMemory:
    """One GraphMemory (DATA_DIR/memory) per data dir for the whole server, so its counters add up; in team mode
    seen through this user's gate (every operation authorised for the tenant it names)."""
    memory = _memory(cfg, str(cfg.data_dir))
    allowed = gate(cfg)
    return memory if allowed.identity.local else memory.as_user(allowed)


# --- Rerank Inspector: the cached retrieval (counted), rerankers per graph version ------------------

RERANKER_ORDER = ("none", "graph", "mmr", "cross_encoder", "llm")


@dataclass
class RetrievalCounter:
    """How many retrievals actually ran per (graph, version, query, kind, size), server-wide."""

    counts: Counter[tuple[str, ...]] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def bump(self, key: tuple[str, ...]) -> None:
        with self.lock:
            self.counts[key] += 1

    def get(self, key: tuple[str, ...]) -> int:
        with self.lock:
            return self.counts[key]


@st.cache_resource(show_spinner=False)
def retrieval_counter() -> RetrievalCounter:
    return RetrievalCounter()


def retrievals(kg: KG, query: str, kind: str, size: int) -> int:
    """How many times the pool of this (graph version, query, kind, size) was actually retrieved."""
    return retrieval_counter().get((kg.name, kg.revision, query, kind, str(size)))


@st.cache_data(max_entries=256, show_spinner=False)
def _pool(_kg: KG, graph: str, version: str, query: str, kind: PoolKind, size: int) -> Pool:
    retrieval_counter().bump((graph, version, query, kind, str(size)))  # runs only on a cache miss
    return candidate_pool(_kg, query, kind, size)


def pool(kg: KG, query: str, kind: PoolKind, size: int) -> Pool:
    """The candidate pool, retrieved once per (graph version, query, kind, size) and then cached."""
    return _pool(kg, kg.name, kg.revision, query, kind, size)


def evaluate_labelled(
    kg: KG, inspection: Inspection, labels: Sequence[Label], rerankers: Mapping[str, Reranker],
    kind: PoolKind, size: int, text_weight: float, k: int, compare: tuple[str, str] | None = None,
) -> tuple[EvalReport, dict[str, dict[str, list[str]]]]:
    """Every labelled query's pool (cached: retrieved once each) ranked under the same rerankers and knobs, scored
    with bootstrap intervals, unjudged counts and (with `compare`) the paired test of two rerankers."""
    queries = sorted({lb.query_text for lb in labels})
    if not queries:
        return evaluate(labels, inspection.runs(), (k,), compare=compare), inspection.runs()
    runs = rerank_runs(queries, lambda q: pool_order(pool(kg, q, kind, size), text_weight), rerankers, size)
    return evaluate(labels, runs.runs, (k,), compare=compare), runs.runs


def _build_rerankers(cfg: Settings, kg: KG) -> dict[str, Reranker]:
    found = build_rerankers(cfg, kg.embedder, kg, kg_fact_vectors(kg))
    found.pop("cross_encoder", None)  # the app-wide probe (loaded in the background) is used instead
    if "llm" in found:
        found["llm"] = Memo(found["llm"])
    return found


@st.cache_resource(show_spinner=False)
def _memo_cross_encoder(model: str, _reranker: Reranker) -> Memo:
    return Memo(_reranker)


@dataclass(frozen=True)
class RerankerSet:
    """The rerankers to compare at the current what-if knobs, and why any of them is left out."""

    rerankers: dict[str, Reranker]
    notes: list[str]


def rerankers(cfg: Settings, kg: KG, alpha: float, lambda_: float) -> RerankerSet:
    """none, graph(α, 1−α), mmr(λ), the cross-encoder when loaded and the LLM with a Gemini key."""
    base = _attached(kg, "rerankers", lambda: _build_rerankers(cfg, kg), stamp=kg.revision)
    graph = base["graph"]
    mmr = base["mmr"]
    assert isinstance(graph, GraphReranker) and isinstance(mmr, MMRReranker)
    found: dict[str, Reranker] = {
        "none": base["none"],
        "graph": graph.with_weights(alpha, round(1.0 - alpha, 6)),
        "mmr": mmr.with_lambda(lambda_),
    }
    notes: list[str] = []
    ce = cross_encoder_status(cfg)
    if ce.state == "live":
        found["cross_encoder"] = _memo_cross_encoder(cfg.cross_encoder_model, cross_encoder(cfg))  # type: ignore[arg-type]
    elif ce.state == "loading":
        notes.append(f"Cross-encoder {cfg.cross_encoder_model} is still loading: no ce_score yet (rerun shortly).")
    else:
        notes.append(f"{ce.detail} It is left out of the ranks and metrics (no ce_score).")
    if "llm" in base:
        found["llm"] = base["llm"]
    else:
        notes.append("LLM rank off: GEMINI_API_KEY is not set, so the Gemini diversity reranker does not run.")
    return RerankerSet({k: found[k] for k in RERANKER_ORDER if k in found}, notes)
