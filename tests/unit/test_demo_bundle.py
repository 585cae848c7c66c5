"""The demo marketing library (data/demo) meets the issue's minimums and is a sound, connected graph."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from collections.abc import Iterator
from itertools import combinations
from types import ModuleType
from typing import Any

import networkx as nx
import pytest

from retrieval.ingest.bundle import load_bundle
from tests.conftest import DEMO_BUNDLE


@pytest.fixture(scope="module")
def builder() -> Iterator[ModuleType]:
    """data/demo/build_demo.py as a module: its vocabularies and its deterministic build()."""
    spec = importlib.util.spec_from_file_location("build_demo", DEMO_BUNDLE / "build_demo.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["build_demo"] = module  # dataclasses look their module up here
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules["build_demo"]


def _jsonl(name: str) -> list[dict[str, Any]]:
    lines = (DEMO_BUNDLE / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


@pytest.fixture(scope="module")
def bundle() -> dict[str, list[dict[str, Any]]]:
    return {name: _jsonl(name) for name in ("documents", "chunks", "entities", "relations")}


@pytest.fixture(scope="module")
def questions() -> list[dict[str, Any]]:
    data = json.loads((DEMO_BUNDLE / "questions.json").read_text(encoding="utf-8"))
    assert isinstance(data, list)
    return data


@pytest.fixture(scope="module")
def graph(bundle: dict[str, list[dict[str, Any]]]) -> nx.Graph:
    g = nx.Graph()
    g.add_nodes_from(e["id"] for e in bundle["entities"])
    g.add_edges_from((r["source_id"], r["target_id"]) for r in bundle["relations"])
    return g


def _names(entity: dict[str, Any]) -> list[str]:
    return [entity["name"].lower(), *(a.lower() for a in entity.get("aliases", []))]


def test_minimum_sizes(bundle: dict[str, list[dict[str, Any]]]) -> None:
    chapters = {(c["original_document"], c["chapter"]) for c in bundle["chunks"]}
    assert len(bundle["documents"]) >= 3
    assert len(chapters) >= 15
    assert len(bundle["chunks"]) >= 90
    assert len(bundle["entities"]) >= 200
    assert len(bundle["relations"]) >= 400


def test_documents_and_chunks_are_well_formed(bundle: dict[str, list[dict[str, Any]]]) -> None:
    docs = {d["title"]: d for d in bundle["documents"]}
    assert all(d["author"] and d["description"] for d in docs.values())
    ids = [c["id"] for c in bundle["chunks"]]
    assert len(ids) == len(set(ids))
    for c in bundle["chunks"]:
        assert c["original_document"] in docs, c["id"]
        assert c["author"] == docs[c["original_document"]]["author"]
        assert c["chapter"]
        assert isinstance(c["position"], int) and c["position"] >= 0
        assert 60 <= len(c["text"].split()) <= 150, c["id"]
    # positions order each book without gaps
    for title in docs:
        positions = sorted(c["position"] for c in bundle["chunks"] if c["original_document"] == title)
        assert positions == list(range(len(positions)))


def test_entities_are_typed_described_and_named_in_text(
    bundle: dict[str, list[dict[str, Any]]], builder: ModuleType
) -> None:
    ids = [e["id"] for e in bundle["entities"]]
    assert len(ids) == len(set(ids))
    texts = [c["text"].lower() for c in bundle["chunks"]]
    chunk_ids = {c["id"] for c in bundle["chunks"]}
    for e in bundle["entities"]:
        assert e["type"] in builder.ENTITY_TYPES, e["id"]
        assert e["description"].endswith("."), e["id"]
        assert any(e["name"].lower() in t for t in texts), f"{e['name']!r} never appears in a chunk"
        assert set(e["source_chunks"]) <= chunk_ids
    assert Counter(e["type"] for e in bundle["entities"]).keys() >= {"concept", "metric", "person", "organisation"}


def test_relations_resolve_and_are_supported(bundle: dict[str, list[dict[str, Any]]], builder: ModuleType) -> None:
    entities = {e["id"]: e for e in bundle["entities"]}
    chunks = {c["id"]: c["text"].lower() for c in bundle["chunks"]}
    ids = [r["id"] for r in bundle["relations"]]
    assert len(ids) == len(set(ids))
    for r in bundle["relations"]:
        assert r["source_id"] in entities and r["target_id"] in entities, r["id"]
        assert r["relation_type"] in builder.RELATION_TYPES, r["id"]
        assert r["description"].endswith(".") and len(r["description"].split()) >= 6, r["id"]
        assert r["source_chunks"] and all(c in chunks for c in r["source_chunks"]), r["id"]
        src, tgt = _names(entities[r["source_id"]]), _names(entities[r["target_id"]])
        assert any(any(n in chunks[c] for n in src) and any(n in chunks[c] for n in tgt) for c in r["source_chunks"]), (
            f"no source chunk of {r['id']} names both ends"
        )
    assert len({r["relation_type"] for r in bundle["relations"]}) >= 10


def test_graph_is_one_giant_component_with_cross_book_links(
    bundle: dict[str, list[dict[str, Any]]], graph: nx.Graph
) -> None:
    giant = max(nx.connected_components(graph), key=len)
    assert len(giant) >= 0.9 * graph.number_of_nodes()
    book_of = {c["id"]: c["original_document"] for c in bundle["chunks"]}
    per_book: dict[str, set[str]] = {}
    for r in bundle["relations"]:
        for c in r["source_chunks"]:
            per_book.setdefault(book_of[c], set()).update((r["source_id"], r["target_id"]))
    for a, b in combinations(sorted(per_book), 2):
        assert len(per_book[a] & per_book[b]) >= 5, f"{a} and {b} share too few entities"


def test_questions_reach_their_answers(
    questions: list[dict[str, Any]], bundle: dict[str, list[dict[str, Any]]], graph: nx.Graph
) -> None:
    assert 12 <= len(questions) <= 20
    by_name = {e["name"].lower(): e for e in bundle["entities"]}
    kinds = Counter(q["kind"] for q in questions)
    assert set(kinds) <= {"multi-hop", "single"} and kinds["multi-hop"] >= 8
    for q in questions:
        asked = [by_name[n.lower()] for n in q["entities"]]  # KeyError names the unknown entity
        expected = [by_name[n.lower()] for n in q["expected_entities"]]
        assert expected and asked
        text = q["question"].lower()
        for e in asked:
            assert any(n in text for n in _names(e)), f"{q['question']!r} does not mention {e['name']!r}"
        # the answer lies on a path through the expected entities
        nodes = {e["id"] for e in asked + expected}
        assert nx.is_connected(graph.subgraph(nodes)), q["question"]
        if q["kind"] == "multi-hop":
            assert nodes - {e["id"] for e in asked}, q["question"]


def test_jsonl_is_what_the_generator_writes(bundle: dict[str, list[dict[str, Any]]], builder: ModuleType) -> None:
    """The committed JSONL must match data/demo/build_demo.py + src/ (no hand edits, no stale build)."""
    assert builder.build() == bundle


def test_load_bundle_reads_the_demo(bundle: dict[str, list[dict[str, Any]]]) -> None:
    data = load_bundle(DEMO_BUNDLE)
    assert len(data.entities) == len(bundle["entities"])
    assert len(data.relations) == len(bundle["relations"])
    assert len(data.chunks) == len(bundle["chunks"])
    rel = next(r for r in data.relations if r.id == "price-sensitivity--enables--penetration-pricing")
    assert rel.source_chunk == "pricing-ch2-03"
    chunk = next(c for c in data.chunks if c.id == "pricing-ch2-03")
    assert chunk.original_document == "The Price Is a Promise" and chunk.author == "Miriam Okafor"
