"""Synthetic power-law bundles: deterministic, complete, referentially sound, heavy-tailed, loadable."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from bench.synth import ENTITY_TYPES, RELATION_TYPES, write_synth_bundle
from retrieval.errors import ValidationError
from retrieval.ingest.bundle import load_bundle

FILES = ("documents.jsonl", "chunks.jsonl", "entities.jsonl", "relations.jsonl")


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synth") / "b"
    write_synth_bundle(out, entities=1_000, relations=8_000, chunks=300, seed=7)
    return out


def test_same_seed_same_bytes_other_seed_differs(tmp_path: Path, bundle: Path) -> None:
    again = tmp_path / "again"
    other = tmp_path / "other"
    write_synth_bundle(again, entities=1_000, relations=8_000, chunks=300, seed=7)
    write_synth_bundle(other, entities=1_000, relations=8_000, chunks=300, seed=8)
    for name in FILES:
        assert (again / name).read_bytes() == (bundle / name).read_bytes(), name
    assert (other / "relations.jsonl").read_bytes() != (bundle / "relations.jsonl").read_bytes()


def test_counts_types_and_summary(tmp_path: Path) -> None:
    summary = write_synth_bundle(tmp_path / "s", entities=300, relations=2_500, chunks=90, seed=1, books=4)
    ents = _rows(tmp_path / "s" / "entities.jsonl")
    rels = _rows(tmp_path / "s" / "relations.jsonl")
    chunks = _rows(tmp_path / "s" / "chunks.jsonl")
    docs = _rows(tmp_path / "s" / "documents.jsonl")
    assert (len(ents), len(rels), len(chunks), len(docs)) == (300, 2_500, 90, 4)
    assert summary.books == len({c["original_document"] for c in chunks}) == 4
    assert summary.chapters == len({(c["original_document"], c["chapter"]) for c in chunks}) > 4
    assert len({e["name"] for e in ents}) == 300  # names unique
    assert {e["type"] for e in ents} <= set(ENTITY_TYPES) and len({e["type"] for e in ents}) > 5
    assert {r["relation_type"] for r in rels} == set(RELATION_TYPES)  # all 50 used at this size
    assert all(r["description"].endswith(".") and r["description"].count(".") == 1 for r in rels)
    assert all(r["source_id"] != r["target_id"] for r in rels)


def test_referential_integrity_and_native_loader(bundle: Path) -> None:
    ents = {e["id"] for e in _rows(bundle / "entities.jsonl")}
    chunks = {c["id"]: c for c in _rows(bundle / "chunks.jsonl")}
    books = {d["title"] for d in _rows(bundle / "documents.jsonl")}
    rels = _rows(bundle / "relations.jsonl")
    assert all(r["source_id"] in ents and r["target_id"] in ents for r in rels)
    assert all(c in chunks for r in rels for c in r["source_chunks"])
    assert {c["original_document"] for c in chunks.values()} == books
    # a chunk's text carries the descriptions of the relations it sources
    first = rels[0]
    assert first["description"] in chunks[first["source_chunks"][0]]["text"]
    data = load_bundle(bundle)  # the project's own validating reader accepts it
    assert (len(data.entities), len(data.relations), len(data.chunks)) == (1_000, 8_000, 300)


def test_degree_distribution_is_heavy_tailed(bundle: Path) -> None:
    rels = _rows(bundle / "relations.jsonl")
    degree = Counter[str]()
    for r in rels:
        degree[r["source_id"]] += 1
        degree[r["target_id"]] += 1
    deg = np.array(sorted(degree.values(), reverse=True), dtype=float)
    mean = 2 * len(rels) / 1_000
    # A uniform random graph of this size has max degree ~ 2x the mean; a Zipf(0.7) one ~ 20x.
    assert deg[0] > 10 * mean
    top1 = deg[: len(deg) // 100].sum() / deg.sum()
    assert top1 > 0.08  # uniform would give ~0.015
    assert len(degree) == 1_000  # every entity takes part in some relation (relations >= entities)


def test_rejects_empty_sizes(tmp_path: Path) -> None:
    with pytest.raises(ValidationError):
        write_synth_bundle(tmp_path / "x", entities=1, relations=10, chunks=1)
