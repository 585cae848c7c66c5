"""Limits that stop one user from starving the rest (issue 21, item 7): each a setting with a stated default and a
clear error naming its variable; no error quotes more than 200 characters of a bad value."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from retrieval.config import Settings
from retrieval.errors import ConfigError, IngestError, RetrievalError, ValidationError, excerpt
from retrieval.evaluation.querysets import parse_query_set
from retrieval.graph.catalog import check_name
from retrieval.ingest import IngestOptions
from retrieval.ingest.archive import safe_extract_zip
from retrieval.ingest.build import ingest
from retrieval.ingest.bundle import load_bundle
from retrieval.ingest.csvgraph import load_csv
from retrieval.ingest.graphml import load_graphml
from tests.conftest import DEMO_BUNDLE, ROOT

pytestmark = pytest.mark.integration
LIMITS = {"KG_MAX_UPLOAD_MB": ("max_upload_mb", 500), "KG_MAX_UNPACKED_MB": ("max_unpacked_mb", 8_192),
          "KG_MAX_IMPORT_ITEMS": ("max_import_items", 1_000_000), "KG_MAX_QUERY_SET": ("max_query_set", 10_000),
          "KG_MAX_NAME_CHARS": ("max_name_chars", 65_535)}


def test_each_limit_is_a_setting_with_its_stated_default() -> None:
    defaults = Settings.from_env(env={})
    for var, (field, default) in LIMITS.items():
        assert getattr(defaults, field) == default, var
        assert getattr(Settings.from_env(env={var: "7"}), field) == 7
        for bad in ("0", "-3", "lots"):
            with pytest.raises(ConfigError, match=var):
                Settings.from_env(env={var: bad})
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for var, (_, default) in LIMITS.items():  # the Settings table states each default
        assert f"| `{var}` | `{default}` |" in readme, var


def _zip(members: dict[str, bytes], method: int = zipfile.ZIP_STORED) -> io.BytesIO:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    buf.seek(0)
    return buf


def test_upload_and_unpacked_sizes(tmp_path: Path) -> None:
    small = Settings(max_upload_mb=1, max_unpacked_mb=2)
    big_upload = _zip({"bundle/chunks.jsonl": os.urandom(1_200_000)})  # 1.1 MB that does not compress
    with pytest.raises(ValidationError, match=r"the upload is 1\.1 MB; the limit is 1 MB \(KG_MAX_UPLOAD_MB\)"):
        safe_extract_zip(big_upload, tmp_path, small)
    bomb = _zip({"bundle/chunks.jsonl": b"0" * 3_000_000}, zipfile.ZIP_DEFLATED)  # 3 MB unpacked, a few kB packed
    assert len(bomb.getvalue()) < 100_000
    with pytest.raises(ValidationError, match=r"unpacks to 2\.9 MB; the limit is 2 MB \(KG_MAX_UNPACKED_MB\)"):
        safe_extract_zip(bomb, tmp_path, small)
    assert list(tmp_path.iterdir()) == []  # refused before anything is written
    assert safe_extract_zip(_zip({"bundle/chunks.jsonl": b"{}\n"}), tmp_path, small).name == "bundle"


def test_a_web_import_is_held_to_the_graph_size_limit_before_anything_is_built(tmp_path: Path) -> None:
    settings = Settings.from_env(env={"KG_MAX_IMPORT_ITEMS": "500"}, data_dir=tmp_path / "kg")
    with pytest.raises(ValidationError) as refused:  # the demo: 248 entities + 485 relations
        ingest(settings, DEMO_BUNDLE, name="demo", web=True, progress=False)
    assert str(refused.value) == ("the graph holds 248 entities and 485 relations; an import through the app takes "
                                  "at most 500 (KG_MAX_IMPORT_ITEMS); import it with `python -m retrieval ingest`")
    assert not (tmp_path / "kg" / "graphs").exists()


def test_a_query_set_is_held_to_its_size_limit_at_the_first_query_past_it() -> None:
    text = "".join(f"q{i}\tquestion number {i}\n" for i in range(1, 6))
    assert len(parse_query_set(text, "q.tsv", max_queries=5)) == 5
    with pytest.raises(IngestError) as refused:
        parse_query_set(text, "q.tsv", max_queries=3)
    assert str(refused.value) == "q.tsv:4: file: more than 3 queries; a query set holds at most 3 (KG_MAX_QUERY_SET)"


def test_names_types_and_attribute_names_are_capped_while_they_are_parsed(tmp_path: Path) -> None:
    options = IngestOptions(settings=Settings(max_name_chars=40))
    long = "N" * 41
    # bundle: an entity name, a type, a relation type, a property key
    cases = {"entities.jsonl": [("name", long), ("type", long)], "relations.jsonl": [("relation_type", long)]}
    for file, changes in cases.items():
        for field, value in changes:
            folder = tmp_path / f"bundle-{field}"
            shutil.copytree(DEMO_BUNDLE, folder)
            lines = (folder / file).read_text(encoding="utf-8").splitlines()
            record = json.loads(lines[1])
            record[field] = value
            lines[1] = json.dumps(record)
            (folder / file).write_text("\n".join(lines) + "\n", encoding="utf-8")
            with pytest.raises(IngestError) as refused:
                load_bundle(folder, options)
            assert (refused.value.line, refused.value.field) == (2, field)
            assert "41 characters; a name is at most 40 (KG_MAX_NAME_CHARS)" in refused.value.reason
    folder = tmp_path / "bundle-props"
    shutil.copytree(DEMO_BUNDLE, folder)
    lines = (folder / "entities.jsonl").read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[0])
    record["properties"] = {long: 1}
    lines[0] = json.dumps(record)
    (folder / "entities.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(IngestError, match=r"entities.jsonl:1: properties.N+: 41 characters"):
        load_bundle(folder, options)
    # CSV: a header field
    folder = tmp_path / "csv"
    shutil.copytree(ROOT / "tests" / "data" / "csv" / "movies", folder)
    nodes = (folder / "nodes.csv").read_text(encoding="utf-8").replace("tagline", "t" * 41, 1)
    (folder / "nodes.csv").write_text(nodes, encoding="utf-8")
    with pytest.raises(IngestError, match=r"nodes.csv:1: header: 41 characters; a name is at most 40"):
        load_csv(folder, options)
    # GraphML: a key's attr.name, an entity name
    folder = tmp_path / "graphml"
    folder.mkdir()
    source = (ROOT / "tests" / "data" / "graphml" / "gephi.graphml").read_text(encoding="utf-8")
    (folder / "g.graphml").write_text(source.replace('attr.name="label"', f'attr.name="{long}"', 1), encoding="utf-8")
    with pytest.raises(IngestError, match=r"key.attr.name: 41 characters; a name is at most 40"):
        load_graphml(folder, options)


def test_a_200_mb_graphml_attribute_name_fails_fast_with_a_short_message(tmp_path: Path) -> None:
    """The issue's case: before, 46 s and 1.7 GB, and the 200 MB name echoed whole in the error. The parse runs in
    a child process so that its peak memory (expat holds a tag in C memory) can be read."""
    folder = tmp_path / "big"
    folder.mkdir()
    with (folder / "big.graphml").open("w", encoding="utf-8") as fh:
        fh.write('<?xml version="1.0" encoding="UTF-8"?>\n<graphml xmlns="http://graphml.graphdrawing.org/xmlns">\n'
                 '<key id="d0" for="node" attr.type="string" attr.name="')
        block = "A" * (1 << 20)
        for _ in range(200):
            fh.write(block)
        fh.write('"/>\n<graph edgedefault="directed"><node id="n1"><data key="d0">x</data></node></graph>\n'
                 "</graphml>\n")
    code = ("import sys, time\nfrom retrieval.ingest.graphml import load_graphml\n"
            "start = time.perf_counter()\ntry:\n    load_graphml(sys.argv[1])\n"
            "except Exception as exc:\n    print(str(exc))\n"
            "print(time.perf_counter() - start)\n"
            # VmHWM: this process's own peak (getrusage's ru_maxrss keeps the forking parent's across exec)
            "print(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')))\n")
    out = subprocess.run([sys.executable, "-c", code, str(folder)], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, check=True).stdout.splitlines()
    message, seconds, peak_kb = out[0], float(out[1]), int(out[2])
    print(f"\n200 MB attr.name: refused in {seconds:.2f} s, peak RSS {peak_kb / 1024:.0f} MB, message "
          f"{len(message)} characters")
    assert message.endswith("big.graphml:3: xml: a tag, comment or other markup runs past 1,048,576 bytes")
    assert len(message) < 300
    assert peak_kb < 400 * 1024  # the child's whole peak (Python and the engine's imports): it was 1.7 GB


def test_no_error_quotes_more_than_200_characters_of_a_bad_value() -> None:
    value = "Z" * 1_000_000
    assert excerpt(value) == repr("Z" * 200) + "… (1,000,000 characters)"
    assert excerpt("short") == "'short'" and excerpt(5) == "5"
    error = IngestError("f.csv", 3, f"data[{value}]", f"bad {value}")  # a message built carelessly is still cut
    assert len(str(error)) < 1_500 and "(1,000,006 characters)" in str(error)
    assert len(str(RetrievalError(value))) < 2_100
    with pytest.raises(ValidationError) as refused:
        check_name(value)
    assert len(str(refused.value)) < 400
