"""A curation changeset killed with SIGKILL mid-way: the next open (the CLI here) rolls it back, says so, and the
graph is exactly as before it (records, in-memory index, vectors, the manifest's counts); the changeset is kept in
the log and can be applied again. Killed once its log entry is committed, the graph is as after it. Nothing is lost
either way.

The child process is the engine itself, paused at a chosen point by wrapping one of its functions (the test's own
instrument): after the graph store was written (vectors not yet), between two vector collections, and after the
log committed the changeset."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from retrieval.config import Settings
from retrieval.embedding import HashEmbedder
from retrieval.graph import catalog
from retrieval.graph.runtime import open_kg
from retrieval.stores.base import ENTITIES, RELATIONS
from tests.conftest import ROOT
from tests.faults.conftest import EMBED, BaseGraph, cli, cli_facts, fault_env, ok
from tests.property.test_index_patch import canonical

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEEP, OTHER = "price-elasticity", "demand-curve"

# argv: data dir, pause point. Applies a merge of KEEP and OTHER; prints "paused" where asked and sleeps there.
CHILD = """
import sys, time
import retrieval.curation.write as write
import retrieval.curation.log as log
from retrieval.config import Settings
from retrieval.curation.apply import Curator
from retrieval.curation.ops import MergeEntities
from retrieval.graph.runtime import open_kg

data_dir, point = sys.argv[1], sys.argv[2]

def pause():
    print("paused", flush=True)
    time.sleep(600)

if point == "graph":  # the graph store has the change; no vector has it yet
    vectors = write._write_vectors
    write._write_vectors = lambda *a: (pause(), vectors(*a))
elif point == "vectors":  # the entity vectors have it; the relation vectors not yet
    upsert, calls = write._upsert, []
    def second(target, collection, *a):
        if collection == "RelationDescriptions":
            pause()
        return upsert(target, collection, *a)
    write._upsert = second
elif point == "committed":  # the log says applied; the process dies before it answers
    finish = log.CurationLog.finish
    def done(self, *a, **k):
        generation = finish(self, *a, **k)
        pause()
        return generation
    log.CurationLog.finish = done
kg = open_kg(Settings.from_env(data_dir=data_dir), "demo")
print("ready", flush=True)
Curator(kg).apply([MergeEntities(entity_ids=(sys.argv[3], sys.argv[4]))], author="ana", reason="killed")
"""


def snapshot(data_dir: Path) -> tuple[object, ...]:
    """What the graph says: records of the merged pair and their relations, the index, and their vectors."""
    kg = open_kg(Settings.from_env(env={}, data_dir=data_dir, embed_model=EMBED), "demo", HashEmbedder())
    try:
        rels = sorted(r.id for r in kg.graph.neighbourhood([KEEP, OTHER], hops=1, max_edges=1000).edges)
        return (kg.graph.get_entities([KEEP, OTHER]), kg.graph.get_relations(rels), canonical(kg.index),
                np.round(kg.vectors.vectors(ENTITIES, [KEEP, OTHER]), 5).tolist(),
                np.round(kg.vectors.vectors(RELATIONS, rels), 5).tolist())
    finally:
        kg.close()


COUNTED = ("entities", "relations", "chunks", "books", "chapters")


def manifest_counts(data_dir: Path) -> dict[str, int]:
    """What the live version's manifest says it holds."""
    counts = catalog.resolve(data_dir, "demo").manifest["counts"]
    return {k: counts[k] for k in COUNTED}


def stored_counts(data_dir: Path) -> dict[str, int]:
    """What its graph store holds."""
    kg = open_kg(Settings.from_env(env={}, data_dir=data_dir, embed_model=EMBED), "demo", HashEmbedder())
    try:
        return {k: v for k, v in kg.graph.counts().items() if k in COUNTED}
    finally:
        kg.close()


def kill_at(data_dir: Path, point: str) -> None:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(data_dir), point, KEEP, OTHER], cwd=ROOT,
                            env=fault_env(data_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == "paused":
            proc.send_signal(signal.SIGKILL)
            break
    assert proc.wait(timeout=120) == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""


@pytest.mark.parametrize("point", ["graph", "vectors"])
def test_a_changeset_killed_mid_way_is_rolled_back_and_said(base_graph: BaseGraph, graph_copy: Path,
                                                            point: str) -> None:
    before, counts_before = snapshot(graph_copy), stored_counts(graph_copy)
    kill_at(graph_copy, point)
    env = fault_env(graph_copy)
    listed = ok(cli(env, "changes", "list"))
    assert "recovered: changeset #1" in listed.stderr and "as it was before it (rolled back)" in listed.stderr
    assert "#1 ana" in listed.stdout and "[rolled_back]" in listed.stdout
    assert snapshot(graph_copy) == before  # before, never half
    assert manifest_counts(graph_copy) == stored_counts(graph_copy) == counts_before  # issue 27.13
    assert cli_facts(env) == base_graph.cli_facts
    quiet = ok(cli(env, "changes", "list"))
    assert "recovered" not in quiet.stderr  # said once
    redone = ok(cli(env, "changes", "redo", "1"))  # nothing lost: the changeset is applied again on request
    assert "redo of #1" in redone.stdout
    kg = open_kg(Settings.from_env(env={}, data_dir=graph_copy, embed_model=EMBED), "demo", HashEmbedder())
    try:
        assert OTHER not in kg.index.id_to_idx and not kg.vectors.vectors(ENTITIES, [OTHER]).any()
    finally:
        kg.close()


def test_a_changeset_killed_after_its_commit_is_whole(base_graph: BaseGraph, graph_copy: Path) -> None:
    kill_at(graph_copy, "committed")
    env = fault_env(graph_copy)
    listed = ok(cli(env, "changes", "list"))
    assert "recovered" not in listed.stderr and "[applied]" in listed.stdout
    kg = open_kg(Settings.from_env(env={}, data_dir=graph_copy, embed_model=EMBED), "demo", HashEmbedder())
    try:
        assert OTHER not in kg.index.id_to_idx and kg.graph.get_entities([KEEP])[0].aliases
        assert not kg.vectors.vectors(ENTITIES, [OTHER]).any()  # after, with its vectors
    finally:
        kg.close()
    assert manifest_counts(graph_copy) == stored_counts(graph_copy)
    assert "undo of #1" in ok(cli(env, "changes", "undo")).stdout
    assert cli_facts(env) == base_graph.cli_facts
