"""Curation parity: the same edits on Kuzu + Milvus Lite and on FalkorDB + a Milvus server give the same graph,
duplicates, searches and history, and undo back to the same start; on the server pair a change made by another
process (the CLI) reaches an open graph on its next action."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from retrieval.config import Settings
from retrieval.curation.apply import Curator
from retrieval.curation.duplicates import find_duplicates
from retrieval.curation.ops import AddRelation, DeleteRelation, MergeEntities, RenameEntity, ReverseRelation
from retrieval.embedding import Embedder
from retrieval.graph.index import name_matcher
from retrieval.graph.runtime import KG, open_kg
from retrieval.ingest.build import build_graph
from retrieval.ingest.graphrag import load_graphrag
from retrieval.search.retriever import search
from retrieval.stores.base import ENTITIES
from tests.conftest import DULCE, ROOT
from tests.server.test_parity import ARTIFACTS, PAIRS, CachingEmbedder, _settings

pytestmark = [pytest.mark.server, pytest.mark.integration]


@pytest.fixture(scope="module")
def dulce_embedder(embedder: Embedder) -> Iterator[CachingEmbedder]:
    cached = CachingEmbedder(embedder, ARTIFACTS / f"curation-embeddings-{embedder.name.replace('/', '_')}.npz")
    yield cached
    cached.save()


def state(kg: KG) -> tuple[object, ...]:
    a = kg.index.arrays
    entities = sorted((e.id, e.name, e.type, e.description, e.aliases, e.source_chunks)
                      for e in kg.graph.get_entities(a.node_ids))
    relations = sorted((r.id, r.source_id, r.target_id, r.relation_type, r.description, r.weight, r.source_chunks)
                       for r in kg.graph.get_relations(a.relation_ids))
    return entities, relations


def edit_and_undo(kg: KG) -> dict[str, object]:
    """The same edits on one back-end pair; what the graph says after them and after undoing them."""
    cur = Curator(kg)
    ids = {n: i for i, n in zip(kg.index.arrays.node_ids, kg.index.arrays.node_names, strict=True)}
    start = state(kg)
    found = [(c.keep_name, c.other_name) for c in find_duplicates(kg, limit=10)]
    cur.apply([MergeEntities(entity_ids=(ids["TAYLOR CRUZ"], ids["CRUZ"]))], author="ana")
    cur.apply([RenameEntity(entity_id=ids["SAM RIVERA"], name="Sam Rivera")], author="ana")
    added = cur.apply([AddRelation(source_id=ids["ALEX MERCER"], target_id=ids["JORDAN HAYES"],
                                   relation_type="MENTORS", description="Alex Mercer mentors Jordan Hayes.")],
                      author="ana")
    rel = next(c.id for c in added.changes if c.kind == "relation")
    cur.apply([ReverseRelation(relation_id=rel)], author="ana")
    cur.apply([DeleteRelation(relation_id=min(kg.index.arrays.relation_ids))], author="ana")  # same on both
    edited = state(kg)
    answer = search(kg, "What did Taylor Cruz do with Sam Rivera?")
    facts = sorted(f.id for f in answer.facts)
    history = [(h.action, h.author) for h in cur.history("entity", ids["CRUZ"])]
    merged_vec = kg.vectors.vectors(ENTITIES, [ids["CRUZ"]])
    for _ in range(5):
        cur.undo(author="ben")
    return {"start": start, "found": found, "edited": edited, "facts": facts, "history": history,
            "cruz_vector_gone": not merged_vec.any(), "undone": state(kg), "seeds": answer.seed_ids}


@pytest.mark.skipif(not DULCE.is_dir(), reason=f"shared GraphRAG index not found at {DULCE}")
def test_the_same_curation_on_both_back_end_pairs(tmp_path_factory: pytest.TempPathFactory, falkordb_url: str,
                                                   milvus_uri: str, dulce_embedder: CachingEmbedder) -> None:
    data = load_graphrag(DULCE)
    out = {}
    for pair in PAIRS:
        settings = _settings(pair, tmp_path_factory.mktemp(pair.replace("+", "_")), falkordb_url, milvus_uri)
        build_graph(settings, data, "dulce", embedder=dulce_embedder, progress=False)
        kg = open_kg(settings, "dulce", embedder=dulce_embedder)
        try:
            kg.vectors.wait_ready()
            out[pair] = edit_and_undo(kg)
        finally:
            kg.close()
    lite, server = (out[p] for p in PAIRS)
    assert ("TAYLOR CRUZ", "CRUZ") in lite["found"] and ("SAM RIVERA", "RIVERA") in lite["found"]
    assert set(lite["found"][:6]) == set(server["found"][:6])
    for key in ("edited", "facts", "history", "cruz_vector_gone", "seeds"):
        assert lite[key] == server[key], key
    assert lite["cruz_vector_gone"] and lite["history"] == [("edit", "ana")]
    assert lite["undone"] == lite["start"] and server["undone"] == server["start"] == lite["start"]


def test_an_edit_by_another_process_reaches_an_open_graph(tmp_path: Path, falkordb_url: str, milvus_uri: str,
                                                         embedder: Embedder) -> None:
    from retrieval.ingest.bundle import load_bundle
    from tests.conftest import DEMO_BUNDLE

    settings: Settings = _settings(PAIRS[1], tmp_path / "kg", falkordb_url, milvus_uri)
    build_graph(settings, load_bundle(DEMO_BUNDLE), "demo", embedder=embedder, progress=False)
    app = open_kg(settings, "demo", embedder)  # the app's open graph, its index built
    try:
        cur = Curator(app)
        assert name_matcher(app.index).find("price elasticity")
        env = {"KG_DATA_DIR": str(settings.data_dir), "KG_GRAPH_BACKEND": "falkordb", "KG_FALKORDB_URL": falkordb_url,
               "KG_MILVUS_URI": milvus_uri, "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
        done = subprocess.run([sys.executable, "-m", "retrieval", "edit", "rename", "price-elasticity",
                               "elasticity of price", "--author", "cli"], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        assert "name: 'price elasticity' → 'elasticity of price'" in done.stdout
        before = app.revision
        assert cur.refresh() and app.revision != before  # the app's next action catches up
        found = [app.index.arrays.node_ids[m.idx] for m in name_matcher(app.index).find("elasticity of price")]
        assert found == ["price-elasticity"]
        assert "price-elasticity" in search(app, "How does elasticity of price shape pricing?").seed_ids
        assert not cur.refresh()  # nothing new: one small read
    finally:
        app.close()
