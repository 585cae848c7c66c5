"""KG Lens: Settings once per session, cached stores and models, navigation over pages/, sidebar status."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

ASSETS = Path(__file__).parent / "components" / "assets"

# st.navigation is the first Streamlit call, before the page config and the shell's imports: a server's first run
# starts in Streamlit's older pages-folder mode (there is a pages/ folder) until this call turns it off for the
# process, and a click that reruns before it (any st call is a point where a rerun takes over; a cold start imports
# for seconds) would leave every session in that mode: pages run without this shell (no graph picker, no graph
# view library). Search is served at the app's root; its own name, /search, is an alias that opens it with the
# link's parameters.
search_page = st.Page("pages/search.py", title="Search", icon=":material/search:", url_path="kg-search", default=True)


def search_alias() -> None:
    st.switch_page(search_page, query_params=st.query_params.to_dict())


data_page = st.Page("pages/data.py", title="Data", icon=":material/database:", url_path="data")
nav = st.navigation(
    {
        "Explore": [
            search_page,
            st.Page("pages/paths.py", title="Paths", icon=":material/route:", url_path="paths"),
            st.Page("pages/memory.py", title="Graph Memory", icon=":material/inventory_2:", url_path="memory"),
            st.Page("pages/query.py", title="Query", icon=":material/terminal:", url_path="query"),
            st.Page("pages/communities.py", title="Communities", icon=":material/groups:", url_path="communities"),
            st.Page(search_alias, title="Search", url_path="search", visibility="hidden"),
        ],
        "Evaluate": [
            st.Page("pages/rerank.py", title="Rerank Inspector", icon=":material/leaderboard:", url_path="rerank"),
            st.Page("pages/labels.py", title="Labeling", icon=":material/checklist:", url_path="labels"),
        ],
        "Manage": [data_page],
    }
)
# A local icon: a ":material/...:" page icon makes the browser fetch the favicon from fonts.gstatic.com.
st.set_page_config(page_title="KG Lens", page_icon=str(ASSETS / "icon.svg"), layout="wide")

import app_state  # noqa: E402 - after st.navigation, see above
from components import communities_view, graph_live, link_params, paths_view, rerank_view, search_form  # noqa: E402
from components.sidebar import render_sidebar  # noqa: E402

cfg = app_state.settings()
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
               app_state.graph_choices(cfg), app_state.pick_graph)
with st.sidebar:
    graph_live.load_library()  # vis-network, sent once per browser session (components/graph_live.py)
# The graph is opened (and warmed up: one search, one layout) by the page that needs it, once per version, after
# the page has drawn what needs no graph (Search: its form), so a first view is not seconds of grey skeletons.
nav.run()
