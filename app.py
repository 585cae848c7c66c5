"""KG Lens: Settings once per session, cached stores and models, navigation over pages/, sidebar status."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

import app_state
from components import graph_live
from components.graph_data import warm_layout
from components.sidebar import render_sidebar
from retrieval.errors import RetrievalError
from ui_text import md_literal

ASSETS = Path(__file__).parent / "components" / "assets"

# A local icon: a ":material/...:" page icon makes the browser fetch the favicon from fonts.gstatic.com.
st.set_page_config(page_title="KG Lens", page_icon=str(ASSETS / "icon.svg"), layout="wide")

cfg = app_state.settings()
data_page = st.Page("pages/data.py", title="Data", icon=":material/database:", url_path="data")
nav = st.navigation(
    {
        "Explore": [
            st.Page("pages/search.py", title="Search", icon=":material/search:", url_path="search", default=True),
            st.Page("pages/paths.py", title="Paths", icon=":material/route:", url_path="paths"),
            st.Page("pages/memory.py", title="Graph Memory", icon=":material/inventory_2:", url_path="memory"),
            st.Page("pages/query.py", title="Query", icon=":material/terminal:", url_path="query"),
            st.Page("pages/communities.py", title="Communities", icon=":material/groups:", url_path="communities"),
        ],
        "Evaluate": [
            st.Page("pages/rerank.py", title="Rerank Inspector", icon=":material/leaderboard:", url_path="rerank"),
            st.Page("pages/labels.py", title="Labeling", icon=":material/checklist:", url_path="labels"),
        ],
        "Manage": [data_page],
    }
)
st.logo(str(ASSETS / "logo.svg"), size="large", icon_image=str(ASSETS / "icon.svg"))
handle = app_state.current_handle(cfg)
render_sidebar(cfg, handle, lambda: [app_state.gemini_status(cfg), app_state.cross_encoder_status(cfg)], data_page)
with st.sidebar:
    graph_live.load_library()  # vis-network, sent once per browser session (components/graph_live.py)
if handle is not None:
    try:
        # once per graph version, on the first page view, so searches and the graph view's layout start warm
        app_state.open_kg(cfg, handle, warm=warm_layout)
    except RetrievalError as exc:
        st.sidebar.error(f"Cannot open graph **{md_literal(handle.name)}**: {md_literal(exc)}")
notice = app_state.graph_notice(cfg)
if notice:
    st.warning(notice, icon=":material/link_off:")
nav.run()
