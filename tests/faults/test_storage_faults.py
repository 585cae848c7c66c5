"""Storage faults on the embedded stack (Kuzu + Milvus Lite): each gives a clear CLI error and a clear app
message, the app keeps running, and afterwards the next good operation works on uncorrupted data."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from retrieval.graph import catalog
from tests.conftest import ROOT
from tests.faults.conftest import (
    OTHER_QUERY,
    QUERY,
    BaseGraph,
    app_env,
    app_errors,
    app_facts,
    build_dirs,
    can_mount,
    changed_bundle,
    clear_error,
    cli,
    cli_facts,
    fault_env,
    live_version,
    mount,
    ok,
    run_app,
    unmount,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# Holds a Milvus Lite database the way a second app process would, until its stdin closes.
HOLD_LITE = """
import sys
from pymilvus import MilvusClient
client = MilvusClient(uri=sys.argv[1])
print("held", flush=True)
sys.stdin.read()
"""


def version_dir(data_dir: Path) -> Path:
    return catalog.resolve(data_dir, "demo").dir


def test_milvus_lite_locked_by_another_process(base_graph: BaseGraph, graph_copy: Path) -> None:
    env = fault_env(graph_copy)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LITE, str(version_dir(graph_copy) / "milvus.db")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        clear_error(cli(env, "search", QUERY), "cannot open Milvus", "one process at a time")
        with app_env(env):
            at = run_app(q=QUERY)
            assert "Cannot open graph" in app_errors(at) and "one process at a time" in app_errors(at)
            assert not at.dataframe  # no half answer
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)
    # The lock is gone with its holder: the same data answers exactly as before.
    assert cli_facts(env) == base_graph.cli_facts
    with app_env(env):
        assert app_facts(run_app(q=QUERY)) == base_graph.app_facts


def test_milvus_lite_deleted_under_a_running_app(base_graph: BaseGraph, graph_copy: Path) -> None:
    env = fault_env(graph_copy)
    lite = version_dir(graph_copy) / "milvus.db"
    with app_env(env):
        assert app_facts(run_app(q=QUERY)) == base_graph.app_facts  # the app has the graph open
        shutil.rmtree(lite)
        at = run_app(q=OTHER_QUERY)
        assert "Search failed" in app_errors(at) and "was deleted; re-ingest the graph" in app_errors(at)
    clear_error(cli(env, "search", QUERY), "Milvus collection", "ingest first")
    # Re-ingesting the same input notices the lost vectors and rebuilds instead of answering "unchanged".
    rebuilt = ok(cli(env, "demo", "--no-progress"))
    assert "built graph 'demo'" in rebuilt.stdout and "lost data" in rebuilt.stderr
    assert live_version(graph_copy) != base_graph.version
    assert cli_facts(env) == base_graph.cli_facts
    with app_env(env):
        assert app_facts(run_app(q=QUERY)) == base_graph.app_facts


@pytest.fixture
def mountable(tmp_path: Path) -> None:
    if not can_mount(tmp_path):
        pytest.skip("needs root with CAP_SYS_ADMIN to mount a read-only bind mount / a small tmpfs")


@pytest.fixture
def read_only(mountable: None, graph_copy: Path) -> Iterator[Path]:
    """The data dir as a real read-only mount (a bind mount remounted ro; chmod does not stop root)."""
    mount("--bind", str(graph_copy), str(graph_copy))
    try:
        mount("-o", "remount,ro,bind", str(graph_copy))
        yield graph_copy
    finally:
        unmount(graph_copy)


def write_qrels(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "queries.tsv").write_text(f"q1\t{QUERY}\n", encoding="utf-8")
    (folder / "qrels.txt").write_text("q1 0 rel-1 3\nq1 0 rel-2 1\n", encoding="utf-8")
    return folder / "qrels.txt"


def test_read_only_data_dir(base_graph: BaseGraph, read_only: Path, tmp_path: Path) -> None:
    env = fault_env(read_only)
    with pytest.raises(OSError, match="Read-only file system"):
        (read_only / "probe").write_text("x")  # a real read-only mount, even for root
    qrels = write_qrels(tmp_path / "qrels")
    clear_error(cli(env, "search", QUERY), "cannot open Milvus", "Read-only file system")
    clear_error(cli(env, "demo", "--no-progress"), "cannot write to the data directory", "Read-only file system")
    clear_error(cli(env, "labels", "import", str(qrels)), "label store")
    with app_env(env):
        at = run_app(q=QUERY)
        assert "Cannot open graph" in app_errors(at) and "cannot open Milvus" in app_errors(at)
        data = run_app("pages/data.py")
        data.button(key="build-demo").click().run()
        assert not data.exception, [e.value for e in data.exception]
        assert "Import failed" in app_errors(data) and "Read-only file system" in app_errors(data)
    unmount(read_only)
    # Writable again: nothing was half-written, the graph answers as before, and writes work.
    assert list(read_only.iterdir()) and build_dirs(read_only) == []
    assert cli_facts(env) == base_graph.cli_facts
    assert "imported 2 labels" in ok(cli(env, "labels", "import", str(qrels))).stdout
    with app_env(env):
        assert app_facts(run_app(q=QUERY)) == base_graph.app_facts


@pytest.fixture
def small_disk(mountable: None, tmp_path: Path) -> Iterator[Path]:
    """A 48 MB tmpfs: room for the demo graph (~12 MB) plus a build, until a filler file takes the rest."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mount("-t", "tmpfs", "-o", "size=48m", "tmpfs", str(disk))
    try:
        yield disk
    finally:
        unmount(disk)


