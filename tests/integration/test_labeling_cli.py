"""The labeling workflow end to end on the demo graph (Kuzu + Milvus Lite + MiniLM): one item-id scheme across
every mode, pool and page; then the CLI session: query set, pool, blinded queue, two annotators' qrels,
agreement, adjudication, exports and eval-labels with intervals and a paired test."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from retrieval.cli.labels import register
from retrieval.evaluation.inspect import POOL_KINDS, candidate_pool
from retrieval.evaluation.labels import ADJUDICATED, LabelStore
from retrieval.evaluation.pooling import next_item, progress, queue
from retrieval.graph.runtime import KG
from retrieval.graph.traverse import k_shortest_paths
from retrieval.items import chunk_item_id, entity_item_id, path_item_id, relation_item_id
from retrieval.models import VerbalizedFact
from retrieval.search.modes import MODES, run_mode
from tests.conftest import DEMO_BUNDLE

pytestmark = pytest.mark.integration
QUESTIONS = [q["question"] for q in json.loads((DEMO_BUNDLE / "questions.json").read_text())[:3]]
DEPTH = 5


def expected_id(fact: VerbalizedFact) -> str:
    """The id retrieval.items gives an item of this kind (what every page and pool must show)."""
    if fact.type == "document":
        return chunk_item_id(fact.chunk_ids[0])
    if fact.type == "entity":
        return entity_item_id(fact.entity_ids[0])
    if fact.type == "global":
        return relation_item_id(fact.relation_ids[0])
    return path_item_id(fact.entity_ids, fact.relation_ids)


def test_every_mode_pool_and_the_paths_page_share_one_item_id_scheme(demo_kg: KG) -> None:
    query = QUESTIONS[0]
    facts = [f for mode in MODES for f in run_mode(demo_kg, mode, query, limit=10, settings=demo_kg.settings).facts]
    facts += [f for kind in POOL_KINDS for f in candidate_pool(demo_kg, query, kind, 20).candidates]
    assert {f.type for f in facts} == {"local", "global", "document", "entity"}
    for f in facts:
        assert f.id == expected_id(f), (f.type, f.id)
    # a KG path fact and the same walk found on the Paths page carry the same id
    matched = 0
    for f in {f.id: f for f in facts if f.type == "local"}.values():
        found = k_shortest_paths(demo_kg.index, f.entity_ids[0], f.entity_ids[-1], k=20,
                                 max_hops=len(f.relation_ids), details=demo_kg.graph)
        for p in found.paths:
            if [n.id for n in p.nodes] == list(f.entity_ids) and [e.id for e in p.edges] == list(f.relation_ids):
                assert path_item_id([n.id for n in p.nodes], [e.id for e in p.edges]) == f.id
                matched += 1
    assert matched >= 1


@pytest.fixture(scope="module")
def lab_dir(demo_data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A private copy of the demo data dir (the session one is shared read-only), with no labels yet."""
    out = tmp_path_factory.mktemp("labeling") / "kg"
    shutil.copytree(demo_data_dir, out, symlinks=True, ignore=shutil.ignore_patterns("labels.sqlite*", "LOCK"))
    yield out


def cli(data_dir: Path, *args: str) -> tuple[int, str, str]:
    app = typer.Typer()
    register(app)
    res = CliRunner().invoke(app, [*args, "--data-dir", str(data_dir)])
    return res.exit_code, res.stdout, res.stderr


def grade(annotator: str, item: str) -> int:
    """A deterministic stand-in for a person: ben agrees with ana on about two items in three."""
    h = int(hashlib.sha1(item.encode()).hexdigest(), 16)
    ana = h % 4
    return ana if annotator == "ana" or h % 3 else (ana + 1 + h % 2) % 4


