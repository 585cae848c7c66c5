"""Curators at once on one graph, each a CLI process (issue 27): each waits its turn instead of failing on Kuzu's
file lock, every change is applied and the manifest counts what the stores hold; a turn that does not come within
KG_LOCK_WAIT_S (another curator's lock held, or the database held open by another process) ends with a clear
message and nothing written."""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval.graph import catalog
from tests.conftest import ROOT
from tests.faults.conftest import clear_error, cli, fault_env, ok
from tests.faults.test_curation_killed import manifest_counts, stored_counts

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PAIRS = [("price-elasticity", "price-sensitivity"), ("reference-price", "list-price"), ("gross-margin", "revenue"),
         ("penetration-pricing", "price-skimming"), ("upselling", "cross-selling"), ("free-trial", "freemium")]


def test_six_merges_at_once_each_wait_their_turn(graph_copy: Path) -> None:
    before = stored_counts(graph_copy)
    env = fault_env(graph_copy)
    procs = [subprocess.Popen([sys.executable, "-m", "retrieval", "edit", "merge", keep, other, "--author",
                               f"curator-{i}"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for i, (keep, other) in enumerate(PAIRS)]
    results = [(p.wait(timeout=600), p.stdout.read() if p.stdout else "", p.stderr.read() if p.stderr else "")
               for p in procs]
    assert [code for code, _, _ in results] == [0] * len(PAIRS), [err[-1500:] for _, _, err in results]
    listed = json.loads(ok(cli(env, "changes", "list", "--json")).stdout)["changesets"]
    assert sorted(cs["author"] for cs in listed) == sorted(f"curator-{i}" for i in range(len(PAIRS)))
    assert {cs["state"] for cs in listed} == {"applied"}
    assert manifest_counts(graph_copy) == stored_counts(graph_copy)
    assert stored_counts(graph_copy)["entities"] == before["entities"] - len(PAIRS)


def test_a_turn_that_does_not_come_ends_with_a_clear_message(graph_copy: Path) -> None:
    env = fault_env(graph_copy, KG_LOCK_WAIT_S="2")
    lock = graph_copy / "curation" / "demo.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as held:  # another curator's turn, held for longer than the wait
        fcntl.flock(held, fcntl.LOCK_EX)
        clear_error(cli(env, "edit", "describe", "price-elasticity", "mine"), "another curator", "waited 2 s",
                    "KG_LOCK_WAIT_S")
    holder = subprocess.Popen([sys.executable, "-c", HOLD_OPEN, str(catalog.resolve(graph_copy, "demo").dir / "kuzu")],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        clear_error(cli(env, "edit", "describe", "price-elasticity", "mine"), "open in another process",
                    "waited 2 s", "KG_LOCK_WAIT_S")
    finally:
        holder.kill()
        holder.wait()
    listed = ok(cli(env, "changes", "list", "--json"))
    assert not json.loads(listed.stdout)["changesets"] and "recovered" not in listed.stderr  # nothing written
    assert "mine at last" in ok(cli(env, "edit", "describe", "price-elasticity", "mine at last")).stdout


# argv: a Kuzu database; holds it open (read-only, as an app serving searches does) until killed
HOLD_OPEN = """
import sys, time
import kuzu
db = kuzu.Database(sys.argv[1], read_only=True)
print("open", flush=True)
time.sleep(600)
"""
