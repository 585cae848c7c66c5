"""Property tests: qrels import. Arbitrary text or bytes as qrels/queries files never fail with anything but
an IngestError naming the file; labels exported as qrels + queries.tsv import back unchanged (real SQLite)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.errors import IngestError, ValidationError
from retrieval.evaluation.consensus import current_labels
from retrieval.evaluation.labels import LabelStore, make_label, normalize_query, query_id
from retrieval.evaluation.trec import export_qrels, import_qrels, parse_qrels, parse_queries
from retrieval.items import opens_as_formula

TEXT = st.text(max_size=60)  # any code point but surrogates (a file on disk holds none)
# an item id a TREC file can hold: one token that no spreadsheet opens as a formula (test_a_formula_item_id_...)
ITEM = st.text(min_size=1, max_size=30).filter(lambda s: not any(c.isspace() for c in s) and not opens_as_formula(s))
QUERY = st.text(min_size=1, max_size=80).filter(lambda s: normalize_query(s) != "")
GRADE = st.integers(0, 3)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("qrels-props")


@settings(max_examples=300, deadline=None)
@given(qrels=TEXT, queries=TEXT)
def test_parsing_any_text_answers_or_names_the_line(qrels: str, queries: str) -> None:
    try:
        known = parse_queries(queries, "queries.tsv")
    except IngestError as exc:
        assert str(exc).startswith("queries.tsv:") and exc.line >= 1
        known = {}
    try:
        rows = parse_qrels(qrels, "qrels.txt", known)
    except IngestError as exc:
        assert str(exc).startswith(f"qrels.txt:{exc.line}: {exc.field}: ") and exc.line >= 1
        return
    assert all(q in known.values() and item and 0 <= g <= 3 for q, item, g in rows)


@settings(max_examples=150, deadline=None)
@given(qrels=st.binary(max_size=80) | TEXT.map(lambda t: t.encode("utf-8")), queries=st.binary(max_size=80))
def test_importing_any_bytes_changes_nothing_or_everything(base: Path, qrels: bytes, queries: bytes) -> None:
    folder = Path(tempfile.mkdtemp(dir=base))
    (folder / "qrels.txt").write_bytes(qrels)
    (folder / "queries.tsv").write_bytes(queries)
    store = LabelStore(folder / "labels.sqlite")
    try:
        count = import_qrels(store, folder / "qrels.txt")
    except IngestError as exc:
        assert str(exc).startswith(str(folder))
        assert store.all_labels() == []  # all or nothing
    else:
        assert len(store.all_labels()) == count
    finally:
        store.close()


@settings(max_examples=120, deadline=None)
@given(rows=st.lists(st.tuples(QUERY, ITEM, GRADE), min_size=1, max_size=8, unique_by=lambda r: (
    normalize_query(r[0]), r[1])))
def test_exported_labels_import_back_unchanged(base: Path, rows: list[tuple[str, str, int]]) -> None:
    labels = [make_label(q, item, grade, graph_version="v1") for q, item, grade in rows]
    folder = Path(tempfile.mkdtemp(dir=base))
    written = export_qrels(labels, folder / "qrels.txt", folder / "queries.tsv")
    assert written == len(labels)
    store = LabelStore(folder / "labels.sqlite")
    try:
        assert import_qrels(store, folder / "qrels.txt", graph_version="v1") == len(labels)
        back = store.all_labels("v1")
    finally:
        store.close()
    assert sorted((lb.query_text, lb.item_id, lb.grade) for lb in back) == sorted(
        (lb.query_text, lb.item_id, lb.grade) for lb in current_labels(labels))
    assert {query_id(lb.query_text) for lb in back} == {query_id(q) for q, _, _ in rows}


@settings(max_examples=100, deadline=None)
@given(item=st.sampled_from("=@+-").flatmap(lambda first: st.text(min_size=1, max_size=20).map(
    lambda rest: first + rest)).filter(lambda s: not any(c.isspace() for c in s) and opens_as_formula(s)))
def test_a_formula_item_id_is_refused_at_export_and_at_import(base: Path, item: str) -> None:
    label = make_label("a question", item, 2)
    with pytest.raises(ValidationError, match="a spreadsheet would open it as a formula"):
        export_qrels([label], Path(tempfile.mkdtemp(dir=base)) / "qrels.txt")
    with pytest.raises(IngestError, match="qrels.txt:1: item_id: .*would open as a formula"):
        parse_qrels(f"q1 0 {item} 2\n", "qrels.txt", {"q1": "a question"})


@settings(max_examples=100, deadline=None)
@given(item=st.text(min_size=1, max_size=20).filter(lambda s: any(c.isspace() for c in s.strip())))
def test_an_item_id_qrels_cannot_hold_is_refused_at_export(base: Path, item: str) -> None:
    label = make_label("a question", item, 2)
    with pytest.raises(ValidationError, match="cannot be written to a TREC file"):
        export_qrels([label], Path(tempfile.mkdtemp(dir=base)) / "qrels.txt")
