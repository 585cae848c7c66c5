"""The grading list: every gradable item with its full text, tags, sources and scores, grade buttons 0-3 and keyboard
grading (0-3 grade and advance, j/k or arrows move, u undo, ? help), on a bidirectional custom component
(st.components.v2: its JavaScript runs in the app page, no iframe, so keys go straight to it).

Lossless grading (assets/grader.js): the browser applies a grade at once and keeps every grade Python has not
acknowledged in the component's state value `log` = {client, events: [{seq, key, grade}]}. Streamlit may coalesce
state changes made while a run is in flight, but the latest log still holds every unacknowledged event. Python
stores the events above the last seq it applied for that client, in order (`apply_log`), before the page reads
labels (the state's change callback), and sends `ack` back; a write that fails stays unacknowledged and is retried
on the next run. Each grade is one `LabelStore.put_label` (fsynced before it returns).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import streamlit as st

from retrieval.errors import AccessDenied, RetrievalError
from retrieval.evaluation.consensus import shown_labels
from retrieval.evaluation.labels import ADJUDICATED, CONSENSUS, Label, LabelStore, normalize_query
from ui_text import clean, md_literal

ASSETS = Path(__file__).parent / "assets"
APPLIED = "grader-applied"  # session_state: client id -> the last seq applied (client ids are random per mount)
MAX_EVENTS = 5000  # one log never holds more (a browser would have to grade this many items within one run)

_GRADER = st.components.v2.component(
    "kglens_grader",
    html="",
    css=(ASSETS / "grader.css").read_text(encoding="utf-8"),
    js=(ASSETS / "grader.js").read_text(encoding="utf-8"),
    isolate_styles=False,  # in the page's DOM (CSS scoped to .kg-grader): page text search and checks see it
)


@dataclass(frozen=True)
class Tag:
    """A small badge beside an item (its type, channel, `shared`...); tone is one of the CSS tag colours."""

    text: str
    tone: str = "plain"


@dataclass(frozen=True)
class GradeRow:
    """One item as listed: `key` is unique in the list; the grade is stored for (query, item_id)."""

    key: str
    query: str
    item_id: str
    text: str
    rank: str = ""
    tags: tuple[Tag, ...] = ()
    meta: str = ""  # where it comes from: book › chapter, citation
    scores: tuple[tuple[str, str], ...] = ()  # (name, formatted value), in reading order
    head: str = ""  # a group header shown above this row


@dataclass(frozen=True)
class GradeTarget:
    """Where grades go: the label store, the graph version they belong to and who gives them (None: the list is
    read-only, `problem` says why: an invalid sidebar name, a role that may not grade). Without a store (it cannot be
    opened) the list shows no grades and stores none. `check` authorises a grade on the server before it is stored
    (team mode: a list drawn read-only still gets a crafted grade log, which it refuses); `note` goes on each label."""

    store: LabelStore | None
    graph_version: str
    annotator: str | None
    problem: str = ""
    check: Callable[[], None] | None = None
    note: str = ""
    # labels mapped through the graph's curation (a grade on an entity later merged shows on the one kept)
    follow: Callable[[list[Label]], list[Label]] | None = None


@dataclass(frozen=True)
class GradeEvent:
    seq: int
    key: str
    grade: int | None  # None: remove the annotator's own label (undo of a first grade)


def new_events(log: object, applied: Mapping[str, int]) -> tuple[str, list[GradeEvent], list[str]]:
    """The client id, its events above the last applied seq (in seq order), and what was malformed in the log."""
    if not isinstance(log, Mapping):
        return "", [], []
    client, raw = log.get("client"), log.get("events")
    if not isinstance(client, str) or not client or len(client) > 80 or not isinstance(raw, list):
        return "", [], ["a grading event log from the browser was malformed and was ignored"]
    done = applied.get(client, 0)
    events: dict[int, GradeEvent] = {}
    bad = 0
    for ev in raw[:MAX_EVENTS]:
        seq = ev.get("seq") if isinstance(ev, Mapping) else None
        key = ev.get("key") if isinstance(ev, Mapping) else None
        grade = ev.get("grade") if isinstance(ev, Mapping) else None
        ok_grade = grade is None or (isinstance(grade, int) and not isinstance(grade, bool) and 0 <= grade <= 3)
        if not isinstance(seq, int) or isinstance(seq, bool) or not isinstance(key, str) or not ok_grade:
            bad += 1
            continue
        if seq > done:
            events[seq] = GradeEvent(seq, key, grade)
    problems = [f"{bad} malformed grading event(s) from the browser were ignored"] if bad else []
    return client, [events[s] for s in sorted(events)], problems


def apply_log(log: object, rows: Mapping[str, tuple[str, str]], target: GradeTarget,
              applied: dict[str, int]) -> list[str]:
    """Store the log's new events in order; `applied` advances past each one stored. Returns problems to show.

    An event for a row no longer listed cannot be stored (it is reported and skipped); a store error stops here,
    leaving the rest unacknowledged, so the browser keeps them and the next run tries again.
    """
    client, events, problems = new_events(log, applied)
    if events and target.check is not None:
        try:
            target.check()
        except AccessDenied as exc:  # never allowed on this list: acknowledged, so the browser stops sending them
            applied[client] = events[-1].seq
            return [*problems, f"Grades are not saved: {exc}"]
    if target.store is None:
        return [*problems, f"Grades are not saved: {target.problem}"] if events else problems
    if target.annotator is None:
        why = target.problem or "fix the annotator name in the sidebar."
        return [*problems, f"Grades are not saved: {why}"] if events else problems
    for ev in events:
        where = rows.get(ev.key)
        if where is None:
            problems.append("A grade for an item that is no longer listed was not saved.")
        else:
            query, item = where
            try:
                if ev.grade is None:
                    target.store.delete_label(query, item, target.graph_version, annotator=target.annotator)
                else:
                    target.store.put_label(query, item, ev.grade, graph_version=target.graph_version,
                                           annotator=target.annotator, note=target.note)
            except RetrievalError as exc:
                problems.append(f"Grade not saved (it is kept in the browser and retried): {exc}")
                break
        applied[client] = ev.seq
    return problems


def _state(key: str) -> Mapping[str, Any]:
    value = st.session_state.get(key)
    return value if isinstance(value, Mapping) else {}


def _apply(key: str, rows: Mapping[str, tuple[str, str]], target: GradeTarget) -> bool:
    """Apply the component's pending log (its change callback, and again at render: idempotent by seq); True when
    it stored anything."""
    applied = st.session_state.setdefault(APPLIED, {})
    before = dict(applied)
    problems = apply_log(_state(key).get("log"), rows, target, applied)
    if problems:
        st.session_state[f"{key}:problems"] = [*st.session_state.get(f"{key}:problems", []), *problems]
    return applied != before


def apply_pending(rows: Sequence[GradeRow], key: str, target: GradeTarget) -> bool:
    """Store list `key`'s unacknowledged grades now, for a page that reads labels before it draws the list (the
    change callback normally has; this is idempotent). True when it stored anything."""
    return _apply(key, {r.key: (r.query, r.item_id) for r in rows}, target)


def selected_key(key: str) -> str | None:
    """The item picked (click or Enter) in list `key` as of this run: known before the list is drawn."""
    picked = _state(key).get("selected")
    return picked if isinstance(picked, str) else None


def shown_grades(rows: Sequence[GradeRow], target: GradeTarget, *, own_only: bool = False,
                 ) -> dict[tuple[str, str], Label]:
    """(query, item id) -> the label to show: the annotator's own, else (unless `own_only`: a blind queue must not
    show other annotators' grades) the resolved one (`shown_labels`)."""
    out: dict[tuple[str, str], Label] = {}
    if target.store is None:
        return out
    for query in dict.fromkeys(r.query for r in rows):
        if own_only:
            own = [] if target.annotator is None else target.store.get_labels(query, target.graph_version,
                                                                              target.annotator)
            out.update({(lb.query_text, lb.item_id): lb for lb in own})
            continue
        labels = target.store.get_labels(query, target.graph_version)
        if target.follow is not None:
            labels = target.follow(labels)
        for item, label in shown_labels(labels, target.annotator or "").items():
            out[label.query_text, item] = label
    return out


