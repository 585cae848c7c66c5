"""The graph's readers-writer lock: searches read together, a changeset writes alone and waits for the searches
in flight, a waiting writer goes before new readers, a thread may nest reads and read inside its own write, and
another process's writer (flock on the lock file) holds readers off too."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from retrieval.errors import ConflictError
from retrieval.graph.lock import GraphLock

STEP = 0.2  # long enough for a thread to reach a lock under load, short enough to keep the test quick


def test_readers_share_and_a_writer_waits_for_them_then_goes_before_new_readers(tmp_path: Path) -> None:
    lock = GraphLock(tmp_path / "g.lock")
    order: list[str] = []
    first_in, release_first = threading.Event(), threading.Event()

    def reader(name: str, hold: threading.Event | None = None, entered: threading.Event | None = None) -> None:
        with lock.reading():
            order.append(f"{name} in")
            if entered is not None:
                entered.set()
            if hold is not None:
                hold.wait(10)
            order.append(f"{name} out")

    def writer() -> None:
        with lock.writing():
            order.append("writer")

    r1 = threading.Thread(target=reader, args=("r1", release_first, first_in))
    r1.start()
    assert first_in.wait(10)
    with lock.reading():  # a second reader enters beside the first
        order.append("r2 in")
    w = threading.Thread(target=writer)
    w.start()
    time.sleep(STEP)
    r3 = threading.Thread(target=reader, args=("r3",))
    r3.start()  # arrives while the writer waits: goes after it
    time.sleep(STEP)
    assert "writer" not in order and "r3 in" not in order
    release_first.set()
    for t in (r1, w, r3):
        t.join(10)
    assert order.index("r1 out") < order.index("writer") < order.index("r3 in")


def test_nested_reads_and_a_read_inside_the_own_write_do_not_block(tmp_path: Path) -> None:
    lock = GraphLock(tmp_path / "g.lock")
    with lock.reading(), lock.reading():
        pass
    with lock.writing(), lock.reading(), lock.writing():
        pass
    with lock.reading(), pytest.raises(RuntimeError, match="cannot start writing"):
        with lock.writing():
            pass


def test_a_writer_in_another_process_holds_readers_off(tmp_path: Path) -> None:
    path = tmp_path / "g.lock"
    child = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from retrieval.graph.lock import GraphLock\n"
        "lock = GraphLock(Path(sys.argv[1]))\n"
        "with lock.writing():\n    print('held', flush=True)\n    time.sleep(1.0)\n"), str(path)],
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    start = time.perf_counter()
    with GraphLock(path).reading():
        waited = time.perf_counter() - start
    child.wait(10)
    assert waited > 0.3  # it waited for the other process's changeset
    assert GraphLock(None) is not None  # no lock file (a read-only data dir): threads only


def test_a_writer_waits_its_turn_a_bounded_time_then_says_so(tmp_path: Path) -> None:
    """Issue 27: a second curator waits for the first (a thread of this process, or another process), at most
    `wait_s`; then a ConflictError says so, and the readers it held off go on."""
    lock = GraphLock(tmp_path / "demo.lock", wait_s=STEP)
    held, release = threading.Event(), threading.Event()

    def first() -> None:
        with lock.writing():
            held.set()
            release.wait(10)

    t = threading.Thread(target=first)
    t.start()
    assert held.wait(10)
    start = time.perf_counter()
    with pytest.raises(ConflictError, match=r"another curator is changing graph 'demo'; waited 0.2 s .*KG_LOCK_WAIT_S"):
        with lock.writing():
            pass
    assert time.perf_counter() - start >= STEP
    release.set()
    t.join(10)
    with lock.writing(), lock.reading():  # its turn came: the lock is whole again
        pass
    child = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from retrieval.graph.lock import GraphLock\n"
        "with GraphLock(Path(sys.argv[1])).writing():\n    print('held', flush=True)\n    time.sleep(30)\n"),
        str(tmp_path / "demo.lock")], stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        with pytest.raises(ConflictError, match="waited 0.2 s"), lock.writing():
            pass
    finally:
        child.kill()
        child.wait()
    with GraphLock(tmp_path / "demo.lock", wait_s=10).writing():  # the other process is gone: no wait
        pass
