"""TREC files: qrels (`query_id 0 item_id grade`) with a companion queries.tsv (`query_id<TAB>text`), and runs
(`query_id Q0 item_id rank score tag`); read whole and validated before anything is stored."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from retrieval.errors import IngestError, ValidationError, excerpt
from retrieval.evaluation.consensus import current_labels
from retrieval.evaluation.labels import Label, LabelStore, make_label, normalize_query, query_id, utc_now
from retrieval.items import opens_as_formula

QRELS_FILE = "qrels.txt"


QUERIES_FILE = "queries.tsv"


@contextmanager
def _text_out(target: Path | TextIO) -> Iterator[TextIO]:
    if isinstance(target, Path | str):
        path = Path(target)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8", newline="\n") as fh:
            yield fh
    else:
        yield target


def _token(value: str, what: str) -> str:
    """An id as TREC files hold it: exact, so one that would open as a spreadsheet formula is refused (imports
    refuse such ids already: ids_formula_free)."""
    if not value or any(ch.isspace() for ch in value):
        raise ValidationError(f"{what} {excerpt(value)} cannot be written to a TREC file: it is empty or contains "
                              "whitespace")
    if opens_as_formula(value):
        raise ValidationError(f"{what} {excerpt(value)} is not written to a TREC file: a spreadsheet would open it "
                              "as a formula")
    return value


FORMULA_ID = "would open as a formula in a spreadsheet (it starts with = + - @, a tab or a return); TREC files " \
             "keep ids exactly, so such an id is refused"


def sheet_cell(text: str) -> str:
    """A TSV cell a spreadsheet will not run: text that would open as a formula, after any leading apostrophes,
    gets one more apostrophe in front (`=1+1` -> `'=1+1`, `'=x` -> `''=x`); `unsheet_cell` removes it."""
    return "'" + text if opens_as_formula(text.lstrip("'")) else text


def unsheet_cell(text: str) -> str:
    """The inverse of `sheet_cell`: `unsheet_cell(sheet_cell(t)) == t` for every text."""
    return text[1:] if text.startswith("'") and opens_as_formula(text.lstrip("'")) else text


def export_qrels(
    labels: Iterable[Label],
    qrels: Path | TextIO,
    queries: Path | TextIO | None = None,
    ids: Mapping[str, str] | None = None,
) -> int:
    """Write `query_id 0 item_id grade` lines (and `query_id<TAB>text` lines); returns the label count.

    Labels are reduced by `current_labels` (one per query and item). `ids` maps query text to the id to
    write (a query set's); other queries get `query_id(text)`.
    """
    ids = ids or {}
    order = {text: n for n, text in enumerate(ids)}  # a set's queries in set order, then the others
    rows = sorted(current_labels(labels), key=lambda lb: (order.get(lb.query_text, len(order)),
                                                          ids.get(lb.query_text) or query_id(lb.query_text)))
    with _text_out(qrels) as fh:
        for lb in rows:
            fh.write(f"{ids.get(lb.query_text) or query_id(lb.query_text)} 0 {_token(lb.item_id, 'item id')} "
                     f"{lb.grade}\n")
    if queries is not None:
        with _text_out(queries) as fh:
            seen: dict[str, str] = {}
            for lb in rows:
                seen.setdefault(ids.get(lb.query_text) or query_id(lb.query_text), lb.query_text)
            for qid, text in seen.items():  # queries.tsv is opened in spreadsheets: no cell runs as a formula
                fh.write(f"{sheet_cell(_token(qid, 'query id'))}\t{sheet_cell(text)}\n")
    return len(rows)


def export_run(
    rankings: Mapping[str, Sequence[str]], out: Path | TextIO, tag: str, ids: Mapping[str, str] | None = None
) -> int:
    """Write a TREC run (`query_id Q0 item_id rank score tag`) from query text -> ranked item ids.

    score = N - rank + 1, so trec_eval (which sorts by score) keeps our order. `ids` as in `export_qrels`.
    Returns the line count.
    """
    _token(tag, "run tag")
    ids = ids or {}
    count = 0
    with _text_out(out) as fh:
        for query, items in sorted(rankings.items(), key=lambda kv: query_id(kv[0])):
            qid = ids.get(normalize_query(query)) or query_id(query)
            for rank, item in enumerate(items, start=1):
                fh.write(f"{qid} Q0 {_token(item, 'item id')} {rank} {len(items) - rank + 1} {tag}\n")
                count += 1
    return count


def file_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line without its line ending) for each line of a text file."""
    # Split on \n only, so line numbers match what an editor shows.
    for number, line in enumerate(text.split("\n"), start=1):
        yield number, line.rstrip("\r")


def tsv_query_rows(text: str, file: str) -> Iterator[tuple[int, str, str]]:
    """(line number, query id, raw text) of each `query_id<TAB>query text` line; blank and `#` lines skipped; the
    apostrophe `sheet_cell` puts before a would-be formula is removed again."""
    for number, line in file_lines(text):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if "\t" not in line:
            raise IngestError(file, number, "line", "expected `query_id<TAB>query text`")
        qid, raw = line.split("\t", 1)
        qid = unsheet_cell(qid.strip())
        if opens_as_formula(qid):
            raise IngestError(file, number, "query_id", f"{excerpt(qid)} {FORMULA_ID}")
        yield number, qid, unsheet_cell(raw)


def parse_queries(text: str, file: str) -> dict[str, str]:
    """`query_id<TAB>query text` lines (blank and `#` lines skipped) -> {query_id: normalised text}."""
    out: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for number, qid, raw in tsv_query_rows(text, file):
        query = normalize_query(raw)
        if not qid or any(ch.isspace() for ch in qid):
            raise IngestError(file, number, "query_id", f"must be one non-empty token, got {excerpt(qid)}")
        if not query:
            raise IngestError(file, number, "text", "query text is empty")
        if qid in out and out[qid] != query:
            raise IngestError(file, number, "query_id", f"{excerpt(qid)} already defined on line {first_line[qid]}")
        out[qid] = query
        first_line.setdefault(qid, number)
    return out


def parse_qrels(text: str, file: str, queries: Mapping[str, str]) -> list[tuple[str, str, int]]:
    """TREC qrels lines `query_id iteration item_id grade` -> [(query text, item id, grade)].

    Grades must be integers 0-3; every query id must be in `queries`; a (query, item) pair once.
    """
    out: list[tuple[str, str, int]] = []
    seen: dict[tuple[str, str], int] = {}
    for number, line in file_lines(text):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 4:
            raise IngestError(file, number, "line", f"expected 4 fields `query_id 0 item_id grade`, got {len(fields)}")
        qid, _iteration, item, grade_text = fields
        for column, value in (("query_id", qid), ("item_id", item)):
            if opens_as_formula(value):
                raise IngestError(file, number, column, f"{excerpt(value)} {FORMULA_ID}")
        try:
            grade = int(grade_text)
        except ValueError:
            raise IngestError(file, number, "grade", f"not an integer: {grade_text[:40]!r}") from None
        if not 0 <= grade <= 3:
            raise IngestError(file, number, "grade", f"must be 0-3, got {grade}")
        if qid not in queries:
            raise IngestError(file, number, "query_id", f"{qid[:40]!r} is not in the queries file or set")
        if (qid, item) in seen:
            first = seen[qid, item]
            raise IngestError(file, number, "item_id", f"{item[:40]!r} judged twice for {excerpt(qid)} (line {first})")
        seen[qid, item] = number
        out.append((queries[qid], item, grade))
    return out


def read_text_file(path: Path) -> str:
    """A UTF-8 file's text (BOM dropped); unreadable or undecodable files raise IngestError with the line."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise IngestError(str(path), 0, "file", f"cannot read: {exc.strerror or exc}") from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise IngestError(str(path), line, "encoding", "not valid UTF-8") from exc


def read_qrels(
    qrels_path: Path,
    queries_path: Path | None = None,
    *,
    queries: Mapping[str, str] | None = None,
    graph_version: str = "",
    annotator: str = "import",
) -> list[Label]:
    """Parse a qrels file into Labels; query ids resolve through `queries` (e.g. a stored query set) or else
    a queries file (default: `queries.tsv` beside the qrels)."""
    qrels_path = Path(qrels_path)
    if queries is None:
        queries_path = Path(queries_path) if queries_path else qrels_path.parent / QUERIES_FILE
        if not queries_path.is_file():
            raise IngestError(str(queries_path), 0, "file",
                              "no queries file (query_id<TAB>text); pass --queries FILE or --set NAME")
        queries = parse_queries(read_text_file(queries_path), str(queries_path))
    rows = parse_qrels(read_text_file(qrels_path), str(qrels_path), queries)
    stamp = utc_now()
    return [
        make_label(q, item, grade, graph_version=graph_version, annotator=annotator, updated_at=stamp)
        for q, item, grade in rows
    ]


def import_qrels(
    store: LabelStore,
    qrels_path: Path,
    queries_path: Path | None = None,
    *,
    queries: Mapping[str, str] | None = None,
    graph_version: str = "",
    annotator: str = "import",
) -> int:
    """Validate a whole qrels file first, then upsert its labels in one transaction; returns the count."""
    labels = read_qrels(qrels_path, queries_path, queries=queries, graph_version=graph_version, annotator=annotator)
    return store.put_labels(labels)
