"""Curation on the real embedded stack (Kuzu + Milvus Lite + the packaged MiniLM): merge, every edit, undo and
redo, history, grades that follow a merge, a re-import that keeps the corrections, documents added and removed,
bad input refused, and the CLI that prints what it changed."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from retrieval.config import Settings
from retrieval.curation.apply import Curator
from retrieval.curation.compile import NameTaken
from retrieval.curation.duplicates import find_duplicates
from retrieval.curation.items import graph_item_map
from retrieval.curation.ops import (
    AddAlias,
    AddDocuments,
    AddRelation,
    Changeset,
    DeleteEntity,
    DeleteRelation,
    MergeEntities,
    RemoveAlias,
    RenameEntity,
    ReverseRelation,
    SetEntityDescription,
    SetEntityType,
    SetRelationDescription,
    SetRelationType,
    SetRelationWeight,
)
from retrieval.embedding import Embedder
from retrieval.errors import ConflictError, NotFoundError, ValidationError
from retrieval.evaluation.follow import followed
from retrieval.evaluation.labels import LabelStore
from retrieval.explore.details import entity_details
from retrieval.graph.index import name_matcher, relation_nodes
from retrieval.graph.runtime import KG, open_kg
from retrieval.ingest.build import ingest
from retrieval.items import entity_item_id
from retrieval.models import Chunk, Entity, Relation
from retrieval.search.retriever import search
from retrieval.stores.base import ENTITIES, RELATIONS
from retrieval.stores.rows import entity_text
from tests.conftest import DULCE
from tests.data.hostile.make_bundle import load_payloads
from tests.property.test_index_patch import canonical

pytestmark = pytest.mark.integration


@pytest.fixture
def dulce(dulce_data_dir: Path, tmp_path: Path, embedder: Embedder) -> Iterator[tuple[Settings, KG, Curator]]:
    """A private copy of the ingested GraphRAG index, opened with its curator."""
    data = tmp_path / "kg"
    shutil.copytree(dulce_data_dir, data, symlinks=True)
    settings = Settings.from_env(env={}, data_dir=data)
    kg = open_kg(settings, "dulce", embedder)
    yield settings, kg, Curator(kg)
    kg.close()


@pytest.fixture
def demo(demo_data_dir: Path, tmp_path: Path, embedder: Embedder) -> Iterator[tuple[Settings, KG, Curator]]:
    data = tmp_path / "kg"
    shutil.copytree(demo_data_dir, data, symlinks=True)
    settings = Settings.from_env(env={}, data_dir=data)
    kg = open_kg(settings, "demo", embedder)
    yield settings, kg, Curator(kg)
    kg.close()


def ids_by_name(kg: KG) -> dict[str, str]:
    a = kg.index.arrays
    return dict(zip(a.node_names, a.node_ids, strict=True))


def same_as_a_fresh_open(settings: Settings, kg: KG, embedder: Embedder, query: str = "") -> None:
    """The patched in-memory index (and the memory graph patched with it) says what one built from the stores
    says: the same index, and the same search answer."""
    fresh = open_kg(settings, kg.name, embedder)
    try:
        assert canonical(kg.index) == canonical(fresh.index)
        if query:
            a, b = search(kg, query), search(fresh, query)
            assert [f.id for f in a.facts] == [f.id for f in b.facts] and a.seed_ids == b.seed_ids
            assert [round(f.scores.get("ppr", 0.0), 6) for f in a.facts] == [
                round(f.scores.get("ppr", 0.0), 6) for f in b.facts]
    finally:
        fresh.close()


def test_merge_on_the_graphrag_index_follows_search_history_and_grades_and_undoes(
    dulce: tuple[Settings, KG, Curator], embedder: Embedder
) -> None:
    settings, kg, cur = dulce
    search(kg, "Who leads the squad?")  # the memory graph and matcher exist: the merge patches them
    ids = ids_by_name(kg)
    tc, cruz, sam, rivera = ids["TAYLOR CRUZ"], ids["CRUZ"], ids["SAM RIVERA"], ids["RIVERA"]
    pairs = {(c.keep_name, c.other_name): c for c in find_duplicates(kg, limit=20)}
    assert ("TAYLOR CRUZ", "CRUZ") in pairs and ("SAM RIVERA", "RIVERA") in pairs
    assert "'CRUZ' is part of 'TAYLOR CRUZ'" in pairs[("TAYLOR CRUZ", "CRUZ")].evidence[0].detail

    preview = cur.merge_preview(MergeEntities(entity_ids=(tc, cruz)))
    assert set(preview.conflicts) >= {"name", "description"} and preview.entity.aliases == ("CRUZ",)
    assert preview.self_loops  # GraphRAG related TAYLOR CRUZ and CRUZ: that relation goes
    cruz_rels = [r.id for r in kg.graph.neighbourhood([cruz], hops=1, max_edges=500).edges
                 if cruz in (r.source_id, r.target_id)]
    labels = LabelStore.in_data_dir(settings.data_dir)
    labels.put_label("Who leads the squad?", entity_item_id(cruz), 3, graph_version=kg.version, annotator="ana")
    first = kg.revision

    cs = cur.apply([MergeEntities(entity_ids=(tc, cruz))], author="ana", reason="one agent")
    assert cs.state == "applied" and cs.author == "ana" and kg.revision != first
    assert cruz not in kg.index.id_to_idx and not kg.graph.get_entities([cruz])
    merged = kg.graph.get_entities([tc])[0]
    assert "CRUZ" in merged.aliases and kg.communities.of_entity(tc)
    kept = kg.graph.get_relations(cruz_rels)
    assert kept and all(tc in (r.source_id, r.target_id) for r in kept)
    for r in kept:  # the in-memory index moved them too
        s, t = relation_nodes(kg.index, r.id)
        assert {kg.index.arrays.node_ids[s], kg.index.arrays.node_ids[t]} == {r.source_id, r.target_id}
    same_as_a_fresh_open(settings, kg, embedder, "Who leads the squad with Taylor Cruz?")
    # only the merged entity's text was embedded again; CRUZ's vector is gone
    assert not kg.vectors.vectors(ENTITIES, [cruz]).any()
    assert float(kg.vectors.vectors(ENTITIES, [tc])[0] @ embedder.embed([entity_text(merged)])[0]) > 0.999
    result = search(kg, "What did Taylor Cruz do in the squad?")
    assert tc in result.seed_ids and cruz not in {n.id for n in result.subgraph.nodes}
    details = entity_details(kg.index, kg.graph, kg.vectors, tc, max_relations=100)
    assert set(cruz_rels) & {line.relation.id for line in details.relations}
    [entry] = cur.history("entity", cruz)
    assert entry.after is None and entry.into == tc and entry.author == "ana" and entry.reason == "one agent"
    # grades follow: the grade given to CRUZ counts for the merged entity
    mapped, gone = followed(settings.data_dir, "dulce", labels.all_labels())
    assert [lb.item_id for lb in mapped] == [entity_item_id(tc)] and not gone

    undone = cur.undo(author="ben")
    assert undone.action == "undo" and undone.target == cs.id and cur.log.get(cs.id).state == "undone"
    assert cruz in kg.index.id_to_idx and kg.graph.get_entities([cruz])[0].name == "CRUZ"
    assert {r.id for r in kg.graph.get_relations(cruz_rels)} == set(cruz_rels)
    assert all(cruz in (r.source_id, r.target_id) for r in kg.graph.get_relations(cruz_rels))
    assert kg.vectors.vectors(ENTITIES, [cruz]).any() and "CRUZ" not in kg.graph.get_entities([tc])[0].aliases
    same_as_a_fresh_open(settings, kg, embedder, "What did Cruz do?")
    assert graph_item_map(settings.data_dir, "dulce").follow(entity_item_id(cruz)).status == "same"

    cur.redo(author="ana")
    assert cruz not in kg.index.id_to_idx
    assert [h.action for h in cur.history("entity", cruz)] == ["edit", "undo", "redo"]
    # a second merge, of the other pair, in the same session
    cur.apply([MergeEntities(entity_ids=(sam, rivera))], author="ana")
    assert rivera not in kg.index.id_to_idx and name_matcher(kg.index).find("Rivera")
    same_as_a_fresh_open(settings, kg, embedder)


def test_every_edit_and_bad_input_on_the_demo_graph(demo: tuple[Settings, KG, Curator], embedder: Embedder) -> None:
    settings, kg, cur = demo
    search(kg, "How does price elasticity shape pricing?")  # built before the edits: they patch it
    pe, dc, rel = "price-elasticity", "demand-curve", "price-elasticity--depends_on--demand-curve"
    # entity edits
    cur.apply([RenameEntity(entity_id=pe, name="elasticity of price")], author="ana")
    assert [kg.index.arrays.node_ids[m.idx] for m in name_matcher(kg.index).find("about elasticity of price")] == [pe]
    with pytest.raises(NameTaken) as taken:
        cur.apply([RenameEntity(entity_id=pe, name="Demand Curve")], author="ana")
    assert taken.value.others[0].id == dc and "merge" in str(taken.value)
    cur.apply([SetEntityType(entity_id=pe, type="metric"), SetEntityDescription(entity_id=pe, description="How "
               "much demand moves when the price does."), AddAlias(entity_id=pe, alias="PED")], author="ana")
    e = kg.graph.get_entities([pe])[0]
    assert (e.type, e.description) == ("metric", "How much demand moves when the price does.")
    assert float(kg.vectors.vectors(ENTITIES, [pe])[0] @ embedder.embed([entity_text(e)])[0]) > 0.999
    assert kg.graph.find_entities("ped")[0].id == pe
    cur.apply([RemoveAlias(entity_id=pe, alias="PED")], author="ana")
    assert "PED" not in kg.graph.get_entities([pe])[0].aliases
    # relation edits
    cur.apply([SetRelationType(relation_id=rel, relation_type="SHAPED_BY"), SetRelationWeight(relation_id=rel,
               weight=2.5), SetRelationDescription(relation_id=rel, description="Sensitivity follows the curve.")],
              author="ana")
    r = kg.graph.get_relations([rel])[0]
    assert (r.relation_type, r.weight) == ("SHAPED_BY", 2.5)
    assert float(kg.vectors.vectors(RELATIONS, [rel])[0] @ embedder.embed([r.description])[0]) > 0.999
    cur.apply([ReverseRelation(relation_id=rel)], author="ana")
    s, t = relation_nodes(kg.index, rel)
    assert (kg.index.arrays.node_ids[s], kg.index.arrays.node_ids[t]) == (dc, pe)
    added = cur.apply([AddRelation(source_id=pe, target_id="penetration-pricing", relation_type="INFORMS",
                                   description="Elasticity informs penetration pricing.",
                                   source_chunk="pricing-ch2-01")], author="ana")
    new_rel = next(c.id for c in added.changes if c.kind == "relation")
    assert kg.graph.get_relations([new_rel])[0].source_chunks == ("pricing-ch2-01",)
    same_as_a_fresh_open(settings, kg, embedder, "How does elasticity of price inform penetration pricing?")
    # bad input: refused with a reason, nothing written
    before = cur.log.generation()
    bad = [
        (RenameEntity(entity_id=pe, name="   "), "must not be empty"),
        (RenameEntity(entity_id=pe, name="x" * 501), "limit is 500"),
        (RenameEntity(entity_id=pe, name="a\x00b"), "NUL"),
        (AddRelation(source_id=pe, target_id=pe, relation_type="SELF"), "self-loop"),
        (MergeEntities(entity_ids=(pe, pe)), "merged with itself"),
        (MergeEntities(entity_ids=(pe,)), "two or more"),
        (SetRelationWeight(relation_id=rel, weight=float("nan")), "weight"),
        (AddRelation(source_id=pe, target_id="penetration-pricing", relation_type="INFORMS"), "exists already"),
        (DeleteEntity(entity_id="no-such-entity"), "no entity"),
    ]
    for op, why in bad:
        with pytest.raises((ValidationError, NotFoundError), match=why):
            cur.apply([op], author="ana")
    assert cur.log.generation() == before
    # hostile strings are data: stored and read back literally, never run
    payloads = [p.value for p in load_payloads() if not p.reject][:12]
    for i, text in enumerate(payloads):
        cur.apply([SetEntityDescription(entity_id=dc, description=text[:2000] or "x")], author="ana")
        assert kg.graph.get_entities([dc])[0].description == (text[:2000] or "x").strip()
        if text.strip() and len(text) <= 500:
            cur.apply([RenameEntity(entity_id="penetration-pricing", name=f"{text} {i}")], author="ana")
            assert kg.graph.get_entities(["penetration-pricing"])[0].name == f"{text} {i}".strip()
    # two analysts at once: the second is told who changed it, and nothing of the first is lost
    seen = {("entity", dc): cur.revision("entity", dc)}
    cur.apply([RenameEntity(entity_id=dc, name="demand line")], author="ana", seen=seen)
    with pytest.raises(ConflictError, match="by ana"):
        cur.apply([RenameEntity(entity_id=dc, name="demand graph")], author="ben", seen=seen)
    assert kg.graph.get_entities([dc])[0].name == "demand line"
    # a pending draft keeps what it uses
    cur.add_to_draft(MergeEntities(entity_ids=(dc, pe)), author="ben")
    with pytest.raises(ConflictError, match="draft #"):
        cur.apply([DeleteEntity(entity_id=pe)], author="ana")
    cur.discard_draft(author="ben")
    deleted = cur.apply([DeleteEntity(entity_id=pe)], author="ana")
    assert pe not in kg.index.id_to_idx and not any(pe in c.entity_ids for c in kg.communities.communities)
    assert {c.id for c in deleted.changes if c.kind == "relation"} >= {rel, new_rel}
    # an undo whose records changed since is refused, naming the change to undo first
    with pytest.raises(ConflictError, match="undo #"):
        cur.undo(author="ana", changeset=added.id)
    cur.undo(author="ana")
    assert pe in kg.index.id_to_idx
    same_as_a_fresh_open(settings, kg, embedder)
    generation = cur.log.generation()
    with pytest.raises(NotFoundError, match="no relation"):  # the second sees the first's effect: all or nothing
        cur.apply([DeleteRelation(relation_id=rel), DeleteRelation(relation_id=rel)], author="ana")
    assert cur.log.generation() == generation and kg.graph.get_relations([rel])


def _modified_index(tmp: Path, title: str, description: str) -> Path:
    """A copy of the GraphRAG index with one entity's description changed upstream."""
    out = tmp / "dulce-v2"
    out.mkdir()
    for f in DULCE.glob("*.parquet"):
        shutil.copy(f, out / f.name)
    table = pq.read_table(out / "entities.parquet")
    cols = table.to_pydict()
    cols["description"][cols["title"].index(title)] = description
    pq.write_table(pa.table(cols, schema=table.schema), out / "entities.parquet")
    return out


