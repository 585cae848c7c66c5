"""A page's link parameters (the keys of its URL-bound widgets): bad values named in warnings that stay, and a fresh
start when the analyst changes graph.

Streamlit drops a bad value of a bound widget from the URL as the widget registers, and a real browser reruns the
page at once (the annotator memory, the graph view report back), so a warning computed only from the URL is gone
a moment later. A notice is therefore kept for the session while the widget still holds the value it fell back
to, and forgotten on another page or graph: the page shows it on the run that finds it (`check`, `note`), the app
shell on every later run (`shown`). A question and its settings belong to the graph they were asked of: on a
switch to another graph the bound widgets the link does not set go back to their defaults.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import streamlit as st

from ui_text import md_code

NOTICES = "link-notices"  # session: key -> (notice, the value the widget fell back to)
PAGE = "link-page"  # the page the kept notices belong to
VIEW_STATE = ("::state", "::built", "::details")  # suffixes of a graph view's session state (graph_instrument)


@dataclass(frozen=True)
class Param:
    """One bound widget: its URL key, its default and what the link may set it to."""

    key: str
    default: object
    low: float | None = None  # a number from low to high (whole with `integer`)
    high: float | None = None
    integer: bool = False
    choices: tuple[str, ...] = ()  # else one of these URL values
    what: str = ""  # what a bad value falls back to, said after the colon ("damping uses 0.5")
    noun: str = ""  # what a choice is ("a search mode")

    def problem(self, raw: str) -> str:
        """Why `raw` cannot be this parameter's value, as the warning says it ('' when it can)."""
        if self.low is None and not self.choices:
            return ""  # free text (a question), or checked where its options are known (an entity picker)
        if self.choices:
            if raw in self.choices:
                return ""
            return (f"{md_code(f'{self.key}={raw}')} in the link is not {self.noun or 'one of'} "
                    f"({', '.join(self.choices)}): {self.what}.")
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        assert self.high is not None
        if self.low <= value <= self.high and (value.is_integer() or not self.integer):
            return ""
        kind = "a whole number" if self.integer else "a number"
        return (f"{md_code(f'{self.key}={raw}')} in the link is not {kind} from {self.low:g} to {self.high:g}: "
                f"{self.what}.")


def number(key: str, low: float, high: float, default: float, *, integer: bool = False, what: str = "") -> Param:
    return Param(key, default, low, high, integer, what=what or f"{key} uses {default:g}")


def choice(key: str, choices: Sequence[str], default: object, noun: str, what: str) -> Param:
    return Param(key, default, choices=tuple(choices), what=what, noun=noun)


def note(key: str, text: str, fallback: object) -> str:
    """Keep `text` for the session while the widget `key` holds `fallback`, the value it took instead; returns it
    for the page to show when it is new (the shell shows a kept one), else ''."""
    kept = st.session_state.setdefault(NOTICES, {})
    if not text or kept.get(key, ("",))[0] == text:
        return ""
    kept[key] = (text, fallback)
    return text


def check(param: Param) -> str:
    """Read before the widget is drawn (drawing it drops a bad value from the URL): the notice for a bad value in
    the link, new on this run (see `note`); '' when the link's value is good, absent or already said."""
    raw = st.query_params.get(param.key)
    return note(param.key, param.problem(raw), param.default) if raw is not None else ""


def shown() -> list[str]:
    """The notices kept for this page whose widget still holds the value it fell back to, oldest first."""
    kept: Mapping[str, tuple[str, object]] = st.session_state.get(NOTICES, {})
    return [text for key, (text, fallback) in kept.items() if st.session_state.get(key, fallback) == fallback]


def render(texts: Sequence[str]) -> None:
    for text in texts:
        if text:
            st.warning(text, icon=":material/link_off:")


def forget() -> None:
    """Another page or graph: the kept notices no longer apply."""
    st.session_state.pop(NOTICES, None)


def enter(page: str) -> None:
    """The app shell, on every run: on another page than the last run's, the kept notices are forgotten."""
    if st.session_state.get(PAGE) != page:
        forget()
        st.session_state[PAGE] = page


def start_afresh(current: Sequence[Param], others: Sequence[Param], *, keep_link: bool) -> None:
    """After a switch to another graph: this page's bound widgets go back to their defaults (except, with
    `keep_link`, those the link sets), the other pages' forget their values, and every graph view starts anew."""
    here = {p.key for p in current}
    for p in current:
        if p.key in st.session_state and not (keep_link and p.key in st.query_params):
            st.session_state[p.key] = p.default  # a bound widget is reset by its value, and leaves the URL
    for p in others:
        if p.key not in here:
            st.session_state.pop(p.key, None)
    for key in list(st.session_state):
        if str(key).endswith(VIEW_STATE):
            del st.session_state[key]
    forget()
