"""KG Lens: Settings once per session, cached stores and models, navigation over pages/, sidebar status."""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

import streamlit as st

ASSETS = Path(__file__).parent / "components" / "assets"


def team_configured() -> bool:
    """Team mode is asked for (KG_ACCESS_FILE, or an [auth] table in the secrets), read without the engine."""
    return bool(os.environ.get("KG_ACCESS_FILE")) or bool(st.secrets.load_if_toml_exists() and "auth" in st.secrets)


# st.navigation is the first Streamlit call, before the page config and the shell's imports: a server's first run
# starts in Streamlit's older pages-folder mode (there is a pages/ folder) until this call turns it off for the
# process, and a click that reruns before it (any st call is a point where a rerun takes over; a cold start imports
# for seconds) would leave every session in that mode: pages run without this shell (no graph picker, no graph
# view library). Search is served at the app's root; its own name, /search, is an alias that opens it with the
# link's parameters. Team mode must know who is signed in before it (the menu is hidden until then, the Audit log
# page listed for admins only), so there the shell's imports come first. The pages have no icons: the page config
# comes after st.navigation, which would make a page's ":material/...:" icon the favicon, fetched from
# fonts.gstatic.com (the app reaches nothing off this machine; the page config's local icon replaces the default).
search_page = st.Page("pages/search.py", title="Search", url_path="kg-search", default=True)


def search_alias() -> None:
    st.switch_page(search_page, query_params=st.query_params.to_dict())


data_page = st.Page("pages/data.py", title="Data", url_path="data")
manage = [data_page]
signed_out = False
if team_configured():
    import app_state
    from ui_records import SignIn

    gate = app_state.access(app_state.shell_settings())
    signed_out = isinstance(gate, SignIn)  # nobody signed in, not allowed in, or a half set-up
    if not signed_out and gate.allows("audit"):
        manage.append(st.Page("pages/audit.py", title="Audit log", url_path="audit"))
nav = st.navigation(
    {
        "Explore": [
            search_page,
            st.Page("pages/paths.py", title="Paths", url_path="paths"),
            st.Page("pages/map.py", title="Map", url_path="map"),
            st.Page("pages/memory.py", title="Graph Memory", url_path="memory"),
            st.Page("pages/query.py", title="Query", url_path="query"),
            st.Page("pages/communities.py", title="Communities", url_path="communities"),
            st.Page(search_alias, title="Search", url_path="search", visibility="hidden"),
        ],
        "Curate": [
            st.Page("pages/curation.py", title="Curation", url_path="curation"),
        ],
        "Evaluate": [
            st.Page("pages/rerank.py", title="Rerank Inspector", url_path="rerank"),
            st.Page("pages/labels.py", title="Labeling", url_path="labels"),
        ],
        "Manage": manage,
    },
    position="hidden" if signed_out else "sidebar",
)
# A local icon, after st.navigation (see above).
st.set_page_config(page_title="KG Lens", page_icon=str(ASSETS / "icon.svg"), layout="wide")
import app_state  # noqa: E402 - after st.navigation, see above
from components import communities_view, graph_live, link_params, paths_view, rerank_view, search_form  # noqa: E402
from components.sidebar import render_sidebar  # noqa: E402
from components.signin import render_sign_in  # noqa: E402
from ui_records import SignIn  # noqa: E402

cfg = app_state.shell_settings()
gate = app_state.access(cfg)
if isinstance(gate, SignIn):  # the pages are known (a deep link is no "page not found") but none runs: no data
    render_sign_in(gate, partial(app_state.sign_out, cfg))
    st.stop()
# The bound widgets of the pages whose question and settings belong to the graph they were made on.
PAGE_PARAMS = {"": search_form.PARAMS, "paths": paths_view.PARAMS, "rerank": rerank_view.PARAMS,
               "communities": communities_view.PARAMS}
st.logo(str(ASSETS / "logo.svg"), size="large", icon_image=str(ASSETS / "icon.svg"))
handle = app_state.current_handle(cfg)
notice = app_state.graph_notice(cfg)  # read before the URL is set to the graph in use
left, picked = app_state.keep_graph(handle.name if handle else None)  # the graph follows the analyst's session
link_params.enter(nav.url_path)
if left is not None:  # another graph: its pages start from their defaults (a link's own values kept)
    link_params.start_afresh(PAGE_PARAMS.get(nav.url_path, ()), [p for ps in PAGE_PARAMS.values() for p in ps],
                             keep_link=not picked)
# the link's bad values: those found on an earlier run of this page (the page says the ones it finds now)
link_params.render([*link_params.shown(), link_params.note("graph", notice, None)])
render_sidebar(cfg, handle, lambda: [app_state.gemini_status(cfg), app_state.cross_encoder_status(cfg)], data_page,
               app_state.graph_choices(cfg), app_state.pick_graph, app_state.signed(gate, handle),
               partial(app_state.sign_out, cfg))
with st.sidebar:
    graph_live.load_library()  # vis-network, sent once per browser session (components/graph_live.py)
# The graph is opened (and warmed up: one search, one layout) by the page that needs it, once per version, after
# the page has drawn what needs no graph (Search: its form), so a first view is not seconds of grey skeletons; a
# changeset a crash interrupted, rolled back on that open, is said in the sidebar (app_state.page_kg).
nav.run()