def test_a_reimport_replays_the_log_and_reuses_unchanged_vectors(
    dulce: tuple[Settings, KG, Curator], tmp_path: Path, embedder: Embedder
) -> None:
    settings, kg, cur = dulce
    ids = ids_by_name(kg)
    merge = cur.apply([MergeEntities(entity_ids=(ids["TAYLOR CRUZ"], ids["CRUZ"]))], author="ana")
    rename = cur.apply([RenameEntity(entity_id=ids["SAM RIVERA"], name="Sam Rivera")], author="ana")
    retype = cur.apply([SetEntityDescription(entity_id=ids["ALEX MERCER"], description="The mission's lead.")],
                       author="ana")
    kg.close()
    same = ingest(settings, DULCE, fmt="graphrag", name="dulce", embedder=embedder, progress=False)
    assert same.unchanged and [ln.status for ln in same.replay] == ["applied"] * 3

    newer = _modified_index(tmp_path, "ALEX MERCER", "Alex Mercer, rewritten upstream.")
    report = ingest(settings, newer, fmt="graphrag", name="dulce", embedder=embedder, progress=False)
    assert not report.unchanged
    status = {ln.changeset: ln for ln in report.replay}
    assert status[merge.id].status == status[rename.id].status == "applied"
    assert status[retype.id].status == "skipped" and "changed upstream" in status[retype.id].reason
    # embedded again: the changed description, and the originals of texts the curation had changed in the live
    # version (the merged entities and relations, the renamed entity); every other text kept its vector
    assert report.reused > 100 and report.embedded <= 12
    fresh = open_kg(settings, "dulce", embedder)
    try:
        names = ids_by_name(fresh)
        assert "CRUZ" not in names and "Sam Rivera" in names and "SAM RIVERA" not in names
        assert "CRUZ" in fresh.graph.get_entities([ids["TAYLOR CRUZ"]])[0].aliases
        again = Curator(fresh)
        assert again.log.get(retype.id).state == "skipped"
        version, lines = again.log.last_replay()
        assert version == fresh.version and len(lines) == 3
        again.undo(author="ana", changeset=rename.id)  # a replayed edit is undoable on the new version
        assert "SAM RIVERA" in ids_by_name(fresh)
        redone = again.redo(author="ana", changeset=retype.id)  # a skipped one can be applied anew
        assert fresh.graph.get_entities([ids["ALEX MERCER"]])[0].description == "The mission's lead."
        assert redone.action == "redo"
    finally:
        fresh.close()


