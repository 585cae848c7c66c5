"""Label store on real SQLite files: upserts, durability, concurrent writers, TREC qrels in and out."""

from __future__ import annotations

import io
import multiprocessing as mp
import tempfile
import threading
from pathlib import Path

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from retrieval.cli.labels import register
from retrieval.errors import IngestError, ValidationError
from retrieval.evaluation.consensus import current_labels
from retrieval.evaluation.labels import LabelStore, make_label, query_id
from retrieval.evaluation.trec import export_qrels, export_run, import_qrels, parse_qrels, parse_queries, read_qrels


@pytest.fixture
def store(tmp_path: Path) -> LabelStore:
    return LabelStore.in_data_dir(tmp_path / "kg")


def test_upsert_keeps_one_current_grade_per_key_and_annotator(store: LabelStore) -> None:
    first = store.put_label("who  wrote\tHamlet?", "fact-1", 1, graph_version="v1", note="meh", annotator="ann")
    assert first.query_text == "who wrote Hamlet?"
    second = store.put_label("who wrote Hamlet?", "fact-1", 2, graph_version="v1", annotator=" ann ")
    store.put_label("who wrote Hamlet?", "fact-1", 3, graph_version="v1", annotator="bob")
    store.put_label("who wrote Hamlet?", "fact-1", 0, graph_version="v2")
    store.put_label("who wrote Hamlet?", "fact-2", 2, graph_version="v1")
    got = store.get_labels("who wrote Hamlet?", graph_version="v1")
    rows = [(lb.item_id, lb.grade, lb.annotator, lb.note) for lb in got]
    assert rows == [("fact-1", 2, "ann", ""), ("fact-1", 3, "bob", ""), ("fact-2", 2, "", "")]
    assert got[0].updated_at == second.updated_at > first.updated_at
    assert [lb.grade for lb in store.get_labels("who wrote Hamlet?", "v1", annotator="bob")] == [3]
    assert len(store.get_labels("who wrote Hamlet?")) == 4
    assert len(store.all_labels("v2")) == 1 and len(store.all_labels(annotator="ann")) == 1
    assert store.annotators() == ["", "ann", "bob"]
    assert store.delete_label("who wrote Hamlet?", "fact-1", "v1", annotator="bob") is True
    assert store.delete_label("who wrote Hamlet?", "fact-1", "v1", annotator="bob") is False
    assert store.delete_label("who wrote Hamlet?", "fact-1", "v2") is True  # None: every annotator's label
    assert len(store.all_labels()) == 2


@pytest.mark.parametrize(("query", "item", "grade", "msg"),
                         [("q", "i", 4, "grade"), ("q", "i", -1, "grade"), ("q", "i", True, "grade"),
                          ("q", "i", 2.0, "grade"), ("  ", "i", 1, "query"), ("q", " ", 1, "item")])
def test_invalid_labels_are_rejected(store: LabelStore, query: str, item: str, grade: int, msg: str) -> None:
    with pytest.raises(ValidationError, match=msg):
        store.put_label(query, item, grade)
    assert store.all_labels() == []


def test_labels_survive_reopen_and_the_file_is_wal(tmp_path: Path) -> None:
    store = LabelStore.in_data_dir(tmp_path)
    store.put_label("q", "a", 2, graph_version="v", note="kept")
    store.close()
    again = LabelStore(tmp_path / "labels.sqlite")
    assert [(lb.item_id, lb.grade, lb.note) for lb in again.all_labels()] == [("a", 2, "kept")]
    import sqlite3

    with sqlite3.connect(tmp_path / "labels.sqlite") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _process_writer(path: str, writer: int, n: int) -> None:
    store = LabelStore(Path(path))
    for i in range(n):
        # keys overlap between writers on purpose: the same (query, item) is written by several of them
        store.put_label(f"query {i % 5}", f"item-{writer}-{i}", (writer + i) % 4, graph_version="v1",
                        annotator=f"w{writer}")
        if i % 100 == 0:
            store.put_label("shared query", "shared-item", writer % 4, graph_version="v1", annotator=f"w{writer}")