def fill(disk: Path, leave_bytes: int) -> Path:
    """Allocate all free space of `disk` but `leave_bytes` to one file (real blocks, not a sparse file)."""
    filler = disk / "filler"
    size = shutil.disk_usage(disk).free - leave_bytes
    fd = os.open(filler, os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        os.posix_fallocate(fd, 0, size)
    finally:
        os.close(fd)
    return filler


def test_disk_full_during_ingest(base_graph: BaseGraph, small_disk: Path, tmp_path: Path) -> None:
    data_dir = small_disk / "kg"
    shutil.copytree(base_graph.data_dir, data_dir, symlinks=True)
    env = fault_env(data_dir)
    bundle = changed_bundle(tmp_path / "changed")
    filler = fill(small_disk, leave_bytes=2 << 20)  # less than the new version's Kuzu database needs
    line = clear_error(cli(env, "ingest", str(bundle), "--name", "demo", "--no-progress"), "failed")
    assert "MB free" in line or "No space left on device" in line, line
    assert build_dirs(data_dir) == [] and live_version(data_dir) == base_graph.version
    assert cli_facts(env) == base_graph.cli_facts  # the previous version is served from the full disk
    with app_env({**env, "KG_IMPORT_ROOT": str(tmp_path)}):  # server folders only inside the import root
        data = run_app("pages/data.py")
        data.text_input(key="import-path").input(str(bundle)).run()
        data.text_input(key="import-name").input("demo").run()
        data.button[[b.label for b in data.button].index("Import")].click().run()
        assert not data.exception, [e.value for e in data.exception]
        assert "Import failed" in app_errors(data)
        assert app_facts(run_app(q=QUERY)) == base_graph.app_facts
    assert build_dirs(data_dir) == [] and live_version(data_dir) == base_graph.version
    filler.unlink()
    # Space again: the same ingest now succeeds and the new version is complete.
    built = ok(cli(env, "ingest", str(bundle), "--name", "demo", "--no-progress"))
    assert "built graph 'demo'" in built.stdout
    assert live_version(data_dir) != base_graph.version and build_dirs(data_dir) == []
    stats = ok(cli(env, "stats")).stdout
    assert "96 chunks, 248 entities, 485 relations" in stats and "Entities 248" in stats


def children(pid: int) -> list[int]:
    """Pids whose parent is `pid` (from /proc/*/stat: field 4 is the parent pid)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue  # exited while listing
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except OSError:
        return True


def test_ingest_killed_halfway(base_graph: BaseGraph, graph_copy: Path, tmp_path: Path) -> None:
    env = fault_env(graph_copy)
    bundle = changed_bundle(tmp_path / "changed")
    log = tmp_path / "ingest.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "retrieval", "ingest", str(bundle), "--name", "demo", "--no-progress"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 180
    # Halfway: the graph store is written and the vectors are being embedded into Milvus Lite.
    while not any((b / "milvus.db").exists() for b in build_dirs(graph_copy)):
        assert proc.poll() is None, f"ingest ended before it could be killed:\n{log.read_text()}"
        assert time.monotonic() < deadline, "the ingest never reached its vector stage"
        time.sleep(0.02)
    helpers = children(proc.pid)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    assert build_dirs(graph_copy), "the killed ingest left no build directory behind (was it killed too late?)"
    assert live_version(graph_copy) == base_graph.version
    assert cli_facts(env) == base_graph.cli_facts  # the previous graph is still served
    with app_env(env):
        assert app_facts(run_app(q=QUERY)) == base_graph.app_facts
    deadline = time.monotonic() + 10
    while not all(gone(pid) for pid in helpers):  # e.g. Kuzu's bulk loader exits with its parent
        assert time.monotonic() < deadline, f"orphaned helper processes {helpers}"
        time.sleep(0.1)
    # The next ingest cleans up the killed build and completes.
    built = ok(cli(env, "ingest", str(bundle), "--name", "demo", "--no-progress"))
    assert "built graph 'demo'" in built.stdout
    assert build_dirs(graph_copy) == [] and live_version(graph_copy) != base_graph.version