def test_cli_edits_print_what_changed_and_the_log_travels_as_jsonl(
    dulce_data_dir: Path, tmp_path: Path
) -> None:
    import typer

    from retrieval.cli import curation as curation_cli

    app = typer.Typer()
    curation_cli.register(app)
    runner = CliRunner()
    data = tmp_path / "kg"
    shutil.copytree(dulce_data_dir, data, symlinks=True)
    env = {"HF_HUB_OFFLINE": "1"}

    def run(*args: str) -> str:
        out = runner.invoke(app, [*args, "--data-dir", str(data)], env=env)
        assert out.exit_code == 0, out.output
        return out.output

    shown = run("duplicates", "--limit", "10")
    assert "'TAYLOR CRUZ' <- 'CRUZ'" in shown and "'SAM RIVERA' <- 'RIVERA'" in shown
    merged = run("edit", "merge", "TAYLOR CRUZ", "CRUZ", "--author", "ana", "--reason", "one agent")
    assert "merge 'TAYLOR CRUZ', 'CRUZ'" in merged and "- entity 'CRUZ' removed (into 'TAYLOR CRUZ')" in merged
    assert "~ entity 'TAYLOR CRUZ':" in merged
    renamed = run("edit", "rename", "SAM RIVERA", "Sam Rivera", "--author", "ana")
    assert "name: 'SAM RIVERA' → 'Sam Rivera'" in renamed
    refused = runner.invoke(app, ["edit", "rename", "Sam Rivera", "ALEX MERCER", "--data-dir", str(data)], env=env)
    assert refused.exit_code == 2 and "exists already" in refused.output and "edit merge" in refused.output
    assert "one agent" in run("history", "TAYLOR CRUZ") and "[applied]" in run("changes", "list")
    assert "undo of #2" in run("changes", "undo")
    exported = tmp_path / "log.jsonl"
    assert "wrote 3 changesets" in run("changes", "export", str(exported))
    other = tmp_path / "kg2"
    shutil.copytree(dulce_data_dir, other, symlinks=True)
    out = runner.invoke(app, ["changes", "import", str(exported), "--data-dir", str(other)], env=env)
    assert out.exit_code == 0, out.output
    assert "#1 applied" in out.output and "1 applied, 0 skipped" in out.output  # the undone rename stays out
    assert "no changes of entity" not in run("history", "CRUZ")


