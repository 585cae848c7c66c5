"""`python -m retrieval changes import` on hostile files, run as a user runs it, in a child process whose memory is
capped (issue 27.9): a 1 GiB line is refused after reading a bounded part of it, and a file of a million changesets
is refused at the import's limit while it streams, before the graph is opened; nothing is written either way."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from retrieval.curation.exchange import MAX_IMPORT_CHANGESETS, MAX_LINE_BYTES
from retrieval.curation.ops import Changeset, SetEntityDescription
from tests.conftest import ROOT
from tests.rss_cap import run_capped

pytestmark = pytest.mark.integration

CAP_MB = 700  # a normal import of one changeset peaks at 430 MB (MiniLM, Kuzu and Milvus Lite open)


def cli_env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KG_")}
    return {**env, "KG_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}


@pytest.fixture
def data_dir(demo_data_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "kg"
    shutil.copytree(demo_data_dir, copy, symlinks=True)
    return copy


def import_capped(data_dir: Path, file: Path) -> tuple[int, int | None, str]:
    run = run_capped("retrieval", "changes", "import", str(file), cap_mb=CAP_MB, timeout_s=600,
                     cwd=ROOT, env=cli_env(data_dir))
    assert not run.over_cap, run.stderr[-2000:]
    return run.returncode, run.peak_mb, run.stderr


def test_a_1_gib_line_is_refused_without_reading_it_whole(data_dir: Path, tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    with big.open("wb") as fh:
        fh.truncate(1 << 30)  # sparse: one 1 GiB line (of NUL bytes) that takes no disk
    code, peak, err = import_capped(data_dir, big)
    assert code == 2 and f"big.jsonl:1: line: longer than {MAX_LINE_BYTES:,} bytes" in err, err[-2000:]
    assert peak is not None and peak < CAP_MB
    assert not (data_dir / "curation").exists()  # nothing written


def test_a_million_changesets_are_refused_at_the_limit_as_the_file_streams(data_dir: Path, tmp_path: Path) -> None:
    line = Changeset(id=1, graph="demo", author="eve", state="applied", ops=(SetEntityDescription(
        entity_id="price-elasticity", description="again"),)).model_dump_json().encode() + b"\n"
    many = tmp_path / "many.jsonl"
    many.write_bytes(line * 1_000_000)
    code, peak, err = import_capped(data_dir, many)
    assert code == 2 and f"many.jsonl:{MAX_IMPORT_CHANGESETS + 1}: changeset: more than " \
        f"{MAX_IMPORT_CHANGESETS:,} changesets" in err, err[-2000:]
    assert peak is not None and peak < CAP_MB
    assert not (data_dir / "curation").exists()
