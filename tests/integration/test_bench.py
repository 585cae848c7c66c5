"""`python -m retrieval bench --modes ...` on a copy of the demo graph (real Kuzu, Milvus Lite, MiniLM)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from retrieval.cli.search import register
from retrieval.search.modes import MODES

pytestmark = pytest.mark.integration


def _bench(*args: str) -> tuple[int, str, str]:
    app = typer.Typer()
    register(app)
    res = CliRunner().invoke(app, ["bench", *args])
    return res.exit_code, res.stdout, res.stderr


def test_bench_reports_p50_p95_of_every_mode(demo_data_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "kg"  # Milvus Lite: one opener per database file, so bench gets its own copy
    shutil.copytree(demo_data_dir, copy, symlinks=True)
    code, out, err = _bench("--data-dir", str(copy), "--modes", ",".join(MODES), "--limit", "2", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["graph"] == "demo" and report["queries"] == 2
    assert report["query_set"].startswith("the demo questions")
    assert [m["mode"] for m in report["modes"]] == list(MODES)
    for m in report["modes"]:
        assert 0 < m["p50_ms"] <= m["p95_ms"], m
        assert m["n"] == 2 and m["warm_up_s"] > 0 and m["empty_results"] == 0, m
    stages = {s["stage"]: s for s in report["stages"]}
    assert {"decompose", "seeds", "ppr", "verbalize", "rerank", "total"} <= set(stages)
    assert all(s["n"] == 2 and s["p50_ms"] <= s["p95_ms"] for s in stages.values())

    code, out, err = _bench("--data-dir", str(copy), "--modes", "vector,hybrid", "--limit", "1")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("graph demo version ") and "1 queries" in lines[0]
    assert [ln.split()[0] for ln in lines[2:]] == ["vector", "hybrid"]  # no kg: no stage table

    code, _, err = _bench("--data-dir", str(copy), "--modes", "vector,nope")
    assert code == 2 and "unknown mode(s) nope" in err
