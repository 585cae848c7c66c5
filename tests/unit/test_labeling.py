"""Labeling workflow without a graph: the schema-1 -> 2 migration (and a crash inside it), the adjudication rule,
query sets, agreement statistics against hand-computed values, bootstrap intervals and the paired test."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from retrieval.errors import IngestError, NotFoundError, StoreError, ValidationError
from retrieval.evaluation.agreement import agreement
from retrieval.evaluation.consensus import consensus_grade, resolve_labels, shown_labels
from retrieval.evaluation.evaluate import bootstrap_ci, evaluate, paired_p_value
from retrieval.evaluation.labels import ADJUDICATED, CONSENSUS, SCHEMA_VERSION, LabelStore, make_label
from retrieval.evaluation.querysets import (
    MAX_QUERY_CHARS,
    get_query_set,
    import_queries,
    list_query_sets,
    parse_query_set,
)
from tests.data.hostile.make_bundle import accepted

ROOT = Path(__file__).resolve().parents[2]
# The label table as every labels.sqlite written before annotators were part of the key (user_version 0).
SCHEMA_1 = """
CREATE TABLE labels (
    query_text TEXT NOT NULL, item_id TEXT NOT NULL, graph_version TEXT NOT NULL,
    grade INTEGER NOT NULL CHECK (grade BETWEEN 0 AND 3), note TEXT NOT NULL DEFAULT '',
    annotator TEXT NOT NULL DEFAULT '', updated_at TEXT NOT NULL,
    PRIMARY KEY (query_text, item_id, graph_version)
) WITHOUT ROWID
"""


def schema_1_file(path: Path) -> list[tuple[object, ...]]:
    """A schema-1 database in WAL mode with rows of every kind (hostile texts, notes, old annotator values)."""
    rows = [(p.value, p.id, "v1", i % 4, p.value[:50], ["", "import", "bob"][i % 3], f"2025-01-01T00:00:{i:02d}")
            for i, p in enumerate(accepted()[:30]) if p.value.strip()]
    rows.append(("who wrote Hamlet?", "rel:1", "v0", 2, "", "", "2024-12-31T00:00:00"))
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(SCHEMA_1)
        conn.executemany("INSERT INTO labels (query_text, item_id, graph_version, grade, note, annotator, updated_at)"
                         " VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    conn.close()
    return rows


def all_rows(path: Path, table: str = "labels") -> set[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        got = conn.execute(f"SELECT query_text, item_id, graph_version, grade, note, annotator, updated_at "  # noqa: S608
                           f"FROM {table}").fetchall()
    conn.close()
    return set(got)


def test_schema_1_file_migrates_in_place_once_keeping_every_row(tmp_path: Path) -> None:
    path = tmp_path / "labels.sqlite"
    rows = schema_1_file(path)
    store = LabelStore(path)
    assert store.migrated == len(rows)
    assert all_rows(path) == set(rows)  # every field of every row, annotators as they were
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} == {
            "labels", "query_sets", "queries", "pools", "pool_items"}
    conn.close()
    store.put_label("who wrote Hamlet?", "rel:1", 3, graph_version="v0", annotator="ann")  # a second annotator
    assert sorted(lb.annotator for lb in store.get_labels("who wrote Hamlet?")) == ["", "ann"]
    store.close()
    again = LabelStore(path)
    assert again.migrated is None  # the second open does not migrate again
    assert len(again.all_labels()) == len(rows) + 1
    again.close()


# argv: database path. Opens the label store with a trace hook that SIGKILLs the process the moment the
# migration drops the old table, i.e. after the new table was filled and before the transaction commits.
CRASHER = """
import os, signal, sqlite3, sys
real = sqlite3.connect
def connect(*args, **kwargs):
    conn = real(*args, **kwargs)
    conn.set_trace_callback(lambda sql: os.kill(os.getpid(), signal.SIGKILL) if "DROP TABLE" in sql else None)
    return conn