def _by(label: Label, annotator: str | None) -> tuple[str, bool]:
    if annotator is not None and label.annotator == annotator:
        return "", True
    if label.annotator in (CONSENSUS, ADJUDICATED):
        return label.annotator, False
    return label.annotator or "anonymous", False


def row_data(rows: Sequence[GradeRow], grades: Mapping[tuple[str, str], Label], annotator: str | None,
             ) -> list[dict[str, Any]]:
    """The rows as the component reads them (every string cleaned; the browser sets them with textContent)."""
    out = []
    for r in rows:
        label = grades.get((normalize_query(r.query), r.item_id))
        by, mine = _by(label, annotator) if label else ("", False)
        out.append({
            "key": r.key, "text": clean(r.text), "rank": clean(r.rank), "meta": clean(r.meta), "head": clean(r.head),
            "tags": [{"text": clean(t.text), "tone": t.tone} for t in r.tags],
            "scores": [[clean(n), clean(v)] for n, v in r.scores],
            "grade": label.grade if label else None, "by": clean(by), "mine": mine,
        })
    return out


def render_grader(
    rows: Sequence[GradeRow], *, key: str, target: GradeTarget, selectable: bool = False, start: int = 0,
    height: int = 560, empty: str = "No items.", own_only: bool = False,
) -> str | None:
    """The grading list (in container `st-key-<key>-box`); returns the key of the picked row (click or Enter).
    `start` is the row the cursor starts on; `own_only` shows only the annotator's own grades."""
    where = {r.key: (r.query, r.item_id) for r in rows}
    _apply(key, where, target)  # anything the change callback did not store yet
    for problem in st.session_state.pop(f"{key}:problems", []):
        st.error(md_literal(problem), icon=":material/error:")
    if target.annotator is None:
        why = md_literal(target.problem) if target.problem else "the annotator name in the sidebar is not valid."
        st.warning(f"Grading is off: {why}", icon=":material/edit_off:")
    log = _state(key).get("log")
    client = log.get("client") if isinstance(log, Mapping) else None
    applied = st.session_state.get(APPLIED, {})
    data = {
        "rows": row_data(rows, shown_grades(rows, target, own_only=own_only), target.annotator),
        "ack": {"client": client, "seq": applied.get(client, 0)} if isinstance(client, str) else None,
        "start": start, "selectable": selectable, "height": height, "empty": empty,
        "annotator": target.annotator or ("" if target.annotator is not None else "—"),
        "readonly": target.annotator is None, "selected": selected_key(key),
    }
    with st.container(key=key + "-box"):
        _GRADER(key=key, data=data, on_log_change=partial(_apply, key, where, target),
                on_selected_change=_ignore, height="content")
    picked = selected_key(key)
    return picked if picked in where else None


def _ignore() -> None:
    """A state needs a change callback to be kept; picking an item needs nothing more than the rerun."""