def test_documents_added_and_removed_touch_only_their_chunks(tmp_path: Path, embedder: Embedder) -> None:
    from retrieval.graph.bm25 import search as bm25_search
    from retrieval.ingest.update import add_documents, remove_document
    from tests.data.documents.make_docs import LIGHTHOUSE, ORCHARD, write_markdown, write_text

    first, more = tmp_path / "first", tmp_path / "more"
    first.mkdir()
    more.mkdir()
    write_markdown(first / "medal.md", "The Medal", "Ana Costa", LIGHTHOUSE)
    write_text(more / "orchard.txt", "The Orchard", "Ben Price", ORCHARD)
    write_markdown(more / "storm.md", "The Storm", "Ana Costa", [("The Storm", "Marta Silva rowed out from "
                                                                               "Cabo Frio with Tomas Reis.")])
    settings = Settings.from_env(env={}, data_dir=tmp_path / "kg")
    ingest(settings, first, fmt="documents", name="books", embedder=embedder, progress=False)
    kg = open_kg(settings, "books", embedder)
    try:
        cur = Curator(kg)
        silva = kg.graph.find_entities("Marta Silva")[0]
        chunks_before, stages = len(kg.bm25.chunk_ids), []
        cs, warnings = add_documents(cur, more, author="ana",
                                     progress=lambda stage, done, total: stages.append(stage))
        assert any("offline extractor" in w for w in warnings)
        assert {"reading", "extracting", "graph store", "BM25 index"} <= set(stages)
        added = [c for c in cs.changes if c.kind == "chunk"]
        assert added and all(c.before is None for c in added)
        assert len(kg.bm25.chunk_ids) == chunks_before + len(added)
        assert bm25_search(kg.bm25, "cider Bristol merchants", 1)[0][0] in {c.id for c in added}
        # an entity the graph had gains the new sources under its own id; a new one is added
        joined = kg.graph.get_entities([silva.id])[0]
        assert set(joined.source_chunks) > set(silva.source_chunks)
        assert kg.graph.find_entities("Helen Achebe") and "Helen Achebe" in kg.index.arrays.node_names
        assert search(kg, "Who sold cider to Bristol merchants?").facts
        removed = remove_document(cur, "The Orchard", author="ana")
        gone = {c.id for c in removed.changes if c.kind == "chunk"}
        assert gone and not (gone & set(kg.bm25.chunk_ids)) and not kg.graph.find_entities("Helen Achebe")
        assert set(kg.graph.get_entities([silva.id])[0].source_chunks) == set(joined.source_chunks)
        with pytest.raises(NotFoundError, match="no document"):
            remove_document(cur, "The Orchard", author="ana")
        cur.undo(author="ana")  # the removal
        assert kg.graph.find_entities("Helen Achebe") and len(kg.bm25.chunk_ids) == chunks_before + len(added)
        cur.undo(author="ana")  # the addition
        assert len(kg.bm25.chunk_ids) == chunks_before and not kg.graph.find_entities("Helen Achebe")
        assert kg.graph.get_entities([silva.id])[0].source_chunks == silva.source_chunks
    finally:
        kg.close()