sqlite3.connect = connect
from retrieval.evaluation.labels import LabelStore
LabelStore(sys.argv[1])
print("migrated without being killed")
"""


def test_a_crash_inside_the_migration_leaves_the_old_data_readable(tmp_path: Path) -> None:
    path = tmp_path / "labels.sqlite"
    rows = schema_1_file(path)
    proc = subprocess.run([sys.executable, "-c", CRASHER, str(path)], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    with sqlite3.connect(path) as conn:  # what an older KG Lens (or a person with sqlite3) sees
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
        assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} == {"labels"}
    conn.close()
    assert all_rows(path) == set(rows)
    store = LabelStore(path)  # the next open migrates from scratch
    assert store.migrated == len(rows) and all_rows(path) == set(rows)
    store.close()


def test_a_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "labels.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer"):
        LabelStore(path)


def test_annotator_names_are_checked() -> None:
    assert make_label("q", "i", 1, annotator="  Ann   Lee ").annotator == "Ann Lee"
    with pytest.raises(ValidationError, match="reserved"):
        make_label("q", "i", 1, annotator=CONSENSUS)
    with pytest.raises(ValidationError, match="limit"):
        make_label("q", "i", 1, annotator="x" * 81)


# --- adjudication rule ------------------------------------------------------------------------


@pytest.mark.parametrize(("grades", "strict", "ties"), [
    ([2], 2, 2), ([1, 1], 1, 1), ([0, 3], None, 0), ([3, 1, 2], 2, 2), ([3, 3, 0], 3, 3), ([0, 1, 2, 3], None, 1),
    ([2, 2, 3, 0], 2, 2), ([], None, None),
])
def test_consensus_is_the_median_and_even_splits_are_ties(grades: list[int], strict: int | None,
                                                          ties: int | None) -> None:
    assert consensus_grade(grades) == strict
    assert consensus_grade(grades, include_ties=True) == ties


def test_resolve_labels_adjudication_first_then_consensus() -> None:
    def lb(item: str, grade: int, who: str, version: str = "v1", at: str = "2025-01-01") -> object:
        return make_label("q", item, grade, annotator=who, graph_version=version, updated_at=at)

    labels = [
        lb("solo", 2, "ann"),
        lb("agree", 3, "ann"), lb("agree", 3, "bob"),
        lb("split", 0, "ann"), lb("split", 3, "bob"),
        lb("settled", 0, "ann"), lb("settled", 3, "bob"), lb("settled", 1, ADJUDICATED),
        lb("three", 1, "ann"), lb("three", 2, "bob"), lb("three", 3, "cy"),
        # ann changed her mind on a newer graph version: her latest label votes
        lb("moved", 0, "ann", "v0", "2024-01-01"), lb("moved", 2, "ann", "v1", "2025-02-01"), lb("moved", 2, "bob"),
    ]
    resolved, ties = resolve_labels(labels)  # type: ignore[arg-type]
    got = {r.item_id: (r.grade, r.annotator) for r in resolved}
    assert got == {"solo": (2, "ann"), "agree": (3, CONSENSUS), "settled": (1, ADJUDICATED),
                   "three": (2, CONSENSUS), "moved": (2, CONSENSUS)}
    assert [(t.item_id, t.grades) for t in ties] == [("split", {"ann": 0, "bob": 3})]
    with_ties = {r.item_id: r.grade for r in resolve_labels(labels, include_ties=True)[0]}  # type: ignore[arg-type]
    assert with_ties["split"] == 0
    assert resolve_labels(resolved)[0] == resolved  # idempotent: exports may resolve twice
    shown = shown_labels(labels, "bob")  # type: ignore[arg-type]
    assert (shown["split"].grade, shown["split"].annotator) == (3, "bob")  # bob sees his own grade
    assert shown["solo"].annotator == "ann"  # and the others' where he gave none


# --- query sets -------------------------------------------------------------------------------


def test_query_sets_from_tsv_and_jsonl_variants(tmp_path: Path) -> None:
    store = LabelStore(tmp_path / "labels.sqlite")
    (tmp_path / "q.tsv").write_text("# a comment\nq1\twho  wrote Hamlet?\n\nq2\tcapital of France\n")
    qs = import_queries(store, tmp_path / "q.tsv")
    assert qs.name == "q" and qs.texts() == {"q1": "who wrote Hamlet?", "q2": "capital of France"}
    jsonl = '{"id": "a", "query": "one"}\n{"_id": 7, "text": "two"}\n{"qid": "c", "question": "three"}\n'
    imported = import_queries(store, jsonl, "beir")
    assert [(q.query_id, q.text) for q in imported.queries] == [("a", "one"), ("7", "two"), ("c", "three")]
    assert [(s.name, n) for s, n in list_query_sets(store)] == [("beir", 3), ("q", 2)]
    assert get_query_set(store, "beir") == imported.model_copy(update={"source": "(text)"})
    with pytest.raises(NotFoundError, match="several query sets"):
        get_query_set(store)
    with pytest.raises(ValidationError, match="exists"):
        import_queries(store, jsonl, "beir")
    assert len(import_queries(store, "x\tonly one\n", "beir", replace=True).queries) == 1
    with pytest.raises(NotFoundError, match="no query set 'nope'"):
        get_query_set(store, "nope")


@pytest.mark.parametrize(("text", "where"), [
    ("q1\tfine\nq1\tagain\n", "f:2: query_id: duplicate id 'q1' (first on line 1)"),
    ("q1\tsame\nq2\t same \n", "f:2: text: same query as 'q1' on line 1"),
    ("q1\t   \n", "f:1: text: query text is empty"),
    ("q1 x\tok\n", "f:1: query_id: must be one non-empty token"),
    ("no tab here\n", "f:1: line: expected `query_id<TAB>query text`"),
    (f"q1\t{'a' * (MAX_QUERY_CHARS + 1)}\n", f"f:1: text: query is {MAX_QUERY_CHARS + 1} characters"),
    ('{"id": "a", "query": "ok"}\n{"id": "b"}\n', "f:2: query: missing: give one of query, text, question"),
    ('{"id": "a", "query": "ok"}\n{"query": "x"}\n', "f:2: id: missing"),
    ('{"id": "a", "query": "ok"}\n[1, 2]\n', "f:2: json: expected one JSON object per line"),
    ('{"id": "a", "query": ["x"]}\n', "f:1: query: must be a string"),
    ('{"id": "a", "query": "ok"}\n{"id": \n', "f:2: json: not valid JSON"),
    ("\n# only comments\n", "f:0: file: no queries found"),
])
def test_bad_query_files_name_file_line_and_field(text: str, where: str) -> None:
    with pytest.raises(IngestError) as err:
        parse_query_set(text, "f")
    assert str(err.value).startswith(where)


def test_a_refused_import_stores_nothing(tmp_path: Path) -> None:
    store = LabelStore(tmp_path / "labels.sqlite")
    (tmp_path / "bad.jsonl").write_bytes(b'{"id": "a", "query": "ok"}\n{"id": "b", "query": "\xff"}\n')
    with pytest.raises(IngestError, match="bad.jsonl:2: encoding"):
        import_queries(store, tmp_path / "bad.jsonl")
    assert list_query_sets(store) == []


# --- agreement --------------------------------------------------------------------------------


def test_kappa_alpha_and_disagreements_against_hand_computed_values() -> None:
    # ann 1 2 3 0, bob 1 2 2 0 on four items: p_o = 3/4, p_e = 1/4 -> kappa 2/3; quadratic weights:
    # 1 - (1/4) / 2 = 0.875 (sum of w * p_A p_B over the 0-3 grid is 2)
    grades = {"ann": [1, 2, 3, 0], "bob": [1, 2, 2, 0]}
    labels = [make_label("q", f"i{i}", g, annotator=who) for who, gs in grades.items() for i, g in enumerate(gs)]
    labels.append(make_label("q", "i2", 2, annotator=ADJUDICATED))
    labels.append(make_label("q", "solo", 3, annotator="ann"))
    report = agreement(labels, texts={("q", "i2"): "the third item"})
    assert report.annotators == ("ann", "bob") and report.items == 4
    pair = report.pairs[0]
    assert (pair.a, pair.b, pair.items, pair.observed) == ("ann", "bob", 4, 0.75)
    assert pair.kappa == pytest.approx(2 / 3) and pair.weighted_kappa == pytest.approx(0.875)
    assert [d.model_dump(exclude={"query_id"}) for d in report.disagreements] == [
        {"query": "q", "item_id": "i2", "text": "the third item", "grades": {"ann": 3, "bob": 2},
         "adjudicated": 2, "resolved": 2}]
    # ordinal alpha, by hand: values 0,3,3 / 0,3,0 -> D_o = 18/6, D_e = 162/30 -> 1 - 3/5.4 = 4/9
    three = [make_label("q", f"j{i}", g, annotator=who) for who, gs in {"a": [0, 3, 3], "b": [0, 3, 0]}.items()
             for i, g in enumerate(gs)]
    assert agreement(three).alpha_ordinal == pytest.approx(4 / 9)


def test_undefined_statistics_are_none_with_a_reason() -> None:
    same = [make_label("q", f"i{i}", 2, annotator=who) for who in ("ann", "bob") for i in range(3)]
    report = agreement(same)
    assert report.pairs[0].kappa is None and report.alpha_ordinal is None and report.disagreements == ()
    assert any("kappa 'ann'/'bob' is undefined" in n for n in report.notes)
    alone = agreement([make_label("q", "i", 1, annotator="ann")])
    assert alone.pairs == () and alone.items == 0 and "agreement needs two annotators" in alone.notes[0]


# --- statistics -------------------------------------------------------------------------------


def test_bootstrap_interval_and_paired_test() -> None:
    values = np.array([[0.1], [0.4], [0.5], [0.9], [1.0]])
    low, high = bootstrap_ci(values, 1000, seed=0)
    assert low[0] < values.mean() < high[0] and 0.1 <= low[0] and high[0] <= 1.0
    assert (low, high) == bootstrap_ci(values, 1000, seed=0)  # fixed seed, same interval
    assert bootstrap_ci(values[:1], 1000)[0][0] == bootstrap_ci(values[:1], 1000)[1][0] == 0.1
    # exact sign-flip test by hand: differences 2, -1, 2, 4 (sum 7); of the 16 sign patterns |sum| >= 7 for 4
    assert paired_p_value(np.array([3.0, 1, 2, 5]), np.array([1.0, 2, 0, 1])) == pytest.approx(4 / 16)
    assert paired_p_value(np.ones(4), np.zeros(4)) == pytest.approx(2 / 16)
    assert paired_p_value(np.ones(3), np.ones(3)) == 1.0
    # one query: its two sign flips give |d| both times, so p = 1 (scipy refuses a one-observation sample)
    assert paired_p_value(np.array([1.0]), np.array([0.0])) == 1.0


def test_compare_with_one_or_no_scored_query_reports_without_error_or_warning() -> None:
    runs = {"a": {"q": ["x", "y"]}, "b": {"q": ["y", "x"]}}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "mean of empty slice" would be one
        one = evaluate([make_label("q", "x", 2)], runs, compare=("a", "b"))
        none = evaluate([make_label("q", "x", 0)], runs, compare=("a", "b"))
    assert one.comparisons[0].n_queries == 1 and one.comparisons[0].p_value == 1.0
    assert none.comparisons[0].n_queries == 0 and none.comparisons[0].p_value == 1.0
    assert none.systems[0].metrics["RR"].ci_low == none.systems[0].metrics["RR"].ci_high == 0.0


def test_evaluate_reports_intervals_unjudged_items_comparisons_and_ties() -> None:
    labels = [make_label("q one", "a", 3, annotator="ann"), make_label("q one", "b", 0, annotator="ann"),
              make_label("q one", "c", 1, annotator="ann"), make_label("q one", "c", 3, annotator="bob"),
              make_label("q two", "x", 2, annotator="ann"), make_label("q three", "y", 1, annotator="ann")]
    runs = {"rerank:none": {"q one": ["b", "a", "z"], "q two": ["w", "x"], "q three": ["u", "y"]},
            "vector": {"q one": ["a", "c", "b"], "q two": ["x", "w"], "q three": ["y"]}}
    report = evaluate(labels, runs, ks=[2], baseline="rerank:none", compare=("vector", "rerank:none"))
    assert report.unresolved == 1 and any("split evenly" in w for w in report.warnings)
    systems = {s.system: s for s in report.systems}
    assert systems["rerank:none"].unjudged == {"2": 2} and systems["rerank:none"].ranked == {"2": 6}  # w, u
    assert systems["vector"].unjudged == {"2": 1} and systems["vector"].ranked == {"2": 5}  # w ('c' is judged: a tie)
    for s in report.systems:
        for m in s.metrics.values():
            assert m.ci_low <= m.value <= m.ci_high
    rr = next(c for c in report.comparisons if c.measure == "RR")
    assert (rr.mean_a, rr.mean_b) == (pytest.approx(1.0), pytest.approx(1.5 / 3))  # 1 1 1 vs 1/2 1/2 1/2
    assert rr.p_value == pytest.approx(2 / 8) and rr.delta == pytest.approx(0.5)  # exact: 2 of 8 flips
    tied = evaluate(labels, runs, ks=[2], baseline="rerank:none", include_ties=True)
    assert tied.unresolved == 1 and any("lower grade" in w for w in tied.warnings)
    with pytest.raises(ValidationError, match="no system graph"):
        evaluate(labels, runs, compare=("graph", "vector"))
    assert json.loads(report.model_dump_json())["systems"][0]["metrics"]["nDCG@2"]["ci_high"] >= 0
