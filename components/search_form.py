"""Query box and seed parameters, bound to the URL so a copied link reproduces the search."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import streamlit as st

from retrieval.models import SearchParams

_DEFAULT = SearchParams.model_validate({})
HOPS = ("auto", "1", "2", "3", "4")


@dataclass(frozen=True)
class SearchRequest:
    query: str
    params: SearchParams
    node_budget: int

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


def search_form(*, placeholder: str = "Ask a multi-hop question about this graph and press Enter") -> SearchRequest:
    """Enter in the query box runs the search; every widget is a URL query parameter (its key)."""
    query = st.text_input(
        "Query",
        key="q",
        bind="query-params",
        placeholder=placeholder,
        label_visibility="collapsed",
        icon=":material/search:",
        max_chars=2000,
    )
    cols = st.columns([1, 1, 1, 1, 1.4, 1])
    max_results = cols[0].number_input(
        "Max results", 1, 50, _DEFAULT.max_results, key="max_results", bind="query-params",
        help="max_results: facts returned after reranking",
    )
    max_seed_nodes = cols[1].number_input(
        "Seed nodes", 1, 50, _DEFAULT.max_seed_nodes, key="max_seed_nodes", bind="query-params",
        help="max_seed_nodes: entities matched from the query that start the walk",
    )
    hops = cols[2].selectbox(
        "Max hops", HOPS, key="max_hops", bind="query-params",
        help="max_hops: path length limit; auto follows the query decomposition",
    )
    top_k = cols[3].number_input(
        "PPR destinations", 1, 100, _DEFAULT.top_k_destinations, key="top_k_destinations", bind="query-params",
        help="top_k_destinations: highest-PPR entities whose paths are traced",
    )
    damping = cols[4].slider(
        "PPR damping", 0.05, 0.95, _DEFAULT.damping, 0.05, key="damping", bind="query-params",
        help="damping: probability of continuing the walk (1 − restart probability)",
    )
    budget = cols[5].number_input(
        "Nodes drawn", 10, 500, 120, 10, key="nodes", bind="query-params",
        help="Node budget of the graph view; the rest is counted, not drawn",
    )
    params = SearchParams.model_validate({
        "max_results": int(max_results),
        "max_seed_nodes": int(max_seed_nodes),
        "max_hops": None if hops in (None, "auto") else int(hops),
        "top_k_destinations": int(top_k),
        "damping": round(float(damping), 4),
    })
    return SearchRequest(query=(query or "").strip(), params=params, node_budget=int(budget))
