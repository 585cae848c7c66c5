"""`bench --scale` end to end on a tiny synthetic graph, both back-end pairs (the servers started by scripts/),
and the committed report: docs/bench-scale.json carries the issue's keys and the README shows its tables."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from bench.scale import PAIRS, bench_queries, ensure_bundle, readme_tables, run_scale, shape_of
from retrieval.cli import search as search_cli
from retrieval.errors import ValidationError
from tests.conftest import ROOT

pytestmark = [pytest.mark.server, pytest.mark.integration]

REPORT = ROOT / "docs" / "bench-scale.json"


def test_shapes_follow_the_issue() -> None:
    one_m = shape_of("1m")
    assert (one_m.entities, one_m.relations, one_m.chunks) == (100_000, 1_000_000, 100_000)
    assert shape_of("10k").relations == 10_000 and shape_of("250").entities == 25
    for bad in ("", "ten", "1g", "5"):
        with pytest.raises(ValidationError):
            shape_of(bad)


def test_queries_are_deterministic_and_name_real_entities(tmp_path: Path) -> None:
    bundle, spent = ensure_bundle(tmp_path, shape_of("300"), 3, lambda _m: None)
    again, cached = ensure_bundle(tmp_path, shape_of("300"), 3, lambda _m: None)
    assert again == bundle and spent > 0 and cached == 0.0
    names = {json.loads(line)["name"] for line in (bundle / "entities.jsonl").read_text().splitlines()}
    queries = bench_queries(bundle, 6)
    assert queries == bench_queries(bundle, 6) and len(set(queries)) == 6
    first = queries[0].removeprefix("How does ").removesuffix("?").split(" relate to ")
    assert set(first) <= names and queries[1].startswith("What does ")


SAVED: list[dict] = []


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    with pytest.MonkeyPatch.context() as mp:
        # The harness measures each size in a freshly spawned process, which re-runs `__main__` by its path.
        # Under pytest-xdist `__main__` is the worker's bootstrap script, which cannot run twice: hide its path so
        # the child starts clean (as it does under `python -m retrieval bench --scale`).
        mp.delattr(sys.modules["__main__"], "__file__", raising=False)
        return run_scale([shape_of("400")], PAIRS, work_dir=tmp_path_factory.mktemp("scale"), n_queries=3,
                         save=lambda r: SAVED.append(json.loads(json.dumps(r))))


@pytest.mark.slow
def test_tiny_run_covers_both_pairs(tiny_report: dict) -> None:
    # saved after each point, so a stopped run keeps what it measured
    assert [len(r["sizes"][0]["pairs"]) for r in SAVED] == [1, 2] and not SAVED[-1]["complete"]
    assert tiny_report["complete"]
    (size,) = tiny_report["sizes"]
    assert [p["pair"] for p in size["pairs"]] == list(PAIRS)
    for point in size["pairs"]:
        assert point["load"]["counts"]["relations"] == 400 and point["load"]["total_s"] > 0
        for kind in ("kg", "comprehensive"):
            e2e = point[kind]["e2e"]
            assert e2e["n"] == 3 and 0 < e2e["p50_ms"] <= e2e["p95_ms"]
            assert point[kind]["empty_results"] == 0
        assert "total" in point["kg"]["stages"] and "vector:vector" in point["comprehensive"]["stages"]
        assert point["rss_mb"]["serving"] > 50
    assert size["pairs"][1]["rss_mb"]["servers"] > 10  # FalkorDB + Milvus were measured, then stopped
    ppr = size["ppr"]
    assert ppr["top10_equal"] and ppr["max_abs_diff"] < 1e-6 and ppr["speedup"] > 0
    assert tiny_report["ppr_speedup_vs_networkx"] == ppr["speedup"]
    table = readme_tables(tiny_report)
    assert "| 400 | 40 | 40 | falkordb+milvus-server |" in table


@pytest.mark.slow
def test_cli_prints_the_tables_of_a_report(tiny_report: dict, tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(tiny_report), encoding="utf-8")
    app = typer.Typer(add_completion=False)
    search_cli.register(app)
    result = CliRunner().invoke(app, ["bench", "--readme", str(path)])
    assert result.exit_code == 0, result.output
    assert result.output == readme_tables(tiny_report)
    missing = CliRunner().invoke(app, ["bench", "--readme", str(tmp_path / "none.json")])
    assert missing.exit_code == 2 and "bench --scale --json --out" in missing.output


def test_committed_report_has_the_issue_keys_and_the_readme_shows_its_tables() -> None:
    report = json.loads(REPORT.read_text(encoding="utf-8"))
    assert isinstance(report["ppr_speedup_vs_networkx"], float)
    # the 1M point with the embedded default pair is the issue's target; a partial run says so in its tables
    sizes = {s["relations"]: [p["pair"] for p in s["pairs"]] for s in report["sizes"]}
    assert set(sizes) <= {10_000, 100_000, 1_000_000} and "kuzu+milvus-lite" in sizes[1_000_000]
    assert all(set(pairs) <= set(PAIRS) for pairs in sizes.values())
    assert report["complete"] == (set(sizes) == {10_000, 100_000, 1_000_000}
                                  and all(pairs == list(PAIRS) for pairs in sizes.values()))
    assert not [p["error"] for s in report["sizes"] for p in s["pairs"] if "error" in p]
    assert report["machine"]["cpus"] and report["date"] and report["load_average_at_start"]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme_tables(report) in readme, "paste `python -m retrieval bench --readme docs/bench-scale.json`"