@pytest.mark.slow
def test_eight_processes_and_threads_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    path = tmp_path / "labels.sqlite"
    shared = LabelStore(path)
    ctx = mp.get_context("fork")  # children only touch sqlite; fork avoids 8 cold interpreter starts
    procs = [ctx.Process(target=_process_writer, args=(str(path), w, 500)) for w in range(8)]
    for p in procs:
        p.start()
    # meanwhile threads of this process write through one shared store object
    threads = [threading.Thread(target=lambda t=t: [shared.put_label("thread query", f"t{t}-{i}", 1, graph_version="v1")
                                                     for i in range(100)]) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * 8
    labels = LabelStore(path).all_labels()
    keys = [(lb.query_text, lb.item_id, lb.graph_version, lb.annotator) for lb in labels]
    assert len(keys) == len(set(keys)) == 8 * 500 + 4 * 100 + 8  # the shared item: one label per writer
    by_key = {(lb.query_text, lb.item_id): lb for lb in labels if lb.item_id != "shared-item"}
    for w in range(8):
        for i in range(500):
            lb = by_key[f"query {i % 5}", f"item-{w}-{i}"]
            assert (lb.grade, lb.annotator) == ((w + i) % 4, f"w{w}")
    assert all(by_key["thread query", f"t{t}-{i}"].grade == 1 for t in range(4) for i in range(100))


def test_qrels_round_trip(store: LabelStore, tmp_path: Path) -> None:
    store.put_label("who wrote Hamlet?", "fact:1", 3, graph_version="v1")
    store.put_label("who wrote Hamlet?", "fact:2", 0, graph_version="v1")
    store.put_label("capital of France", "chunk-9", 2, graph_version="v1")
    store.put_label("capital of France", "chunk-9", 1, graph_version="v0")  # older version: not exported
    labels = current_labels(store.all_labels(), graph_version="v1")
    assert export_qrels(labels, tmp_path / "out" / "qrels.txt", tmp_path / "out" / "queries.tsv") == 3
    qrels = (tmp_path / "out" / "qrels.txt").read_text()
    assert f"{query_id('who wrote Hamlet?')} 0 fact:1 3\n" in qrels
    assert f"{query_id('capital of France')}\tcapital of France\n" in (tmp_path / "out" / "queries.tsv").read_text()
    other = LabelStore(tmp_path / "other.sqlite")
    assert import_qrels(other, tmp_path / "out" / "qrels.txt", graph_version="v9") == 3  # queries.tsv found beside
    assert {(lb.query_text, lb.item_id, lb.grade) for lb in other.all_labels()} == {
        (lb.query_text, lb.item_id, lb.grade) for lb in labels}
    assert {lb.graph_version for lb in other.all_labels()} == {"v9"}


def test_current_labels_takes_the_latest_version() -> None:
    old = make_label("q", "a", 1, graph_version="v1", updated_at="2024-01-01T00:00:00")
    new = make_label("q", "a", 3, graph_version="v2", updated_at="2025-01-01T00:00:00")
    assert current_labels([new, old]) == [new]
    assert current_labels([new, old], graph_version="v1") == [old]


def test_export_run_and_whitespace_ids() -> None:
    buf = io.StringIO()
    assert export_run({"q one": ["a", "b"], "q two": ["c"]}, buf, "mmr") == 3
    lines = buf.getvalue().splitlines()
    assert f"{query_id('q one')} Q0 a 1 2 mmr" in lines and f"{query_id('q one')} Q0 b 2 1 mmr" in lines
    with pytest.raises(ValidationError, match="whitespace"):
        export_run({"q": ["has space"]}, io.StringIO(), "x")
    with pytest.raises(ValidationError, match="whitespace"):
        export_qrels([make_label("q", "has space", 1)], io.StringIO())


QUERIES = "q1\twho wrote Hamlet?\nq2\tcapital  of France\n"


@pytest.mark.parametrize(
    ("qrels", "line", "field"),
    [("q1 0 a 1\nq1 0 b\n", 2, "line"),
     ("q1 0 a 1\n\n# comment\nq1 0 b x\n", 4, "grade"),
     ("q1 0 a 4\n", 1, "grade"),
     ("q1 0 a -1\n", 1, "grade"),
     ("q3 0 a 1\n", 1, "query_id"),
     ("q1 0 a 1\nq2 0 a 1\nq1 0 a 2\n", 3, "item_id"),
     ("q1 0 a 1 extra\n", 1, "line")],
)
def test_malformed_qrels_lines_are_reported_with_line_numbers(qrels: str, line: int, field: str) -> None:
    with pytest.raises(IngestError) as err:
        parse_qrels(qrels, "qrels.txt", parse_queries(QUERIES, "queries.tsv"))
    assert (err.value.line, err.value.field) == (line, field)
    assert str(err.value).startswith(f"qrels.txt:{line}: {field}: ")


@pytest.mark.parametrize(("queries", "line", "field"),
                         [("q1 no tab\n", 1, "line"), ("\n q1 x\tok\n", 2, "query_id"), ("q1\t   \n", 1, "text"),
                          ("q1\ta\nq1\tb\n", 2, "query_id")])
def test_malformed_queries_lines(queries: str, line: int, field: str) -> None:
    with pytest.raises(IngestError) as err:
        parse_queries(queries, "queries.tsv")
    assert (err.value.line, err.value.field) == (line, field)


def test_import_is_all_or_nothing_and_checks_files(store: LabelStore, tmp_path: Path) -> None:
    (tmp_path / "queries.tsv").write_text(QUERIES)
    (tmp_path / "qrels.txt").write_text("q1 0 a 1\nq2 0 b 7\n")
    with pytest.raises(IngestError, match="qrels.txt:2: grade"):
        import_qrels(store, tmp_path / "qrels.txt")
    assert store.all_labels() == []
    (tmp_path / "bad.txt").write_bytes(b"q1 0 a 1\nq1 0 \xff 2\n")
    with pytest.raises(IngestError, match="bad.txt:2: encoding"):
        read_qrels(tmp_path / "bad.txt", tmp_path / "queries.tsv")
    with pytest.raises(IngestError, match="no queries file"):
        read_qrels(tmp_path / "qrels.txt", tmp_path / "missing.tsv")
    (tmp_path / "good.txt").write_text("\ufeffq1 0 a 1\r\nq2 Q0 b 3\r\n")
    assert [(lb.query_text, lb.item_id, lb.grade) for lb in read_qrels(tmp_path / "good.txt")] == [
        ("who wrote Hamlet?", "a", 1), ("capital of France", "b", 3)]


LINE = st.one_of(
    st.text(max_size=40),
    st.builds(lambda q, i, g: f"{q} 0 {i} {g}", st.sampled_from(["q1", "q2", "q9"]), st.text(min_size=1, max_size=5),
              st.one_of(st.integers(-2, 5).map(str), st.text(max_size=3))),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(qrels=st.lists(LINE, max_size=8).map("\n".join), queries=st.one_of(st.just(QUERIES), st.text(max_size=60)),
       raw=st.binary(max_size=40))
def test_import_never_fails_with_anything_but_a_clear_error(qrels: str, queries: str, raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "queries.tsv").write_text(queries, encoding="utf-8", errors="surrogatepass")
        for name, data in (("a.txt", qrels.encode("utf-8", "surrogatepass")), ("b.txt", raw)):
            (Path(tmp) / name).write_bytes(data)
            try:
                labels = read_qrels(Path(tmp) / name)
            except IngestError as exc:
                assert str(exc).startswith(str(Path(tmp)))
            else:
                assert all(0 <= lb.grade <= 3 and lb.item_id and lb.query_text for lb in labels)


def test_cli_import_and_export(tmp_path: Path) -> None:
    app = typer.Typer()
    register(app)
    runner = CliRunner()
    (tmp_path / "queries.tsv").write_text(QUERIES)
    (tmp_path / "qrels.txt").write_text("q1 0 a 1\nq2 0 b 3\n")
    data = ["--data-dir", str(tmp_path / "kg")]
    res = runner.invoke(app, ["labels", "import", str(tmp_path / "qrels.txt"), "--graph-version", "v1", *data])
    assert res.exit_code == 0, res.output
    assert "imported 2 labels" in res.output
    res = runner.invoke(app, ["labels", "export", "--format", "qrels", "--out", str(tmp_path / "exp"), *data])
    assert res.exit_code == 0, res.output
    assert sorted((tmp_path / "exp" / "qrels.txt").read_text().splitlines()) == sorted(
        [f"{query_id('who wrote Hamlet?')} 0 a 1", f"{query_id('capital of France')} 0 b 3"])
    (tmp_path / "broken.txt").write_text("q1 0 a 1\nq1 0 b nine\n")
    res = runner.invoke(app, ["labels", "import", str(tmp_path / "broken.txt"), "--queries",
                              str(tmp_path / "queries.tsv"), *data])
    assert res.exit_code == 2 and "broken.txt:2: grade" in res.output
    res = runner.invoke(app, ["labels", "export", "--format", "csv", *data])
    assert res.exit_code == 2 and "only 'qrels'" in res.output
