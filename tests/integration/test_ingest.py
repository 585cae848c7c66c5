"""Ingest on the real embedded stack (Kuzu, Milvus Lite, packaged MiniLM) in temporary data dirs."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from retrieval.cli import data as data_cli
from retrieval.config import Settings
from retrieval.embedding import Embedder
from retrieval.errors import IngestError, StoreError
from retrieval.graph import bm25, catalog
from retrieval.graph.runtime import KG, open_kg
from retrieval.ingest import IngestOptions
from retrieval.ingest.build import IngestReport, build_graph, ingest
from retrieval.ingest.bundle import load_bundle
from retrieval.ingest.versions import writer_lock
from retrieval.stores.base import CHUNKS, ENTITIES, RELATIONS

pytestmark = pytest.mark.integration

SMALL = Path(__file__).resolve().parents[1] / "data" / "bundles" / "small"
COUNTS = {"books": 2, "chapters": 3, "chunks": 5, "entities": 11, "relations": 12}
HOSTILE = [
    'He said "hi" and \'bye\'',
    '"}) MATCH (n) DETACH DELETE n //',
    "x' OR 1=1 RETURN n --",
    "<script>alert(1)</script>",
    "Ünïcödé ∑ 日本語 🙂 e\u0301 \u202eRTL\t tab  ",
    "back\\slash $param {{braces}} `tick`",
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> tuple[Path, IngestReport]:
    """The small bundle built once as graph 'small'; tests work on copies of its data dir."""
    settings = Settings.from_env(env={}, data_dir=tmp_path_factory.mktemp("built") / "kg")
    return settings.data_dir, ingest(settings, SMALL, fmt="bundle", name="small", embedder=embedder, progress=False)


@pytest.fixture
def live(built: tuple[Path, IngestReport], settings: Settings) -> catalog.GraphHandle:
    """A copy of the built data dir at `settings.data_dir` (the graphs/ links are relative, so they follow)."""
    shutil.copytree(built[0], settings.data_dir, symlinks=True)
    return catalog.resolve(settings.data_dir, "small")


def copy_bundle(tmp_path: Path, name: str = "bundle") -> Path:
    dst = tmp_path / name
    shutil.copytree(SMALL, dst)
    return dst


def rewrite(path: Path, fn: Callable[[int, dict[str, Any]], dict[str, Any]]) -> None:
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    path.write_text("\n".join(json.dumps(fn(i, obj)) for i, obj in enumerate(lines)) + "\n", encoding="utf-8")


def versions(settings: Settings) -> list[str]:
    return sorted(p.name for p in (settings.data_dir / "versions").iterdir())


@contextmanager
def opened(settings: Settings, name: str, embedder: Embedder) -> Iterator[KG]:
    kg = open_kg(settings, name, embedder=embedder)
    try:
        yield kg
    finally:
        kg.close()


def assert_usable(kg: KG) -> None:
    """The graph answers: counts, name lookup, vector search and BM25."""
    got = kg.graph.counts()
    assert {k: got[k] for k in COUNTS} == COUNTS
    assert {c: kg.vectors.count(c) for c in (ENTITIES, RELATIONS, CHUNKS)} == {ENTITIES: 11, RELATIONS: 12, CHUNKS: 5}
    assert [e.id for e in kg.graph.find_entities("Price elasticity")] == ["price_elasticity"]
    hits = kg.vectors.search(ENTITIES, kg.embedder.embed(["how demand reacts to price"]), 3)[0]
    assert hits and hits[0].id == "price_elasticity"
    assert bm25.search(kg.bm25, "penetration pricing market share", 1)[0][0] == "c2"


def test_build_then_reingest_is_idempotent(
    built: tuple[Path, IngestReport], live: catalog.GraphHandle, settings: Settings, embedder: Embedder
) -> None:
    first = built[1]
    assert not first.unchanged and {k: first.counts[k] for k in COUNTS} == COUNTS
    assert first.counts["communities"] >= 1  # computed (Leiden): the bundle brings none
    assert first.version.split("-")[0] == first.handle.manifest["content_hash"][:12]
    assert first.handle.manifest["dim"] == embedder.dim
    with opened(settings, "small", embedder) as kg:
        assert_usable(kg)
        chunk = kg.vectors.get(CHUNKS, ["c5"])[0]
        assert (chunk["original_document"], chunk["chapter"], chunk["author"], chunk["position"]) == (
            "Brand Notes", "Equity", "C. Guest", 1
        )
    again = ingest(settings, SMALL, fmt="bundle", name="small", embedder=embedder, progress=False)
    assert again.unchanged and again.version == first.version == live.version
    assert again.handle.dir == live.dir
    assert versions(settings) == [live.dir.name]


def test_changed_input_swaps_version_and_retires_old_ones(
    live: catalog.GraphHandle, settings: Settings, embedder: Embedder, tmp_path: Path
) -> None:
    neighbour = ingest(settings, SMALL, name="small-2", embedder=embedder, progress=False)  # a NAME-* lookalike
    bundle = copy_bundle(tmp_path)
    rewrite(bundle / "entities.jsonl", lambda i, o: {**o, "description": o["description"] + " v2"} if i == 0 else o)
    v2 = ingest(settings, bundle, name="small", embedder=embedder, progress=False)
    assert v2.version != live.version and not v2.unchanged
    assert catalog.resolve(settings.data_dir, "small").version == v2.version
    assert live.dir.name in versions(settings)  # the previous version stays for readers that hold it
    rewrite(bundle / "entities.jsonl", lambda i, o: {**o, "description": o["description"] + " v3"} if i == 0 else o)
    v3 = ingest(settings, bundle, name="small", embedder=embedder, progress=False)
    # live + the one before stay; older ones go; another graph's versions are never touched
    assert versions(settings) == sorted([neighbour.handle.dir.name, v2.handle.dir.name, v3.handle.dir.name])
    with opened(settings, "small", embedder) as kg:
        assert kg.graph.get_entities(["price_elasticity"])[0].description.endswith(" v2 v3")


def test_malformed_input_leaves_the_old_graph_live(
    live: catalog.GraphHandle, settings: Settings, embedder: Embedder, tmp_path: Path
) -> None:
    bad = copy_bundle(tmp_path, "bad")
    text = (bad / "relations.jsonl").read_text(encoding="utf-8").splitlines()
    text[6] = text[6].replace('"brand_equity"', '"nobody"')
    (bad / "relations.jsonl").write_text("\n".join(text), encoding="utf-8")
    with pytest.raises(IngestError) as info:
        ingest(settings, bad, name="small", embedder=embedder, progress=False)
    assert str(info.value) == f"{bad / 'relations.jsonl'}:7: target_id: unknown entity id 'nobody'"
    assert catalog.resolve(settings.data_dir, "small").version == live.version
    assert versions(settings) == [live.dir.name]
    with opened(settings, "small", embedder) as kg:
        assert_usable(kg)


class FailingEmbedder:
    """The real model, failing on its second call: a crash half-way through writing vectors."""

    def __init__(self, inner: Embedder) -> None:
        self.name, self.dim, self.inner, self.calls = inner.name, inner.dim, inner, 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("disk full")
        return self.inner.embed(texts)


def test_failure_half_way_discards_the_build(
    live: catalog.GraphHandle, settings: Settings, embedder: Embedder, tmp_path: Path
) -> None:
    changed = copy_bundle(tmp_path)
    rewrite(changed / "chunks.jsonl", lambda i, o: {**o, "text": o["text"] + " More."})
    # descriptions changed too: a rebuild embeds only changed texts (the rest keep the live version's vectors),
    # so two collections need the model and the second call fails
    rewrite(changed / "entities.jsonl", lambda i, o: {**o, "description": o.get("description", "") + " Revised."})
    failing = FailingEmbedder(embedder)
    with pytest.raises(StoreError, match="ingest of graph 'small' failed, previous version kept: disk full"):
        ingest(settings, changed, name="small", embedder=failing, progress=False)
    assert failing.calls == 2  # the graph and the first collection were written, then it failed
    assert versions(settings) == [live.dir.name]  # no .build-* left behind
    with opened(settings, "small", embedder) as kg:
        assert_usable(kg)
        assert "More." not in kg.vectors.get(CHUNKS, ["c1"])[0]["text"]


def test_hostile_strings_round_trip_byte_identical(settings: Settings, embedder: Embedder, tmp_path: Path) -> None:
    bundle = copy_bundle(tmp_path)
    n = len(HOSTILE)
    rewrite(bundle / "entities.jsonl",
            lambda i, o: {**o, "name": HOSTILE[i % n], "description": HOSTILE[(i + 1) % n]} if i < n else o)
    rewrite(bundle / "relations.jsonl", lambda i, o: {**o, "description": HOSTILE[i % n]} if i < n else o)
    rewrite(bundle / "chunks.jsonl", lambda i, o: {**o, "text": HOSTILE[i % n], "chapter": HOSTILE[-1 - i]})
    data = load_bundle(bundle)
    report = build_graph(settings, data, "hostile", embedder=embedder, progress=False)
    with opened(settings, "hostile", embedder) as kg:
        before = kg.graph.counts()
        assert {k: before[k] for k in ("entities", "relations", "chunks")} == {
            k: report.counts[k] for k in ("entities", "relations", "chunks")
        }
        ids = [e.id for e in data.entities]
        stored = {e.id: e for e in kg.graph.get_entities(ids)}
        rows = {r["id"]: r for r in kg.vectors.get(ENTITIES, ids)}
        for e in data.entities:
            assert (stored[e.id].name, stored[e.id].description) == (e.name, e.description)
            assert (rows[e.id]["name"], rows[e.id]["text"]) == (e.name, f"{e.name}: {e.description}")
        rel_ids = [r.id for r in data.relations]
        stored_rels = {r.id: r for r in kg.graph.get_relations(rel_ids)}
        rel_rows = {r["id"]: r for r in kg.vectors.get(RELATIONS, rel_ids)}
        for r in data.relations:
            assert stored_rels[r.id].description == r.description == rel_rows[r.id]["text"]
        chunk_rows = {r["id"]: r for r in kg.vectors.get(CHUNKS, [c.id for c in data.chunks])}
        for c in data.chunks:
            assert (chunk_rows[c.id]["text"], chunk_rows[c.id]["chapter"]) == (c.text, c.chapter)
        # hostile strings as query input match literally (or not at all) and change nothing
        for text in HOSTILE:
            assert all(e.name.lower() == text.lower() for e in kg.graph.find_entities(text))
            kg.graph.find_entities(text, fuzzy=True)
            assert kg.graph.get_entities([text]) == []
            assert kg.vectors.get(ENTITIES, [text]) == []
        assert [e.id for e in kg.graph.find_entities(HOSTILE[1])] == [data.entities[1].id]
        assert kg.graph.counts() == before
        assert {c: kg.vectors.count(c) for c in (ENTITIES, RELATIONS, CHUNKS)} == {
            ENTITIES: 11, RELATIONS: 12, CHUNKS: 5
        }


def test_second_writer_is_refused(settings: Settings, embedder: Embedder) -> None:
    with writer_lock(settings.data_dir), pytest.raises(StoreError, match="another ingest is writing"):
        ingest(settings, SMALL, name="small", embedder=embedder, progress=False)
    assert catalog.list_graphs(settings.data_dir) == []


def test_cli_ingest_stats_graphs_use(live: catalog.GraphHandle, settings: Settings, tmp_path: Path) -> None:
    app = typer.Typer()
    data_cli.register(app)
    runner = CliRunner()
    dd = str(settings.data_dir)

    out = runner.invoke(app, ["stats", "--json", "--data-dir", dd], env={})
    assert out.exit_code == 0, out.output
    stats = json.loads(out.stdout)
    assert {k: stats[k] for k in ("name", "version", *COUNTS)} == {"name": "small", "version": live.version, **COUNTS}
    assert (stats["graph_backend"], stats["vector_backend"]) == ("kuzu", "milvus")
    assert stats["vectors"] == {ENTITIES: 11, RELATIONS: 12, CHUNKS: 5}

    bad = copy_bundle(tmp_path, "bad")
    (bad / "entities.jsonl").write_text('{"id": "x"}\n', encoding="utf-8")
    out = runner.invoke(app, ["ingest", str(bad), "--name", "small", "--data-dir", dd, "--no-progress"], env={})
    assert out.exit_code == 2
    assert out.stderr.strip() == f"error: {bad / 'entities.jsonl'}:1: name: missing required field"

    env = {"KG_EMBED_MODEL": ""}  # the packaged MiniLM, loaded by the command itself
    out = runner.invoke(app, ["ingest", str(SMALL), "--name", "other", "--data-dir", dd, "--no-progress"], env=env)
    assert out.exit_code == 0, out.output
    assert out.stdout.startswith("built graph 'other' version ") and " wall " in out.stdout

    out = runner.invoke(app, ["graphs", "--data-dir", dd])
    lines = out.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("  other ") and lines[1].startswith(f"* small  {live.version}  ")
    assert runner.invoke(app, ["use", "other", "--data-dir", dd]).exit_code == 0
    assert catalog.active_name(settings.data_dir) == "other"
    out = runner.invoke(app, ["use", "nope", "--data-dir", dd])
    assert out.exit_code == 2 and "no graph named 'nope'" in out.stderr
    out = runner.invoke(app, ["stats", "--data-dir", str(tmp_path / "empty")])
    assert out.exit_code == 2 and "build one with `python -m retrieval demo`" in out.stderr


class Cancel(BaseException):
    """What a cancel raises in the progress callback (the app's Cancel: Streamlit's script-control exception,
    a BaseException; Ctrl-C: KeyboardInterrupt)."""


def test_a_cancelled_import_leaves_the_live_graph(
    live: catalog.GraphHandle, settings: Settings, embedder: Embedder, tmp_path: Path
) -> None:
    import threading

    changed = copy_bundle(tmp_path)
    rewrite(changed / "relations.jsonl", lambda i, o: {**o, "description": o.get("description", "") + " Changed."})
    heard: list[tuple[str, int, int]] = []

    def report(stage: str, done: int, total: int) -> None:
        heard.append((stage, done, total))
        if stage == f"embedding {RELATIONS}":
            raise Cancel  # mid-way: the graph store is written, the entities' vectors inserted

    with pytest.raises(Cancel):  # passes through unchanged, not wrapped in a StoreError
        ingest(settings, changed, name="small", embedder=embedder, progress=False,
               options=IngestOptions(settings=settings, progress=report))
    assert ("graph store", 1, 1) in heard and heard[-1][0] == f"embedding {RELATIONS}"
    assert not [t for t in threading.enumerate() if t.name == "kg-embed"]  # the embedding thread stopped
    assert catalog.resolve(settings.data_dir, "small").version == live.version
    assert versions(settings) == [live.dir.name]  # no .build-* left behind
    with opened(settings, "small", embedder) as kg:
        assert_usable(kg)
        texts = [r["text"] for r in kg.vectors.get(RELATIONS, kg.graph.export_edges().relation_ids)]
        assert len(texts) == 12 and not [t for t in texts if "Changed." in t]


def test_every_stage_reports_its_count(settings: Settings, embedder: Embedder) -> None:
    heard: list[tuple[str, int, int]] = []
    ingest(settings, SMALL, fmt="bundle", name="small", embedder=embedder, progress=False,
           options=IngestOptions(settings=settings, progress=lambda *event: heard.append(event)))
    last = {stage: (done, total) for stage, done, total in heard}
    for stage, total in ((f"embedding {ENTITIES}", 11), (f"embedding {RELATIONS}", 12), (f"embedding {CHUNKS}", 5)):
        assert last[stage] == (total, total)
        counts = [done for s, done, _ in heard if s == stage]
        assert counts == sorted(counts)  # never backwards
    for stage in ("communities", "graph store", "BM25 index", "vector index", "committing"):
        assert last[stage] == (1, 1)
