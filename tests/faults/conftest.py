"""Fault tier: real faults (killed servers and processes, locked/deleted files, read-only mounts, a full disk)
against the CLI (`python -m retrieval ...` in a subprocess) and the app (AppTest, in this process).

Every graph here uses the deterministic `hash-384` embedder so that each CLI process starts in seconds; the
faults are in the storage layer, which is the same for every embedder.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from retrieval.config import Settings
from retrieval.embedding import HashEmbedder
from retrieval.graph import catalog
from retrieval.ingest.build import ingest
from tests.app.conftest import APP, clear_caches
from tests.app.grading import grader_data
from tests.conftest import DEMO_BUNDLE, ROOT

EMBED = "hash-384"
QUERY = "How does brand awareness connect to conversion rate?"
OTHER_QUERY = "How do loyalty programmes lower price sensitivity?"  # a second, uncached search
TIMEOUT = 120


def fault_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a CLI run or an AppTest: this data dir, the hash embedder, no hub, no Gemini."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KG_") and k != "GEMINI_API_KEY"}
    return {**env, "KG_DATA_DIR": str(data_dir), "KG_EMBED_MODEL": EMBED, "HF_HUB_OFFLINE": "1", **extra}


def cli(env: dict[str, str], *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """`python -m retrieval ARGS` as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "retrieval", *args], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=timeout, check=False,
    )


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, f"exit {proc.returncode}:\n{proc.stderr[-3000:]}"
    return proc


def clear_error(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    """A failed CLI run: exit 2, no traceback, and a last stderr line `error: ...` containing every needle."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, f"exit {proc.returncode}, stderr:\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert lines and lines[-1].startswith("error: "), proc.stderr[-3000:]
    for needle in needles:
        assert needle in proc.stderr, f"{needle!r} not in:\n{proc.stderr[-3000:]}"
    return lines[-1]


def cli_facts(env: dict[str, str], query: str = QUERY) -> list[str]:
    """The CLI's facts for `query`, in rank order."""
    result = json.loads(ok(cli(env, "search", query, "--json")).stdout)
    facts = [f["text"] for f in result["facts"]]
    assert facts, f"no facts for {query!r}"
    return facts


@contextmanager
def app_env(env: dict[str, str]) -> Iterator[None]:
    """Run AppTest under `env`, on fresh caches: cached graphs of other data dirs are closed (so a CLI process
    can open their Milvus Lite files) and no result is served from another data dir's cache."""
    saved = dict(os.environ)
    clear_caches()
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        clear_caches()  # closes this app's graphs: releases Milvus Lite and Kuzu for the CLI
        os.environ.clear()
        os.environ.update(saved)


def run_app(page: str | None = None, **query: str) -> AppTest:
    """One script run of the app (optionally switched to `page`); the app must not raise."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    if page:
        at.switch_page(page)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def app_errors(at: AppTest) -> str:
    """The error boxes of the page and the sidebar, with Markdown escapes removed (data is shown literally)."""
    text = "\n".join([e.value for e in at.error] + [e.value for e in at.sidebar.error])
    return re.sub(r"\\(.)", r"\1", text)


def app_facts(at: AppTest) -> list[str]:
    """The fact texts of the Search page's Facts list."""
    assert at.get("bidi_component"), f"no facts list; errors: {app_errors(at)}"
    facts = [row["text"] for row in grader_data(at, "facts-")["rows"]]
    assert facts
    return facts


@dataclass(frozen=True)
class BaseGraph:
    """The demo graph built once with the hash embedder, and the CLI's and the app's answers on it."""

    data_dir: Path
    version: str
    cli_facts: list[str]
    app_facts: list[str]


@pytest.fixture(scope="session")
def base_graph(tmp_path_factory: pytest.TempPathFactory) -> BaseGraph:
    data_dir = tmp_path_factory.mktemp("faults-base") / "kg"
    settings = Settings.from_env(env={}, data_dir=data_dir, embed_model=EMBED)
    report = ingest(settings, DEMO_BUNDLE, fmt="bundle", name="demo", embedder=HashEmbedder(), progress=False)
    env = fault_env(data_dir)
    facts = cli_facts(env)
    with app_env(env):
        shown = app_facts(run_app(q=QUERY))
    return BaseGraph(data_dir, report.version, facts, shown)


@pytest.fixture
def graph_copy(base_graph: BaseGraph, tmp_path: Path) -> Path:
    """A private copy of the base data dir (catalog symlinks are relative, so the copy stands alone)."""
    dst = tmp_path / "kg"
    shutil.copytree(base_graph.data_dir, dst, symlinks=True)
    return dst


def changed_bundle(dest: Path) -> Path:
    """The demo bundle with one chunk's text changed: a different content hash, so a real rebuild."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("chunks.jsonl", "documents.jsonl", "entities.jsonl", "relations.jsonl"):
        shutil.copy(DEMO_BUNDLE / name, dest / name)
    rows = (dest / "chunks.jsonl").read_text(encoding="utf-8").splitlines()
    first = json.loads(rows[0])
    first["text"] = "Revised edition. " + first["text"]
    rows[0] = json.dumps(first, ensure_ascii=False)
    (dest / "chunks.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return dest


def live_version(data_dir: Path) -> str:
    return catalog.resolve(data_dir, "demo").version


def build_dirs(data_dir: Path) -> list[Path]:
    versions = data_dir / "versions"
    return sorted(versions.glob(".build-*")) if versions.is_dir() else []


def mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, text=True)


def can_mount(tmp: Path) -> bool:
    """Whether this process may mount (root with CAP_SYS_ADMIN, as in CI here): tried on a scratch tmpfs."""
    probe = tmp / "mount-probe"
    probe.mkdir(exist_ok=True)
    try:
        mount("-t", "tmpfs", "-o", "size=1m", "tmpfs", str(probe))
    except (subprocess.CalledProcessError, FileNotFoundError):
        return False
    subprocess.run(["umount", str(probe)], check=True)
    return True


def unmount(path: Path) -> None:
    # Lazy: detaches at once even if something in this process still holds a file there.
    subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)
