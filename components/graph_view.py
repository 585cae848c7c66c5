"""The graph view's entry points: `render_graph` draws a subgraph in the live component (click, expand, inspect,
filter; components/graph_instrument.py), and `graph_html` writes the same subgraph as a standalone pyvis page
(vis-network inlined, no CDN) for downloads and the benchmark's old-view baseline."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader
from pyvis.network import Network

from components import graph_instrument
from components.graph_data import (
    PALETTE,
    GraphMarks,
    GraphView,
    Legend,
    pick_nodes,
    type_colors,
)
from retrieval.models import Entity, Relation, Subgraph
from ui_records import LiveGraph
from ui_text import clean, esc, short

__all__ = ["PALETTE", "GraphMarks", "GraphView", "Legend", "graph_html", "pick_nodes", "render_graph", "type_colors"]

FOCUS = "#e8590c"
PATH_BORDER = "#1d2433"
EDGE = "#aab2bd"
EDGE_FADED = "#dfe3e8"

_CREATE = "network = new vis.Network(container, data, options);"
# vis-network shows a string title with innerText, but pyvis swaps in an innerHTML popup whenever a title
# contains "href". So titles never hold data: the escaped tooltip rides in `tip` and becomes a DOM element here.
_TIPS_JS = """
              function kgTips(ds) {
                  ds.forEach(function (item) {
                      if (item.tip) {
                          var el = document.createElement("div");
                          el.className = "kg-tip";
                          el.innerHTML = item.tip;
                          ds.update({id: item.id, title: el});
                      }
                  });
              }
              kgTips(nodes);
              kgTips(edges);
              network = new vis.Network(container, data, options);
              network.once("afterDrawing", function () { document.body.setAttribute("data-kg-drawn", "1"); });
