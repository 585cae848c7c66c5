"""The shared graph view with the legend's role names said in a page's own terms (start, endpoints, traversal)."""

from __future__ import annotations

from collections.abc import Mapping

from components.graph_view import GraphMarks, GraphView, Legend, render_view
from retrieval.models import Subgraph
from ui_records import LiveGraph

# The graph view's legend words (Search's vocabulary) -> what the same marks mean on the other pages.
EXPLORE_ROLES = {"★ seed": "★ start", "◆ PPR destination": "◆ expanded",
                 "◉ dark ring / edge: traced path": "◉ dark ring: new in the last expansion",
                 "● orange: picked fact": "● orange: path to the picked entity"}
PATH_ROLES = {"★ seed": "★ endpoints", "● orange: picked fact": "● orange: picked path"}
TRAVERSAL_ROLES = {"★ seed": "★ traversal start", "● orange: picked fact": "● orange: reached by the traversal"}


def draw(subgraph: Subgraph, marks: GraphMarks, roles: Mapping[str, str], *, max_nodes: int,
         height: int = 600, live: LiveGraph | None = None, key: str = "kg-graph", **instrument: object) -> GraphView:
    """Draw like `render_graph` (the same live view, details, expansion and context actions with `live`), with
    the legend's role names replaced by `roles`."""
    return draw_view(subgraph, marks, roles, max_nodes=max_nodes, height=height, live=live, key=key, **instrument)[0]


def draw_view(subgraph: Subgraph, marks: GraphMarks, roles: Mapping[str, str], *, max_nodes: int,
              height: int = 600, live: LiveGraph | None = None, key: str = "kg-graph",
              **instrument: object) -> tuple[GraphView, Subgraph]:
    """`draw`, also returning the current view's subgraph (what an export of the view holds)."""
    return render_view(subgraph, marks, max_nodes=max_nodes, height=height, legend=Legend().renamed(roles), live=live,
                       key=key, **instrument)  # type: ignore[arg-type]
