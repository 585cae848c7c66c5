"""Query box, search mode, compare mode and parameters, bound to the URL so a copied link reproduces the search."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import streamlit as st

from components import link_params
from retrieval.models import SearchParams
from retrieval.search.tools import HybridParams, ToolParams

_DEFAULT = SearchParams.model_validate({})
HOPS = ("auto", "1", "2", "3", "4")
TEXT_WEIGHT = float(HybridParams.model_fields["text_weight"].default)
LIMIT = int(ToolParams.model_fields["limit"].default)
NODES = 120  # the graph view's node budget
# Shown in this order; the label is also the URL value (?search_mode=dual-channel).
MODE_LABELS = {
    "kg": "KG", "vector": "vector", "hybrid": "hybrid", "graph": "graph", "comprehensive": "comprehensive",
    "dual": "dual-channel", "multidoc": "multi-doc",
}
MODE_HELP = {
    "kg": "the KG retriever: seeds → Personalized PageRank → traced paths + relation search → MMR",
    "vector": "chunk similarity (MiniLM cosine) over DocumentChunks",
    "hybrid": "BM25 + vector, min-max normalised and weighted by text_weight",
    "graph": "the KG retriever's facts as a tool (limit = facts, other parameters at their defaults)",
    "comprehensive": "vector and graph in parallel; a failing channel is named and the other still answers",
    "dual": "semantic chunks first, then graph context about the query's entities, with citations",
    "multidoc": "chunks and relations grouped by book (limit = books, at most 20)",
}
GRAPH_MODES = frozenset({"kg", "graph", "comprehensive", "dual"})  # modes whose result carries a subgraph


@dataclass(frozen=True)
class SearchRequest:
    query: str
    params: SearchParams
    node_budget: int
    mode: str = "kg"
    compare: str | None = None  # a second mode run on the same query, side by side
    limit: int = LIMIT
    text_weight: float = TEXT_WEIGHT
    notices: tuple[str, ...] = ()  # bad link values found on this run (kept ones are shown by the app shell)

    @property
    def params_json(self) -> str:
        return self.params.model_dump_json()


def _set_query(text: str) -> None:
    st.session_state["q"] = text  # a URL-bound widget is changed through session state, before it is drawn


def render_examples(questions: Sequence[str]) -> None:
    """Example questions as one-click buttons (they fill the query box, which runs the search)."""
    st.caption("Try a demo question:")
    for i, text in enumerate(questions):
        st.button(text, key=f"example-{i}", on_click=_set_query, args=(text,), type="tertiary",
                  icon=":material/north_east:")


PARAMS = (  # every bound widget of the form: key, default (session-state form), what a link may set it to
    link_params.Param("q", ""),
    link_params.choice("search_mode", list(MODE_LABELS.values()), "kg", "a search mode", "the search uses KG"),
    link_params.choice("vs", list(MODE_LABELS.values()), None, "a search mode", "no comparison is run"),
    link_params.number("limit", 1, 50, LIMIT, integer=True),
    link_params.number("text_weight", 0.0, 1.0, TEXT_WEIGHT),
    link_params.number("nodes", 10, 500, NODES, integer=True, what=f"the graph draws {NODES} nodes"),
    link_params.number("max_results", 1, 50, _DEFAULT.max_results, integer=True),
    link_params.number("max_seed_nodes", 1, 50, _DEFAULT.max_seed_nodes, integer=True),
    link_params.choice("max_hops", HOPS, "auto", "a hop limit", "max_hops uses auto"),
    link_params.number("top_k_destinations", 1, 100, _DEFAULT.top_k_destinations, integer=True),
    link_params.number("damping", 0.05, 0.95, _DEFAULT.damping),
)
P = {p.key: p for p in PARAMS}


def url_query_notice(key: str = "q", limit: int = 2000) -> str:
    """A query in the link longer than the box holds is cut to `limit` characters, and said so."""
    raw = st.query_params.get(key)
    if raw is None or len(raw) <= limit:
        return ""
    st.session_state[key] = raw[:limit]  # before the box is drawn: it shows (and searches) the first part
    return link_params.note(key, f"The query in the link has {len(raw):,} characters; a query holds at most "
                                 f"{limit:,}: the first {limit:,} are used.", raw[:limit])


def search_form(*, placeholder: str = "Ask a multi-hop question about this graph and press Enter") -> SearchRequest:
    """Enter in the query box runs the search; every widget is a URL query parameter (its key). The mode is in
    view; the expert settings are one click away (Settings). A bad value in the link is kept as a notice
    (`link_params`), which the app shell shows.

    Widgets that only some modes use are drawn only then; `persist_state` keeps their value while hidden.
    """
    notices = [url_query_notice()]
    query = st.text_input(
        "Query",
        key="q",
        bind="query-params",
        placeholder=placeholder,
        label_visibility="collapsed",
        icon=":material/search:",
        max_chars=2000,
    )
    check = link_params.check
    notices += [check(P["search_mode"]), check(P["vs"])]
    top, gear = st.columns([6, 1.2], vertical_alignment="bottom")
    mode = top.segmented_control(
        "Mode", list(MODE_LABELS), format_func=MODE_LABELS.__getitem__, default="kg", required=True, key="search_mode",
        bind="query-params", help="\n\n".join(f"**{MODE_LABELS[m]}**: {h}" for m, h in MODE_HELP.items()),
    ) or "kg"
    compare_now = st.session_state.get("vs")
    label = f"Settings · vs {MODE_LABELS[compare_now]}" if compare_now in MODE_LABELS else "Settings"
    with gear.popover(label, icon=":material/tune:", use_container_width=True):
        compare = st.selectbox(
            "Compare with", list(MODE_LABELS), index=None, format_func=MODE_LABELS.__getitem__, key="vs",
            bind="query-params", placeholder="no comparison",
            help="Run a second mode on the same query: overlap of cited chunks, items unique to each, both lists",
        )
        in_play = {mode} | ({compare} if compare else set())
        limit, text_weight = LIMIT, TEXT_WEIGHT
        if in_play - {"kg"} and "kg" in in_play:  # KG's Max results sets both sides: one number, one name
            notices.append(check(replace(P["limit"], what="Max results sets both sides of the comparison")))
        elif in_play - {"kg"}:
            notices.append(check(P["limit"]))
            limit = st.number_input(
                "Limit", 1, 50, LIMIT, key="limit", bind="query-params", persist_state="page",
                help="Results of the tool modes (vector, hybrid, graph, comprehensive, dual-channel); books for "
                     "multi-doc",
            )
        if "hybrid" in in_play:
            notices.append(check(P["text_weight"]))
            text_weight = st.slider(
                "text_weight (BM25 share)", 0.0, 1.0, TEXT_WEIGHT, 0.05, key="text_weight", bind="query-params",
                persist_state="page", help="hybrid = text_weight·BM25_norm + (1 − text_weight)·vector_norm",
            )
        budget = NODES
        if compare is None and mode in GRAPH_MODES:
            notices.append(check(P["nodes"]))
            budget = st.number_input(
                "Nodes drawn", 10, 500, NODES, 10, key="nodes", bind="query-params", persist_state="page",
                help="Node budget of the graph view; the rest is counted, not drawn",
            )
        if "kg" in in_play:
            notices += [check(P[k]) for k in ("max_results", "max_seed_nodes", "max_hops", "top_k_destinations",
                                              "damping")]
        params = kg_params() if "kg" in in_play else _DEFAULT
    if "kg" in in_play and in_play - {"kg"}:
        limit = params.max_results  # one number of results for both sides of the comparison
    return SearchRequest(
        query=(query or "").strip(), params=params, node_budget=int(budget), mode=mode, compare=compare,
        limit=int(limit), text_weight=round(float(text_weight), 4), notices=tuple(n for n in notices if n),
    )


def kg_params() -> SearchParams:
    """The KG retriever's seed parameters (drawn only while KG is one of the modes)."""
    cols = st.columns(2)
    max_results = cols[0].number_input(
        "Max results", 1, 50, _DEFAULT.max_results, key="max_results", bind="query-params", persist_state="page",
        help="max_results: facts returned after reranking",
    )
    max_seed_nodes = cols[1].number_input(
        "Seed nodes", 1, 50, _DEFAULT.max_seed_nodes, key="max_seed_nodes", bind="query-params",
        persist_state="page",
        help="max_seed_nodes: entities matched from the query that start the walk",
    )
    hops = cols[0].selectbox(
        "Max hops", HOPS, key="max_hops", bind="query-params", persist_state="page",
        help="max_hops: path length limit; auto follows the query decomposition",
    )
    top_k = cols[1].number_input(
        "PPR destinations", 1, 100, _DEFAULT.top_k_destinations, key="top_k_destinations",
        bind="query-params", persist_state="page",
        help="top_k_destinations: highest-PPR entities whose paths are traced",
    )
    damping = st.slider(
        "PPR damping", 0.05, 0.95, _DEFAULT.damping, 0.05, key="damping", bind="query-params", persist_state="page",
        help="damping: probability of continuing the walk (1 − restart probability)",
    )
    return SearchParams.model_validate({
        "max_results": int(max_results),
        "max_seed_nodes": int(max_seed_nodes),
        "max_hops": None if hops in (None, "auto") else int(hops),
        "top_k_destinations": int(top_k),
        "damping": round(float(damping), 4),
    })
