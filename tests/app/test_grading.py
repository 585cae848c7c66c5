"""The grading list's event log (components.grader) against a real SQLite label store: every grade once, in order,
nothing lost on a coalesced or failed run; and the annotator name's rules."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from components.annotator import annotator_error
from components.grader import ASSETS, GradeTarget, apply_log, new_events
from retrieval.evaluation.labels import LabelStore

ROWS = {"r1": ("what  is a brand?", "chunk:c1"), "r2": ("what is a brand?", "rel:2"), "r3": ("other q", "path:3")}


def log(*events: tuple[int, str, int | None], client: str = "tab-1") -> dict[str, object]:
    return {"client": client, "events": [{"seq": s, "key": k, "grade": g} for s, k, g in events]}


def grades(store: LabelStore, annotator: str = "ana") -> dict[str, int]:
    return {lb.item_id: lb.grade for lb in store.all_labels("v1", annotator=annotator)}


def test_events_are_stored_once_in_sequence_order_even_when_runs_coalesce(tmp_path: Path) -> None:
    store = LabelStore.in_data_dir(tmp_path)
    target = GradeTarget(store, "v1", "ana")
    applied: dict[str, int] = {}
    # a run sees the first two grades; the next run sees the whole pending log (nothing was acknowledged yet)
    assert apply_log(log((1, "r1", 3), (2, "r2", 1)), ROWS, target, applied) == []
    assert applied == {"tab-1": 2} and grades(store) == {"chunk:c1": 3, "rel:2": 1}
    coalesced = log((1, "r1", 3), (2, "r2", 1), (4, "r1", 0), (3, "r2", 2), (5, "r3", 2))  # out of order on purpose
    assert apply_log(coalesced, ROWS, target, applied) == []
    assert applied == {"tab-1": 5} and grades(store) == {"chunk:c1": 0, "rel:2": 2, "path:3": 2}
    labels = store.get_labels("what is a brand?", "v1")  # whitespace-collapsed query, one label per item
    assert sorted(lb.item_id for lb in labels) == ["chunk:c1", "rel:2"]
    # replaying an old log (e.g. after a reconnect) changes nothing: seq 1 is below what was applied
    store.put_label(*ROWS["r1"], 1, graph_version="v1", annotator="ana")
    assert apply_log(log((1, "r1", 3)), ROWS, target, applied) == [] and grades(store)["chunk:c1"] == 1
    # another tab (another client id) has its own sequence
    assert apply_log(log((1, "r3", 1), client="tab-2"), ROWS, target, applied) == []
    assert applied == {"tab-1": 5, "tab-2": 1} and grades(store)["path:3"] == 1


def test_undo_of_a_first_grade_removes_only_the_annotators_own_label(tmp_path: Path) -> None:
    store = LabelStore.in_data_dir(tmp_path)
    store.put_label(*ROWS["r1"], 2, graph_version="v1", annotator="bob")
    applied: dict[str, int] = {}
    apply_log(log((1, "r1", 3), (2, "r1", None)), ROWS, GradeTarget(store, "v1", "ana"), applied)
    assert grades(store) == {} and grades(store, "bob") == {"chunk:c1": 2}


def test_a_failed_write_stays_unacknowledged_and_is_stored_on_the_next_run(tmp_path: Path) -> None:
    path = tmp_path / "labels.sqlite"
    LabelStore(path).close()
    impatient = LabelStore(path, busy_timeout_ms=50, retries=0)
    target = GradeTarget(impatient, "v1", "ana")
    applied: dict[str, int] = {}
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another writer holds the database
    problems = apply_log(log((1, "r1", 3), (2, "r2", 1)), ROWS, target, applied)
    assert applied == {} and len(problems) == 1 and "kept in the browser and retried" in problems[0]
    holder.execute("ROLLBACK")
    holder.close()
    assert apply_log(log((1, "r1", 3), (2, "r2", 1)), ROWS, target, applied) == []
    assert applied == {"tab-1": 2} and grades(impatient) == {"chunk:c1": 3, "rel:2": 1}


def test_bad_logs_unknown_rows_and_a_read_only_list_store_nothing(tmp_path: Path) -> None:
    store = LabelStore.in_data_dir(tmp_path)
    applied: dict[str, int] = {}
    target = GradeTarget(store, "v1", "ana")
    assert new_events("junk", {}) == ("", [], [])
    assert new_events({"client": 7, "events": []}, {})[2] == ["a grading event log from the browser was malformed "
                                                               "and was ignored"]
    bad = {"client": "c", "events": [{"seq": 1, "key": "r1", "grade": 9}, {"seq": True, "key": "r1", "grade": 1},
                                     {"seq": 2, "key": "r1", "grade": "3"}, "x", {"seq": 3, "key": "gone", "grade": 1}]}
    problems = apply_log(bad, ROWS, target, applied)
    assert problems == ["4 malformed grading event(s) from the browser were ignored",
                        "A grade for an item that is no longer listed was not saved."]
    assert grades(store) == {} and applied == {"c": 3}  # the unknown row is reported once, not retried forever
    refused = apply_log(log((1, "r1", 2)), ROWS, GradeTarget(store, "v1", None), {})
    assert refused == ["Grades are not saved: fix the annotator name in the sidebar."] and grades(store) == {}


def test_annotator_names_reserved_or_too_long_are_refused() -> None:
    assert annotator_error("  ana   lee ") is None and annotator_error("") is None
    assert "reserved" in (annotator_error("consensus") or "") and "reserved" in (annotator_error("adjudicated") or "")
    assert "limit is 80" in (annotator_error("x" * 81) or "")


@pytest.mark.parametrize("sink", ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("])
def test_the_component_sets_data_only_as_text(sink: str) -> None:
    assert sink not in (ASSETS / "grader.js").read_text(encoding="utf-8")