def test_cli_session_two_annotators(lab_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    (tmp_path / "queries.tsv").write_text("".join(f"demo-{i}\t{q}\n" for i, q in enumerate(QUESTIONS, start=1)))
    code, out, _ = cli(lab_dir, "labels", "queries", "import", str(tmp_path / "queries.tsv"), "--name", "demo")
    assert code == 0 and "imported query set 'demo': 3 queries" in out
    code, out, _ = cli(lab_dir, "labels", "queries", "list")
    assert code == 0 and out.startswith("demo\t3 queries\t")

    code, out, err = cli(lab_dir, "labels", "pool", "--depth", str(DEPTH), "--modes", "all",
                         "--rerankers", "none,mmr,graph,cross_encoder")
    assert code == 0, err
    systems = [*MODES, "rerank:none", "rerank:mmr", "rerank:graph"]
    assert f"at depth {DEPTH}" in out and out.rstrip().endswith(", ".join(systems))
    assert "Cross-encoder cross-encoder/ms-marco-MiniLM-L-6-v2 is not available offline" in err  # left out, said
    assert "Gemini not configured" not in err  # item 10: no key is said by the design, not once per mode and query

    store = LabelStore.in_data_dir(lab_dir)
    blind = queue(store, "demo", "ana")
    assert len(blind) > 3 * DEPTH and all(it.systems is None for it in blind)
    assert not any("--[" in it.text for it in blind), "item 6: pooled facts read in the screen's one layout"
    assert [it.query_id for it in blind] == sorted(it.query_id for it in blind)  # query by query, in set order
    seen = queue(store, "demo", "ana", reveal=True)
    assert [it.item_id for it in seen] == [it.item_id for it in blind]  # revealing never moves the cursor
    assert all(it.systems and set(it.systems) <= set(systems) and min(it.systems.values()) <= DEPTH for it in seen)
    assert [it.item_id for it in queue(store, "demo", "ben")] != [it.item_id for it in blind]  # own shuffle
    for it in blind[:3]:  # ana grades three items, then comes back
        store.put_label(it.query, it.item_id, grade("ana", it.item_id), graph_version=it.graph_version,
                        annotator="ana")
    resume = next_item(store, "demo", "ana")
    assert resume is not None and resume.position == 3 and resume.item_id == blind[3].item_id
    assert progress(store, "demo", "ana").labeled == 3

    by_query: dict[str, list[str]] = {}
    for it in blind:
        by_query.setdefault(it.query_id, []).append(it.item_id)
    (tmp_path / "ana.txt").write_text("".join(f"{q} 0 {i} {grade('ana', i)}\n" for q, ids in by_query.items()
                                              for i in ids))
    ben_queries = list(by_query)[:2]
    (tmp_path / "ben.txt").write_text("".join(f"{q} 0 {i} {grade('ben', i)}\n" for q in ben_queries
                                              for i in by_query[q]))
    code, out, err = cli(lab_dir, "labels", "import", str(tmp_path / "ana.txt"), "--annotator", "ana", "--set", "demo")
    assert code == 0 and f"imported {len(blind)} labels by ana" in out, err
    code, out, err = cli(lab_dir, "labels", "import", str(tmp_path / "ben.txt"), "--annotator", "ben",
                         "--queries", str(tmp_path / "queries.tsv"))
    assert code == 0, err
    code, out, _ = cli(lab_dir, "labels", "progress", "--annotator", "ana")
    assert code == 0 and out.rstrip().endswith(f"ana: {len(blind)}/{len(blind)} graded; all graded")

    code, out, _ = cli(lab_dir, "labels", "agreement", "--json", "--set", "demo")
    assert code == 0
    report = json.loads(out)
    shared = [i for q in ben_queries for i in by_query[q]]
    differ = [i for i in shared if grade("ana", i) != grade("ben", i)]
    assert report["annotators"] == ["ana", "ben"] and report["items"] == len(shared)
    assert report["pairs"][0]["observed"] == pytest.approx(1 - len(differ) / len(shared))
    assert -1 <= report["pairs"][0]["kappa"] <= 1 and report["alpha_ordinal"] is not None
    assert sorted(d["item_id"] for d in report["disagreements"]) == sorted(differ)
    first = report["disagreements"][0]
    assert first["query_id"] in ben_queries and first["text"] and first["resolved"] is None  # a tie of two
    code, out, _ = cli(lab_dir, "labels", "agreement", "--set", "demo")
    assert code == 0 and "Cohen's kappa" in out and "Krippendorff's alpha (ordinal" in out
    assert f"{len(differ)} disagreements:" in out and "UNRESOLVED (tie)" in out

    code, out, _ = cli(lab_dir, "labels", "adjudicate", first["query_id"], first["item_id"], "2", "--set", "demo")
    assert code == 0 and f"adjudicated {first['item_id']} = 2" in out
    assert any(lb.annotator == ADJUDICATED for lb in store.all_labels())

    code, out, _ = cli(lab_dir, "labels", "export", "--format", "qrels", "--annotator", "ben", "--set", "demo",
                       "--out", str(tmp_path / "ben-out"))
    assert code == 0 and (tmp_path / "ben-out" / "qrels.txt").read_text().count("\n") == len(shared)
    assert (tmp_path / "ben-out" / "queries.tsv").read_text().splitlines()[0].startswith("demo-")  # the set's ids
    code, out, err = cli(lab_dir, "labels", "export", "--format", "qrels", "--adjudicated", "--out",
                         str(tmp_path / "adj"))
    assert code == 0 and f"{len(differ) - 1} unresolved ties left out" in err
    lines = (tmp_path / "adj" / "qrels.txt").read_text().splitlines()
    assert len(lines) == len(blind) - (len(differ) - 1)
    code, _, _ = cli(lab_dir, "labels", "export", "--adjudicated", "--include-ties", "--out", str(tmp_path / "all"))
    assert (tmp_path / "all" / "qrels.txt").read_text().count("\n") == len(blind)

    code, out, err = cli(lab_dir, "eval-labels", "--json", "--k", f"2,{DEPTH}", "--compare", "graph,vector",
                         "--set", "demo", "--rerankers", "none,mmr,graph")
    assert code == 0, err
    ev = json.loads(out)
    assert [s["system"] for s in ev["systems"]] == systems
    for s in ev["systems"]:
        assert s["unjudged"][str(DEPTH)] == 0, s  # pooled at depth k: every top-k item is judged
        for m in s["metrics"].values():
            assert m["ci_low"] <= m["value"] <= m["ci_high"]
    assert {c["measure"] for c in ev["comparisons"]} == {"nDCG@2", "P@2", "R@2", f"nDCG@{DEPTH}", f"P@{DEPTH}",
                                                          f"R@{DEPTH}", "RR"}
    assert all(0 <= c["p_value"] <= 1 and (c["a"], c["b"]) == ("graph", "vector") for c in ev["comparisons"])
    assert ev["unresolved"] == len(differ) - 1

    for args, message in [
        (("eval-labels", "--compare", "graph,nope", "--modes", "graph", "--rerankers", "off"), "no system nope"),
        (("labels", "pool", "--modes", "kg,nope"), "unknown mode(s) nope"),
        (("labels", "pool", "--rerankers", "magic"), "unknown reranker(s) magic"),
        (("labels", "export", "--annotator", "ana", "--adjudicated"), "exclude each other"),
        (("labels", "adjudicate", "demo-9", "chunk:x", "1", "--set", "demo"), "no labels for query 'demo-9'"),
        (("labels", "queries", "import", str(tmp_path / "ana.txt")), "ana.txt:1: line: expected"),
    ]:
        code, out, err = cli(lab_dir, *args)
        assert code == 2 and message in err, (args, out, err)