def _jsonl(path: Path, *changesets: Changeset) -> Path:
    path.write_text("".join(cs.model_dump_json() + "\n" for cs in changesets), encoding="utf-8")
    return path


def test_an_imported_log_is_authored_by_who_imports_it(demo: tuple[Settings, KG, Curator], demo_data_dir: Path,
                                                       tmp_path: Path, embedder: Embedder) -> None:
    """Issue 27.10: `changes import` without --author records the OS user (the file's author is provenance only)."""
    from retrieval.curation.access import local_user
    from retrieval.curation.exchange import export_log

    _, _, cur = demo
    cur.apply([SetEntityDescription(entity_id="price-elasticity", description="How demand answers a price.")],
              author="mallory", reason="looks harmless")
    exported = tmp_path / "log.jsonl"
    export_log(cur.log, exported)
    other = tmp_path / "kg2"
    shutil.copytree(demo_data_dir, other, symlinks=True)
    out = CliRunner().invoke(_cli(), ["changes", "import", str(exported), "--data-dir", str(other)],
                             env={"HF_HUB_OFFLINE": "1"})
    assert out.exit_code == 0 and "1 applied" in out.output, out.output
    kg = open_kg(Settings.from_env(env={}, data_dir=other), "demo", embedder)
    try:
        imported = Curator(kg).log.get(1)
        assert imported.author == local_user() != "mallory"
        assert "by mallory" in imported.reason and "looks harmless" in imported.reason  # provenance kept
    finally:
        kg.close()


