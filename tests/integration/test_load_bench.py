"""Smoke test of scripts/load_bench.py: 1 and 2 concurrent users on the demo graph (hash embedder), threads and
browser; every answer complete and equal to the 1-user run's. Plus the bookkeeping that makes that check."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from retrieval.config import Settings
from retrieval.embedding import HashEmbedder
from retrieval.ingest.build import ingest
from tests.conftest import DEMO_BUNDLE, ROOT

SCRIPT = ROOT / "scripts" / "load_bench.py"
QUERIES = 4


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("load_bench", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["load_bench"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def hash_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("load-bench") / "kg"
    settings = Settings.from_env(env={}, data_dir=data_dir, embed_model="hash-384")
    ingest(settings, DEMO_BUNDLE, fmt="bundle", name="demo", embedder=HashEmbedder(), progress=False)
    return data_dir


def run_bench(data_dir: Path, mode: str, tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KG_")}
    env.update(KG_EMBED_MODEL="hash-384", HF_HUB_OFFLINE="1")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--data-dir", str(data_dir), "--users", "2", "--queries", str(QUERIES),
         "--mode", mode, "--json", str(out), "--work-dir", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    assert report["queries"] == QUERIES and report["dropped_empty"] == 0
    return report


def check_levels(levels: list[dict[str, Any]], mode: str) -> None:
    assert [(lv["mode"], lv["users"]) for lv in levels] == [(mode, 1), (mode, 2)]
    for lv in levels:
        assert lv["requests"] == QUERIES and lv["errors"] == [] and lv["empty"] == 0
        assert lv["mismatches"] == 0, lv["mismatched_queries"]
        assert 0 < lv["p50_ms"] <= lv["p95_ms"] <= lv["p99_ms"] <= lv["max_ms"]
        assert len(lv["load_average"].split()) == 3  # each level says how loaded the machine was
        # both are rounded (wall to 1 ms), so compare within what the rounding allows
        assert lv["throughput_qps"] == pytest.approx(QUERIES / lv["wall_s"], rel=0.01 + 0.0005 / lv["wall_s"])


@pytest.mark.integration
def test_threads_share_one_kg_and_answer_like_one_user(hash_demo: Path, tmp_path: Path) -> None:
    report = run_bench(hash_demo, "threads", tmp_path)
    check_levels(report["levels"], "threads")
    assert report["graph"]["relations"] == 485 and "load average" in report["load_before"]


@pytest.mark.browser
@pytest.mark.slow
def test_browser_sessions_answer_like_one_user(hash_demo: Path, tmp_path: Path) -> None:
    if not os.access("/usr/bin/chromium", os.X_OK):
        pytest.fail("/usr/bin/chromium missing: run `bash scripts/install_browser`")
    report = run_bench(hash_demo, "browser", tmp_path)
    check_levels(report["levels"], "browser")
    assert report["browser_equals_threads"] == QUERIES  # the page shows what the engine returns


def test_summary_counts_mismatched_and_empty_answers() -> None:
    bench = load_script()
    level = bench.Level("threads", 2, latencies_ms=[10.0, 20.0, 30.0], wall_s=1.5,
                        answers={"a": ["x", "y"], "b": ["y", "x"], "c": []})
    summary = level.summary({"a": ["x", "y"], "b": ["x", "y"], "c": ["z"]})
    assert summary["mismatches"] == 2 and summary["mismatched_queries"] == ["b", "c"] and summary["empty"] == 1
    assert summary["throughput_qps"] == 2.0 and summary["p50_ms"] == 20.0 and summary["max_ms"] == 30.0
    assert bench.split(["q1", "q2", "q3", "q4", "q5"], 2) == [["q1", "q3", "q5"], ["q2", "q4"]]


def test_facts_are_read_from_the_agent_markdown() -> None:
    from retrieval.models import SearchResult, VerbalizedFact
    from retrieval.search.verbalize import to_markdown

    texts = ("A --[R]--> B", "C 2. D")
    facts = tuple(VerbalizedFact.model_validate({"id": f"f{i}", "type": "global", "text": t})
                  for i, t in enumerate(texts))
    markdown = to_markdown(SearchResult(query="How?", facts=facts))
    assert load_script().facts_of(markdown) == list(texts)
