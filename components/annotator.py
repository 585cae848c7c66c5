"""Who grades: in local mode one sidebar field that every grading surface uses, remembered for the browser session;
in team mode the signed-in identity (no free-text name), shown in the sidebar with its role and a sign-out button.

The name is kept in the tab's sessionStorage (a small bidirectional component), not in a URL parameter: a name in
the URL travels with every copied link and would make a colleague grade under it without noticing. Across page
changes the field keeps its value (it lives in the app shell's sidebar); after a reload the browser hands the name
back on the first run. `consensus` and `adjudicated` are reserved (derived and decided labels), so they are refused.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from components.grader import GradeTarget
from retrieval.errors import RetrievalError, ValidationError
from retrieval.evaluation.labels import ADJUDICATED, MAX_ANNOTATOR_CHARS, Label, LabelStore, normalize_annotator
from ui_records import ANNOTATOR_FIELD, SIGNED, Signed
from ui_text import md_code, md_literal

FIELD = ANNOTATOR_FIELD
MEMORY = "annotator-memory"
KNOWN = "annotator-known"  # the browser has reported what it remembered (once per session)
# The name as last typed or restored, kept in plain session state: a page switch made during a run (the graph's
# "Use as path end" opens Paths) can reset the field's widget state while the box still shows the name, and the
# memory would then erase it from the browser. The field is set back from here before it is drawn.
NAME = "annotator-name"

_MEMORY_JS = """
export default function ({ data, setStateValue }) {
  const KEY = "kglens.annotator";
  let stored = "";
  try { stored = window.sessionStorage.getItem(KEY) || ""; } catch (e) { stored = ""; }
  // Python has no name yet (none typed, none given back): hand over what this tab remembers, if anything. An
  // empty memory sends nothing: every value sent reruns the page, and a rerun that lands after a click on a page
  // link takes the analyst back to the page they were leaving.
  if (!data || !data.known) { if (stored) setStateValue("stored", stored); return; }
  try {
    if (data.name) window.sessionStorage.setItem(KEY, data.name);
    else window.sessionStorage.removeItem(KEY);
  } catch (e) { /* storage off: the name is kept for this page session only */ }
}
"""
_MEMORY = st.components.v2.component("kglens_annotator_memory", js=_MEMORY_JS)


def _restore() -> None:
    """The browser's remembered name fills an empty field, once per session (the memory's change callback, and
    again before the field is drawn: idempotent)."""
    if st.session_state.get(KNOWN):
        return
    state = st.session_state.get(MEMORY)
    stored = state.get("stored") if hasattr(state, "get") else None
    if not isinstance(stored, str):
        return  # the browser has not reported yet: until it has, nothing is written to its storage
    if stored and not st.session_state.get(FIELD):
        st.session_state[FIELD] = st.session_state[NAME] = stored[:MAX_ANNOTATOR_CHARS]
    st.session_state[KNOWN] = True


def _typed() -> None:
    """The field's change callback: what the analyst typed is the name."""
    st.session_state[NAME] = str(st.session_state.get(FIELD, "") or "")


def annotator_error(raw: str) -> str | None:
    """Why `raw` cannot be an annotator name, or None."""
    try:
        name = normalize_annotator(raw)
    except ValidationError as exc:
        return str(exc)
    return f"{ADJUDICATED!r} is reserved for decisions made in the Agreement view" if name == ADJUDICATED else None


def signed() -> Signed | None:
    found = st.session_state.get(SIGNED)
    return found if isinstance(found, Signed) else None


def current_annotator() -> str | None:
    """The name grades are stored under ('' is anonymous); None while the sidebar name is invalid or (team mode) the
    signed-in user may not grade the open graph."""
    who = signed()
    if who is not None:
        return who.key if who.grade.allowed else None
    raw = str(st.session_state.get(FIELD, "") or "")
    return None if annotator_error(raw) else normalize_annotator(raw)


def annotator_box(who: Signed | None = None, sign_out: Callable[[], None] | None = None) -> None:
    """Local mode: the sidebar field, and the component that remembers it in sessionStorage. Team mode (`who`): the
    signed-in identity, their role on the open graph, and a sign-out button."""
    if who is not None:
        with st.sidebar:
            st.markdown("#### Signed in")
            st.markdown(f"**{md_literal(who.display)}**" + (f" · {md_code(who.key)}" if who.display != who.key
                                                                else ""))
            st.caption(f"{md_literal(who.role)} on this graph" if who.role else "no role on this graph")
            if not who.grade.allowed:
                st.caption(f"Grading is off: {md_literal(who.grade.refusal)}")
            if sign_out is not None:
                st.button("Sign out", icon=":material/logout:", on_click=sign_out, key="sign-out")
        return
    with st.sidebar:
        st.markdown("#### Labeling")
        if MEMORY in st.session_state:
            _restore()
        kept = st.session_state.get(NAME)
        if isinstance(kept, str) and st.session_state.get(FIELD, "") != kept:
            st.session_state[FIELD] = kept  # the widget lost the name (a page switch): give it back
        st.text_input("Annotator", key=FIELD, placeholder="your name (empty: anonymous)",
                      max_chars=MAX_ANNOTATOR_CHARS, on_change=_typed,
                      help="Every grade you give is stored under this name; kept for this browser tab's session")
        raw = str(st.session_state.get(FIELD, "") or "")
        problem = annotator_error(raw)
        if problem:
            st.error(f"Grading is off: {md_literal(problem)}", icon=":material/error:")
        known = bool(st.session_state.get(KNOWN)) or NAME in st.session_state  # restored, or typed in this session
        _MEMORY(key=MEMORY, data={"known": known, "name": "" if problem else raw},
                on_stored_change=_restore, height=0)


def grading_target(labels: Callable[[], LabelStore], graph_version: str, *, required: bool = False,
                   follow: Callable[[list[Label]], list[Label]] | None = None) -> GradeTarget:
    """Where this page's grades go: the label store `labels` opens (the data dir's), the graph version, the
    sidebar's annotator; `follow` maps shown labels through the graph's curation (`app_state.follow`).

    A label store that cannot be opened (a read-only data directory, a full disk) is named in a warning and the
    page's lists become read-only; a page that is about labels (`required`) shows the error and stops instead.
    """
    try:
        store = labels()
    except RetrievalError as exc:
        if required:
            st.error(f"Cannot open the label store: {md_literal(exc)}", icon=":material/error:")
            st.stop()
        st.warning(f"Grading is off on this page: {md_literal(exc)}", icon=":material/edit_off:")
        return GradeTarget(None, graph_version, None, problem=str(exc))
    who = signed()
    if who is None:
        return GradeTarget(store, graph_version, current_annotator(), follow=follow)
    return GradeTarget(store, graph_version, current_annotator(), problem=who.grade.refusal, check=who.grade.check,
                       follow=follow)