def _cli() -> Any:
    import typer

    from retrieval.cli import curation as curation_cli

    app = typer.Typer()
    curation_cli.register(app)
    return app


ADDED_CHUNK = Chunk(id="new-chunk", text="Adam met Eve.", original_document="Hostile book")


@pytest.mark.parametrize(("entity", "relation", "reason"), [
    (Entity(id="e-nul", name="Ad\x00am", source_chunks=("new-chunk",)), None, "NUL"),
    (Entity(id="e-empty", name="  ", source_chunks=("new-chunk",)), None, "must not be empty"),
    (Entity(id="e-long", name="x" * 10_000, source_chunks=("new-chunk",)), None, "10,000 characters long"),
    (Entity(id="e-adam", name="Adam", source_chunks=("new-chunk",)),
     Relation(id="loop", source_id="e-adam", target_id="e-adam", relation_type="KNOWS"), "self-loop"),
    (Entity(id="", name="Nobody"), None, "id must not be empty"),
    (Entity(id="e-type", name="Typed", type="t" * 101), None, "the limit is 100"),
    (Entity(id="e-ok", name="Fine"), Relation(id="dangling", source_id="e-ok", target_id="nowhere",
                                              relation_type="KNOWS"), "no entity with id 'nowhere'"),
])
def test_imported_operations_pass_the_same_validation_as_an_edit(
    demo: tuple[Settings, KG, Curator], tmp_path: Path, embedder: Embedder, entity: Entity, relation: Relation | None,
    reason: str,
) -> None:
    """Issue 27.11: an `add_documents` operation (from `changes import` or the engine) with a NUL, an empty or a
    10,000-character name, a self-loop, ... is refused with the reason; nothing is written."""
    settings, kg, cur = demo
    op = AddDocuments(documents=("Hostile book",), chunks=(ADDED_CHUNK,), entities=(entity,),
                      relations=(relation,) if relation else ())
    counts = kg.graph.counts()
    with pytest.raises((ValidationError, NotFoundError), match=reason):
        cur.apply([op], author="ana")
    assert not cur.log.changesets() and kg.graph.counts() == counts
    static = reason != "no entity with id 'nowhere'"  # a dangling end depends on the graph: it is skipped there
    path = _jsonl(tmp_path / "hostile.jsonl", Changeset(id=1, graph="demo", author="eve", state="applied", ops=(
        SetEntityDescription(entity_id="price-elasticity", description="A harmless first line."),)),
        Changeset(id=2, graph="demo", author="eve", ops=(op,), state="applied"))
    kg.close()  # the CLI opens the data dir itself
    out = CliRunner().invoke(_cli(), ["changes", "import", str(path), "--data-dir", str(settings.data_dir)],
                             env={"HF_HUB_OFFLINE": "1"})
    again = open_kg(settings, "demo", embedder)
    try:
        if static:  # the file is refused before anything is applied, naming its line and field
            assert out.exit_code == 2 and "hostile.jsonl:2: ops.0:" in out.output and reason in out.output
            assert again.graph.counts() == counts and not Curator(again).log.changesets()
        else:
            assert out.exit_code == 0 and "#2 skipped" in out.output and reason in out.output
            assert again.graph.counts() == counts
    finally:
        again.close()


