"""Query box, search mode, compare mode and parameters, bound to the URL so a copied link reproduces the search."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import streamlit as st

from retrieval.models import SearchParams
from retrieval.search.tools import HybridParams, ToolParams
from ui_text import md_code

_DEFAULT = SearchParams.model_validate({})
HOPS = ("auto", "1", "2", "3", "4")
TEXT_WEIGHT = float(HybridParams.model_fields["text_weight"].default)
LIMIT = int(ToolParams.model_fields["limit"].default)
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
    notices: tuple[str, ...] = ()  # link parameters that could not be used, said plainly

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


def url_number_notice(key: str, what: str, low: float, high: float, default: float, *, integer: bool = False) -> str:
    """Why `?key=...` cannot be used (Streamlit silently drops a bad bound value and shows the default), or ''.

    Read before the widget is drawn: drawing it removes the bad value from the URL.
    """
    raw = st.query_params.get(key)
    if raw is None:
        return ""
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if low <= value <= high and (value.is_integer() or not integer):
        return ""
    kind = "a whole number" if integer else "a number"
    return f"{md_code(f'{key}={raw}')} in the link is not {kind} from {low:g} to {high:g}: {what} uses {default:g}."


def url_choice_notice(key: str, valid: Sequence[str], what: str, consequence: str) -> str:
    """Why `?key=...` is none of `valid` (a bound widget drops it silently and shows its default), or ''."""
    raw = st.query_params.get(key)
    if raw is None or raw in valid:
        return ""
    return f"{md_code(f'{key}={raw}')} in the link is not {what} ({', '.join(valid)}): {consequence}."


def _url_mode_notice(key: str, consequence: str) -> str:
    return url_choice_notice(key, list(MODE_LABELS.values()), "a search mode", consequence)


def url_query_notice(key: str = "q", limit: int = 2000) -> str:
    """A query in the link longer than the box holds is cut to `limit` characters, and said so."""
    raw = st.query_params.get(key)
    if raw is None or len(raw) <= limit:
        return ""
    st.session_state[key] = raw[:limit]  # before the box is drawn: it shows (and searches) the first part
    return (f"The query in the link has {len(raw):,} characters; a query holds at most {limit:,}: "
            f"the first {limit:,} are used.")


def kg_notices() -> list[str]:
    """Notices for the KG parameters in the link (read before their widgets are drawn)."""
    return [
        url_number_notice("max_results", "max_results", 1, 50, _DEFAULT.max_results, integer=True),
        url_number_notice("max_seed_nodes", "max_seed_nodes", 1, 50, _DEFAULT.max_seed_nodes, integer=True),
        url_choice_notice("max_hops", HOPS, "a hop limit", "max_hops uses auto"),
        url_number_notice("top_k_destinations", "top_k_destinations", 1, 100, _DEFAULT.top_k_destinations,
                          integer=True),
        url_number_notice("damping", "damping", 0.05, 0.95, _DEFAULT.damping),
    ]


def search_form(*, placeholder: str = "Ask a multi-hop question about this graph and press Enter") -> SearchRequest:
    """Enter in the query box runs the search; every widget is a URL query parameter (its key).

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
    notices += [_url_mode_notice("search_mode", "the search uses KG"), _url_mode_notice("vs", "no comparison is run")]
    top = st.columns([4.2, 1.5, 0.9, 1.5, 0.9], vertical_alignment="bottom")
    mode = top[0].segmented_control(
        "Mode", list(MODE_LABELS), format_func=MODE_LABELS.__getitem__, default="kg", required=True, key="search_mode",
        bind="query-params", help="\n\n".join(f"**{MODE_LABELS[m]}**: {h}" for m, h in MODE_HELP.items()),
    ) or "kg"
    compare = top[1].selectbox(
        "Compare with", list(MODE_LABELS), index=None, format_func=MODE_LABELS.__getitem__, key="vs",
        bind="query-params", placeholder="no comparison",
        help="Run a second mode on the same query: overlap of cited chunks, items unique to each, both lists",
    )
    in_play = {mode} | ({compare} if compare else set())
    limit, text_weight = LIMIT, TEXT_WEIGHT
    if in_play - {"kg"}:
        notices.append(url_number_notice("limit", "limit", 1, 50, LIMIT, integer=True))
        limit = top[2].number_input(
            "Limit", 1, 50, LIMIT, key="limit", bind="query-params", persist_state="page",
            help="Results of the tool modes (vector, hybrid, graph, comprehensive, dual-channel); books for multi-doc",
        )
    if "hybrid" in in_play:
        notices.append(url_number_notice("text_weight", "text_weight", 0.0, 1.0, TEXT_WEIGHT))
        text_weight = top[3].slider(
            "text_weight (BM25 share)", 0.0, 1.0, TEXT_WEIGHT, 0.05, key="text_weight", bind="query-params",
            persist_state="page", help="hybrid = text_weight·BM25_norm + (1 − text_weight)·vector_norm",
        )
    budget = 120
    if compare is None and mode in GRAPH_MODES:
        notices.append(url_number_notice("nodes", "the graph", 10, 500, 120, integer=True))
        budget = top[4].number_input(
            "Nodes drawn", 10, 500, 120, 10, key="nodes", bind="query-params", persist_state="page",
            help="Node budget of the graph view; the rest is counted, not drawn",
        )
    if "kg" in in_play:
        notices += kg_notices()
    params = kg_params() if "kg" in in_play else _DEFAULT
    return SearchRequest(
        query=(query or "").strip(), params=params, node_budget=int(budget), mode=mode, compare=compare,
        limit=int(limit), text_weight=round(float(text_weight), 4), notices=tuple(n for n in notices if n),
    )


def kg_params() -> SearchParams:
    """The KG retriever's seed parameters (drawn only while KG is one of the modes)."""
    cols = st.columns(5)
    max_results = cols[0].number_input(
        "Max results", 1, 50, _DEFAULT.max_results, key="max_results", bind="query-params", persist_state="page",
        help="max_results: facts returned after reranking",
    )
    max_seed_nodes = cols[1].number_input(
        "Seed nodes", 1, 50, _DEFAULT.max_seed_nodes, key="max_seed_nodes", bind="query-params",
        persist_state="page",
        help="max_seed_nodes: entities matched from the query that start the walk",
    )
    hops = cols[2].selectbox(
        "Max hops", HOPS, key="max_hops", bind="query-params", persist_state="page",
        help="max_hops: path length limit; auto follows the query decomposition",
    )
    top_k = cols[3].number_input(
        "PPR destinations", 1, 100, _DEFAULT.top_k_destinations, key="top_k_destinations",
        bind="query-params", persist_state="page",
        help="top_k_destinations: highest-PPR entities whose paths are traced",
    )
    damping = cols[4].slider(
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
