"""The label store killed mid-write: writer processes put labels in a loop and print each acknowledged one;
SIGKILL lands wherever they are (usually inside a transaction or its fsync). No acknowledged label is lost,
the database passes SQLite's integrity check, and the CLI and the app keep using it."""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from retrieval.evaluation.labels import LABELS_FILE, LabelStore
from tests.conftest import ROOT
from tests.faults.conftest import QUERY, BaseGraph, app_env, fault_env, ok, run_app

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROUNDS = 3
WRITERS = 2  # concurrent writer processes per round, so kills also land while a writer waits for the lock

# argv: database path, graph version, first label number. Prints "ready", then each label's number once
# put_label has returned (committed and fsynced).
WRITER = """
import sys
from retrieval.evaluation.labels import LabelStore

store = LabelStore(sys.argv[1])
version, i = sys.argv[2], int(sys.argv[3])
print("ready", flush=True)
while True:
    store.put_label(f"{sys.argv[4]} {i % 3}", f"item-{i}", i % 4, graph_version=version, annotator="writer")
    print(i, flush=True)
    i += 1
"""


def run_round(db: Path, version: str, first: int, rng: random.Random) -> set[int]:
    """Start WRITERS writers, SIGKILL each after a random number of acknowledgements; return every ack."""
    acked: set[int] = set()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db), version, str(first + k * 1_000_000), QUERY],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for k in range(WRITERS)
    ]

    def read(proc: subprocess.Popen[str], kill_after: int) -> None:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
        seen = 0
        for line in proc.stdout:  # after the kill: the acks still in the pipe, then EOF
            acked.add(int(line))
            seen += 1
            if seen == kill_after:
                proc.send_signal(signal.SIGKILL)

    readers = [threading.Thread(target=read, args=(p, rng.randint(40, 400))) for p in procs]
    for t in readers:
        t.start()
    for t in readers:
        t.join(timeout=300)
    for p in procs:
        assert p.wait(timeout=30) == -signal.SIGKILL
    return acked


def test_label_store_killed_mid_write(base_graph: BaseGraph, graph_copy: Path, tmp_path: Path) -> None:
    db = graph_copy / LABELS_FILE
    rng = random.Random(9)
    acked: set[int] = set()
    for r in range(ROUNDS):
        acked |= run_round(db, base_graph.version, r * 10_000_000, rng)

    store = LabelStore(db)
    stored = {int(lb.item_id.removeprefix("item-")) for lb in store.all_labels() if lb.annotator == "writer"}
    lost = acked - stored
    print(f"\nlabels: written {len(stored)}, acknowledged {len(acked)}, lost {len(lost)} "
          f"({ROUNDS * WRITERS} writers SIGKILLed)")
    assert len(acked) >= ROUNDS * WRITERS * 40
    assert not lost, f"acknowledged labels lost: {sorted(lost)[:10]}"
    assert len(stored) - len(acked) <= ROUNDS * WRITERS  # at most the one in flight per kill, committed unacked
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    grades = {lb.item_id: lb.grade for lb in store.all_labels()}
    assert all(grades[f"item-{i}"] == i % 4 for i in acked)
    store.close()

    # The next good operations: the CLI exports every label, imports new ones; the app reads the store.
    env = fault_env(graph_copy)
    out = tmp_path / "export"
    ok(subprocess.run([sys.executable, "-m", "retrieval", "labels", "export", "--out", str(out)], cwd=ROOT,
                      env=env, capture_output=True, text=True, timeout=240, check=False))
    exported = (out / "qrels.txt").read_text(encoding="utf-8").splitlines()
    assert len(exported) == len(stored)
    (out / "qrels.txt").write_text(exported[0].rsplit(" ", 1)[0] + " 0\n", encoding="utf-8")
    imported = ok(subprocess.run(
        [sys.executable, "-m", "retrieval", "labels", "import", str(out / "qrels.txt")], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=240, check=False,
    ))
    assert "imported 1 labels" in imported.stdout
    with app_env(env):
        at = run_app("pages/rerank.py", q=QUERY)
        assert "Rerank Inspector" in "\n".join(m.value for m in at.markdown)
        assert len(at.data_editor) == 1  # the labeling grid, read from the store that survived the kills