"""
_VIS_CSS = re.compile(r"<style>\s*\.vis-overlay\{.*?</style>", re.S)  # vis-network.css, 220 kB
_BOOTSTRAP = re.compile(r"<link[^>]*bootstrap[^>]*>|<script[^>]*bootstrap[^>]*>\s*</script>", re.S)
_EMPTY_HEADING = re.compile(
    r"<center>\s*<h1>\s*</h1>\s*</center>|<!-- <link rel=\"stylesheet\" href=\"\.\./node_modules.*?-->", re.S
)
_STYLE = """
<style>
  html, body { margin: 0; padding: 0; font-family: "Source Sans Pro", "Source Sans 3", system-ui, sans-serif; }
  .card { border: 1px solid #dde2ea; border-radius: 6px; overflow: hidden; position: relative; box-sizing: border-box; }
  #mynetwork { border: none !important; float: none !important; }
  div.vis-tooltip { max-width: 360px; white-space: normal; font-size: 13px; line-height: 1.35;
                    background: #ffffff; border: 1px solid #c8ced8; border-radius: 6px; padding: 8px 10px;
                    box-shadow: 0 4px 14px rgba(0,0,0,.12); color: #1d2433; font-family: inherit; }
  .kg-tip b { font-size: 14px; }
  .kg-tip .ty { display: inline-block; margin-left: 6px; padding: 0 6px; border-radius: 8px; font-size: 11px;
                background: #eef1f6; color: #3d4656; }
  .kg-tip p { margin: 6px 0 0 0; }
  .kg-tip .id { display: block; margin-top: 6px; color: #7a8494; font-size: 11px; }
  #kg-legend { display: flex; flex-wrap: wrap; gap: 2px 18px; padding: 6px 10px; font-size: 12px; color: #1d2433;
               line-height: 1.6; background: #f7f8fb; border-bottom: 1px solid #e4e8ef; }
  #kg-legend .sw { display: inline-block; width: 10px; height: 10px; border-radius: 50%; margin: 0 4px 0 0;
                   vertical-align: -1px; }
  #kg-legend .it { display: inline-block; margin-right: 10px; white-space: nowrap; }
  #kg-legend .hd { font-weight: 600; color: #566072; margin-right: 6px; }
</style>
"""


def _node_tip(n: Entity) -> str:
    desc = f"<p>{esc(short(n.description, 600))}</p>" if n.description else ""
    return (
        f'<b>{esc(short(n.name, 200))}</b><span class="ty">{esc(short(n.type, 60))}</span>{desc}'
        f'<span class="id">{esc(short(n.id, 120))}</span>'
    )


def _edge_tip(r: Relation, names: dict[str, str]) -> str:
    head = (
        f"<b>{esc(short(names.get(r.source_id, r.source_id), 80))}</b> — {esc(short(r.relation_type, 80))} → "
        f"<b>{esc(short(names.get(r.target_id, r.target_id), 80))}</b>"
    )
    desc = f"<p>{esc(short(r.description, 600))}</p>" if r.description else ""
    when = ""
    if r.valid_at or r.invalid_at:
        when = f'<span class="id">valid {esc(r.valid_at or "…")} – {esc(r.invalid_at or "…")}</span>'
    return head + desc + when


def _legend(colors: dict[str, str], marks: GraphMarks, words: Legend) -> str:
    items = "".join(
        f'<span class="it"><span class="sw" style="background:{c}"></span>{esc(short(t, 28))}</span>'
        for t, c in list(colors.items())[:10]
    )
    if len(colors) > 10:
        items += f'<span class="it">+{len(colors) - 10} more</span>'
    roles = "".join(f'<span class="it" style="color:{FOCUS};font-weight:600">{esc(w)}</span>' if bit == 8
                    else f'<span class="it">{esc(w)}</span>' for w, bit in words.items(marks))
    marks_row = f'<div><span class="hd">Marks</span>{roles}</div>' if roles else ""  # no empty row
    return f'<div id="kg-legend"><div><span class="hd">Types</span>{items}</div>{marks_row}</div>'


@cache
def _template_env(template_dir: str) -> Environment:
    """One jinja Environment for pyvis's template, so it is parsed once (it inlines 700 kB of vis-network),
    not on every draw."""
    return Environment(loader=FileSystemLoader(template_dir))


@cache
def _tooltip_css(template_dir: str) -> str:
    """Of vis-network.css (220 kB: timeline, manipulation and navigation widgets too), the only rule this view
    uses: the tooltip's."""
    css = (Path(template_dir) / "lib" / "vis-9.1.2" / "vis-network.css").read_text(encoding="utf-8")
    return "<style>" + "".join(re.findall(r"div\.vis-tooltip\{[^{}]*\}", css)) + "</style>"


def graph_html(
    subgraph: Subgraph,
    marks: GraphMarks | None = None,
    *,
    max_nodes: int = 120,
    height: int = 560,
    legend: Legend | None = None,
) -> GraphView:
    """Build the vis-network page for `subgraph`; every data string reaches HTML escaped."""
    marks = marks or GraphMarks()
    nodes = pick_nodes(subgraph, marks, max_nodes)
    kept = {n.id for n in nodes}
    names = {n.id: clean(n.name) for n in subgraph.nodes}
    colors = type_colors(nodes)
    focused = bool(marks.focus_nodes or marks.focus_edges)

    net = Network(height=f"{height}px", width="100%", directed=True, cdn_resources="in_line", bgcolor="#ffffff")
    net.templateEnv = _template_env(net.template_dir)  # pyvis makes an Environment per Network: no template cache
    for n in nodes:
        color = colors[clean(n.type) or "entity"]
        shape, size, border, border_color = "dot", 11, 1, color
        if n.id in marks.seeds:
            shape, size = "star", 24
        elif n.id in marks.destinations:
            shape, size = "diamond", 17
        if n.id in marks.path_nodes:
            border, border_color = 3, PATH_BORDER
        if n.id in marks.focus_nodes:
            # same size as unpicked: sizes feed the physics, and the layout must not jump when a fact is picked
            border, border_color = 5, FOCUS
        net.add_node(
            n.id,
            # Canvas text (not HTML): raw name, shown literally; tojson escapes it for the script context.
            label=short(n.name, 32),
            tip=_node_tip(n),
            shape=shape,
            size=size,
            borderWidth=border,
            borderWidthSelected=border + 2,
            color={"background": color, "border": border_color, "highlight": {"background": color, "border": FOCUS}},
            font={"size": 13, "color": "#1d2433", "bold": n.id in marks.focus_nodes},
            opacity=0.35 if focused and n.id not in marks.focus_nodes else 1.0,
        )

    pair_seen: Counter[tuple[str, str]] = Counter()
    shown_edges = focus_edges = 0
    for r in subgraph.edges:
        if r.source_id not in kept or r.target_id not in kept:
            continue
        pair = (min(r.source_id, r.target_id), max(r.source_id, r.target_id))
        nth = pair_seen[pair]
        pair_seen[pair] += 1
        in_focus = r.id in marks.focus_edges
        on_path = r.id in marks.path_edges
        color = FOCUS if in_focus else PATH_BORDER if on_path else EDGE_FADED if focused else EDGE
        net.add_edge(
            r.source_id,
            r.target_id,
            id=r.id,
            label=short(r.relation_type, 28),
            tip=_edge_tip(r, names),
            width=4 if in_focus else 2.2 if on_path else 1,
            color={"color": color, "highlight": FOCUS},
            font={"size": 10, "color": FOCUS if in_focus else "#5b6577", "strokeWidth": 3, "align": "middle"},
            # parallel relations between one pair fan out instead of overlapping
            smooth={"enabled": True, "type": "curvedCW", "roundness": 0.12 + 0.18 * nth},
        )
        shown_edges += 1
        focus_edges += in_focus

    net.set_options(json.dumps({
        "layout": {"randomSeed": 7, "improvedLayout": len(nodes) <= 150},
        "interaction": {"hover": True, "tooltipDelay": 120, "navigationButtons": False, "keyboard": False},
        "physics": {
            "solver": "forceAtlas2Based",
            "forceAtlas2Based": {"gravitationalConstant": -60, "springLength": 110, "avoidOverlap": 0.4},
            "stabilization": {"enabled": True, "iterations": 120, "fit": True},
        },
        "edges": {"arrows": {"to": {"enabled": True, "scaleFactor": 0.55}}},
    }))
    page = net.generate_html(notebook=False)
    if _CREATE not in page:
        raise RuntimeError("pyvis template changed: cannot attach the escaped tooltips")
    page = page.replace(_CREATE, _TIPS_JS, 1)
    page = _VIS_CSS.sub(lambda _: _tooltip_css(net.template_dir), page, count=1)
    page = _BOOTSTRAP.sub("", page)
    page = _EMPTY_HEADING.sub("", page)
    page = page.replace("</head>", _STYLE + "</head>", 1)
    page = page.replace('<div id="mynetwork"', _legend(colors, marks, legend or Legend()) + '<div id="mynetwork"', 1)
    meta = (
        f'<div id="kg-meta" hidden data-shown="{len(nodes)}" data-edges="{shown_edges}" '
        f'data-focus-nodes="{len(kept & marks.focus_nodes)}" data-focus-edges="{focus_edges}"></div>'
    )
    page = page.replace("</body>", meta + "</body>", 1)
    total = max(subgraph.total_nodes, len({n.id for n in subgraph.nodes}))
    return GraphView(
        html=page,
        shown_nodes=len(nodes),
        total_nodes=total,
        shown_edges=shown_edges,
        focus_nodes=len(kept & marks.focus_nodes),
        focus_edges=focus_edges,
        type_colors=colors,
    )


def render_graph(
    subgraph: Subgraph,
    marks: GraphMarks | None = None,
    *,
    max_nodes: int = 120,
    height: int = 560,
    legend: Legend | None = None,
    live: LiveGraph | None = None,
    key: str = "kg-graph",
    scores: Mapping[str, Mapping[str, float]] | None = None,
    cut_note: str = "",
    stem: str = "graph",
    **instrument: object,
) -> GraphView:
    """Draw the subgraph in the live graph view `key` (one per page), with a status line that says what the
    node budget (or `cut_note`: the subgraph's own cap) leaves out. With `live` (the opened graph), a click shows
    the node's or relation's details from the engine beside the graph, a double-click expands its neighbours, and
    the context menu hides, pins, sets path ends or searches from the node; `scores` (name -> {entity id: value},
    e.g. this search's PPR) are shown in the details. More keywords (`hooks`, `scene`, `base_ids`, `anchors`)
    let a page that owns its expansions drive the view: see `graph_instrument.render`."""
    return render_view(subgraph, marks, max_nodes=max_nodes, height=height, legend=legend, live=live, key=key,
                       scores=scores, cut_note=cut_note, stem=stem, **instrument)[0]


def render_view(subgraph: Subgraph, marks: GraphMarks | None = None, **options: object) -> tuple[GraphView, Subgraph]:
    """`render_graph`, also returning the current view's subgraph (expanded, without hidden nodes) to export."""
    if not subgraph.nodes:
        return graph_instrument.render_empty("No subgraph for this result."), subgraph
    return graph_instrument.render(subgraph, marks or GraphMarks(), **options)  # type: ignore[arg-type]
