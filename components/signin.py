"""Team mode's page before any data: sign in with the organisation's OpenID Connect provider (Streamlit's `st.login`),
or what keeps a user out (a team set-up missing a half, a user the access file grants nothing)."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from ui_records import SignIn
from ui_text import md_literal


def render_sign_in(sign_in: SignIn, sign_out: Callable[[], None]) -> None:
    """The page drawn instead of the app: no graph, no sidebar data, nothing read from the data directory."""
    st.markdown("## KG Lens")
    if sign_in.problem:
        st.error(md_literal(sign_in.problem), icon=":material/lock:")
        if sign_in.who:
            st.button("Sign out", icon=":material/logout:", on_click=sign_out, key="signin-out")
        return
    st.markdown("This KG Lens is shared by a team: sign in to see its graphs.")
    for provider, label in sign_in.providers:
        st.button(f"Sign in with {label}", type="primary", icon=":material/login:", key=f"signin-{provider or ''}",
                  on_click=st.login, args=(provider,) if provider else ())
