"""The live graph view's two Streamlit bidirectional components (st.components.v2; their JS runs in the app's page).

- `kg_lens_vis` carries vis-network (470 kB), read from the copy pyvis installs (no CDN, nothing downloaded). The
  app shell mounts it once per run with the same key, so its message is identical on every run and page:
  Streamlit sends it in full once per browser session and a hash reference after that, and the browser
  evaluates it once (the module URL is cached by content).
- `kg_lens_graph` (components/assets/graph/graph.js) draws one graph and sends events back. Its message carries
  only its own code (~30 kB) and the graph data, as JSON bytes: a rerun that changes nothing re-sends nothing
  new, and new data updates the drawn network in place (positions stay).
- `kg_lens_details` (details.js) carries the details panel, notice and undo state to the view of the same key,
  so a click does not re-send the graph.
- The Map (components/map_view.py): `kg_lens_maplib` carries the vendored sigma.js + graphology bundle
  (components/assets/map/map.bundle.js, rebuilt by scripts/build_map_js), mounted by the Map page only, with one
  key, so it too is sent once and evaluated once; `kg_lens_map` (assets/map/map.js) draws the whole graph; its
  details, notice and lit search come through `kg_lens_details` as for the live view.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pyvis
import streamlit as st

ASSETS = Path(__file__).parent / "assets" / "graph"
MAP_ASSETS = Path(__file__).parent / "assets" / "map"
MAP_LIB_KEY = "kg-maplib"
VIS_JS = Path(pyvis.__file__).parent / "templates" / "lib" / "vis-9.1.2" / "vis-network.min.js"
VIS_KEY = "kg-vis"


@cache
def _vis_component() -> Callable[..., Any]:
    code = re.sub(r"//# sourceMappingURL=\S+\s*$", "", VIS_JS.read_text(encoding="utf-8"))
    # The UMD build assigns globalThis.vis when no module loader is present (a module's `this` is undefined).
    js = code + '\nwindow.dispatchEvent(new Event("kg-vis-ready"));\nexport default function () {}\n'
    return st.components.v2.component("kg_lens_vis", js=js, css=f".st-key-{VIS_KEY} {{ display: none; }}",
                                      isolate_styles=False)


def script(path: Path) -> str:
    """A view's module: the shared details panel and DOM helpers (panel.js), then the view's own script."""
    return (ASSETS / "panel.js").read_text(encoding="utf-8") + "\n" + path.read_text(encoding="utf-8")


@cache
def _graph_component() -> Callable[..., Any]:
    return st.components.v2.component(
        "kg_lens_graph",
        js=script(ASSETS / "graph.js"),
        css=(ASSETS / "graph.css").read_text(encoding="utf-8"),
        isolate_styles=False,  # light DOM: vis-network's canvas events and the page's own checks see it
    )


@cache
def _details_component() -> Callable[..., Any]:
    return st.components.v2.component(
        "kg_lens_details", js=(ASSETS / "details.js").read_text(encoding="utf-8"), isolate_styles=False,
    )  # its element is hidden by graph.css


@cache
def _map_lib_component() -> Callable[..., Any]:
    code = (MAP_ASSETS / "map.bundle.js").read_text(encoding="utf-8")
    js = code + '\nwindow.dispatchEvent(new Event("kg-maplib-ready"));\nexport default function () {}\n'
    return st.components.v2.component("kg_lens_maplib", js=js, css=f".st-key-{MAP_LIB_KEY} {{ display: none; }}",
                                      isolate_styles=False)


@cache
def _map_component() -> Callable[..., Any]:
    css = (ASSETS / "graph.css").read_text(encoding="utf-8") + (MAP_ASSETS / "map.css").read_text(encoding="utf-8")
    return st.components.v2.component("kg_lens_map", js=script(MAP_ASSETS / "map.js"), css=css,
                                      isolate_styles=False)  # light DOM: sigma's canvases and the tests see it


def mount_map(key: str, message: bytes, extra: dict[str, Any], on_event: Callable[[], None]) -> None:
    """Draw the Map `key` from `message` (ui_map.py: the graph version's arrays, sent once; the same bytes on the
    next run are a reference) and hand it its details, notice and lit search through `kg_lens_details`."""
    _map_lib_component()(key=MAP_LIB_KEY)
    _map_component()(key=key, data=message, on_event_change=on_event)
    _details_component()(key=f"{key}--kgdetails", data={**extra, "key": key})


def load_library() -> None:
    """Mount vis-network for this page run (the app shell calls it once per run, in the sidebar)."""
    _vis_component()(key=VIS_KEY)


def mount(key: str, graph: bytes, extra: dict[str, Any], on_event: Callable[[], None]) -> None:
    """Draw (or update in place) the graph component `key` with `graph` (the JSON `graph_instrument` builds),
    and hand the view its details panel, notice and undo state through the small `kg_lens_details` component:
    a click changes only those, so the graph's message is the same as before (Streamlit sends a reference) and
    the browser redraws nothing. The browser's events (select, expand, hide, pin, path start/end, search,
    undo/redo) call `on_event` before the next run, which reads `st.session_state[key]["event"]`."""
    _graph_component()(key=key, data=graph, on_event_change=on_event)
    _details_component()(key=f"{key}--kgdetails", data={**extra, "key": key})