def test_the_manifest_counts_what_the_stores_hold_after_a_failed_change_and_concurrent_ones(
    demo: tuple[Settings, KG, Curator], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 27.13: a changeset that fails after the graph store took it is rolled back, and the manifest's counts
    are the stores' (they were adjusted by the roll-back's delta only: one too many); six merges at once keep them."""
    import threading

    import retrieval.curation.write as write
    from retrieval.errors import StoreError
    from retrieval.graph import catalog

    settings, kg, cur = demo

    def manifest() -> dict[str, int]:
        counts = catalog.resolve(settings.data_dir, "demo").manifest["counts"]
        return {k: counts[k] for k in ("entities", "relations", "chunks")}

    def stored() -> dict[str, int]:
        return {k: v for k, v in kg.graph.counts().items() if k in ("entities", "relations", "chunks")}

    before = stored()
    assert manifest() == before
    vectors = write._write_vectors

    def fail(*args: Any) -> None:
        raise StoreError("the vector store went away")

    monkeypatch.setattr(write, "_write_vectors", fail)
    with pytest.raises(StoreError):
        cur.apply([MergeEntities(entity_ids=("price-elasticity", "demand-curve"))], author="ana")
    monkeypatch.setattr(write, "_write_vectors", vectors)
    assert stored() == before and manifest() == before
    ids = sorted(kg.index.arrays.node_ids)
    pairs = [(ids[i], ids[i + 1]) for i in range(0, 24, 4)][:6]
    errors: list[BaseException] = []

    def merge(pair: tuple[str, str]) -> None:
        try:
            cur.apply([MergeEntities(entity_ids=pair)], author="ana")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=merge, args=(p,)) for p in pairs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    assert manifest() == stored() and stored()["entities"] == before["entities"] - 6


def test_the_console_answers_from_the_graph_as_it_is_now(demo: tuple[Settings, KG, Curator]) -> None:
    """Issue 27.12: after a curation delete or redaction the Query console (its private copy of the Kuzu database)
    returns neither the deleted entity nor the old text: a stale copy would be a leak."""
    from retrieval.explore.console import run_query

    settings, kg, cur = demo
    query = ("MATCH (e:Entity) WHERE e.id IN $ids RETURN e.id AS id, e.description AS description ORDER BY id")
    ids = {"ids": ["demand-curve", "price-elasticity"]}
    secret = kg.graph.get_entities(["demand-curve"])[0].description
    assert run_query(settings, kg.handle, query, ids).rows == (
        ("demand-curve", secret), ("price-elasticity", kg.graph.get_entities(["price-elasticity"])[0].description))
    cur.apply([DeleteEntity(entity_id="price-elasticity")], author="ana")
    cur.apply([SetEntityDescription(entity_id="demand-curve", description="[redacted]")], author="ana")
    assert run_query(settings, kg.handle, query, ids).rows == (("demand-curve", "[redacted]"),)
    near = run_query(settings, kg.handle, "MATCH (a:Entity)-[r:RELATES]-(b:Entity) WHERE b.id = $id RETURN a.id",
                     {"id": "price-elasticity"})
    assert near.rows == ()
    copies = [p.name for p in (settings.data_dir / "console").iterdir() if not p.name.startswith(".")]
    assert len(copies) == 1  # the stale copy is gone, not kept beside the fresh one
