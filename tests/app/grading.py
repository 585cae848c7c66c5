"""Reading and driving grading lists (components.grader) in AppTest: the component's data as the browser gets it,
and a grade log as the browser would send it."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

from streamlit.testing.v1 import AppTest


def page_stores() -> dict[str, Callable[[], Any]]:
    """The openers of the label store and Graph Memory that a page hands a result view: the app's own, for the
    data dir of this run's environment."""
    import app_state

    cfg = app_state.settings()
    return {"labels": partial(app_state.label_store, cfg), "memory": partial(app_state.memory_store, cfg)}


def grader_keys(at: AppTest) -> list[str]:
    """The keys of every grading list on the page, in page order."""
    return [el.proto.id.split("-", 2)[-1] for el in at.get("bidi_component")
            if el.proto.component_name == "kglens_grader"]


def grader_data(at: AppTest, prefix: str) -> dict[str, Any]:
    """The data of the first grading list whose key starts with `prefix`."""
    for el in at.get("bidi_component"):
        key = el.proto.id.split("-", 2)[-1]
        if el.proto.component_name == "kglens_grader" and key.startswith(prefix):
            data: dict[str, Any] = json.loads(el.proto.json)
            data["key"] = key
            return data
    raise AssertionError(f"no grading list {prefix!r}; lists: {grader_keys(at)}")


def send_grades(at: AppTest, key: str, events: list[tuple[int, str, int | None]], client: str = "") -> None:
    """Set the list's state as the browser does: the log of every (seq, row key, grade) not acknowledged yet, from
    one mounted list (client ids are random per mount in the browser; here one per list unless given)."""
    at.session_state[key] = {"log": {"client": client or f"client-{key}", "events": [{"seq": s, "key": k, "grade": g}
                                                                   for s, k, g in events]}}


def tags(row: dict[str, Any]) -> list[str]:
    return [t["text"] for t in row["tags"]]


def scores(row: dict[str, Any]) -> dict[str, str]:
    return {name: value for name, value in row["scores"]}
