"""Durability of labels: every label `put_label` acknowledged survives the writer being killed (SIGKILL, no
chance to close or checkpoint), with its text unchanged, and every connection writes with synchronous=FULL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from retrieval.evaluation.labels import LabelStore, normalize_query
from tests.data.hostile.make_bundle import accepted

ROOT = Path(__file__).resolve().parents[2]
WRITER = """
import sys
from pathlib import Path
from retrieval.evaluation.labels import LabelStore
from tests.data.hostile.make_bundle import accepted
store = LabelStore(Path(sys.argv[1]))
for i, p in enumerate(accepted()):
    store.put_label(p.value, p.id, i % 4, graph_version="v1", note=p.value[:100])
    print(p.id, flush=True)  # acknowledged: put_label has returned
sys.stdin.read()  # wait to be killed, connection still open
"""
KILL_AFTER = 20  # labels acknowledged before the writer is killed


def test_acknowledged_labels_survive_a_killed_writer(tmp_path: Path) -> None:
    path = tmp_path / "labels.sqlite"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    acked = []
    try:
        assert proc.stdout is not None
        while len(acked) < KILL_AFTER:
            line = proc.stdout.readline()
            assert line, f"the writer stopped after {len(acked)} labels"
            acked.append(line.strip())
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # mid-stream: it may be inside the next transaction
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    store = LabelStore(path)
    try:
        stored = {lb.item_id: lb for lb in store.all_labels("v1")}
        with store._connect() as conn:  # the setting that makes an acknowledged label reach the disk
            assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    finally:
        store.close()
    by_id = {p.id: (i, p) for i, p in enumerate(accepted())}
    assert set(acked) <= set(stored) <= set(by_id)  # the writer may have got further than we read: never less
    for pid, label in stored.items():  # whole labels only: no torn or partial row
        i, p = by_id[pid]
        assert (label.query_text, label.grade, label.note) == (normalize_query(p.value), i % 4, p.value[:100])
