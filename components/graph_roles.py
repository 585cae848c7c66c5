"""The shared graph view with the legend's role names said in a page's own terms (start, endpoints, traversal)."""

from __future__ import annotations

import re
from collections.abc import Mapping

import streamlit as st

from components.graph_view import GraphMarks, GraphView, graph_html
from retrieval.models import Subgraph

# The graph view's legend words (Search's vocabulary) -> what the same marks mean on the other pages.
EXPLORE_ROLES = {"★ seed": "★ start", "◆ PPR destination": "◆ expanded",
                 "◉ dark ring / edge: traced path": "◉ dark ring: new in the last expansion",
                 "● orange: picked fact": "● orange: path to the picked entity"}
PATH_ROLES = {"★ seed": "★ endpoints", "● orange: picked fact": "● orange: picked path"}
TRAVERSAL_ROLES = {"★ seed": "★ traversal start", "● orange: picked fact": "● orange: reached by the traversal"}


def draw(subgraph: Subgraph, marks: GraphMarks, roles: Mapping[str, str], *, max_nodes: int,
         height: int = 600) -> GraphView:
    """Draw like `render_graph`, with the legend's role names replaced by `roles`."""
    if not subgraph.nodes:
        st.info("Nothing to draw.")
        return GraphView(html="", shown_nodes=0, total_nodes=0, shown_edges=0, focus_nodes=0, focus_edges=0)
    view = graph_html(subgraph, marks, max_nodes=max_nodes, height=height)
    page = view.html
    for old, new in roles.items():  # a legend item is `<span class="it" ...>WORDS</span>`; data never matches it
        page = re.sub(f'(<span class="it"[^>]*>){re.escape(old)}</span>', rf"\g<1>{new}</span>", page, count=1)
    st.iframe(page, height="content")
    note = f"{view.shown_nodes} entities · {view.shown_edges} relations drawn"
    if view.truncated:
        note = f"Drawing {view.shown_nodes} of {view.total_nodes} entities · {view.shown_edges} relations"
    st.caption(note + " · drag to move, scroll to zoom, hover for descriptions")
    return view
