"""Writing a changeset's records to one version's stores: the graph (one transaction), the vectors of the texts
that changed (only those are embedded again; a row whose text is unchanged keeps its vector), BM25 when chunks
changed, the communities/claims sidecar, and the manifest's counts. Used by a live apply, an undo, a crash
roll-back and a re-import's replay alike; every step writes states, so running it twice changes nothing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from retrieval.curation.compile import GraphView
from retrieval.curation.ops import Change
from retrieval.graph import bm25, catalog
from retrieval.graph.communities import Extras, save_extras
from retrieval.models import Chunk, Claim, Community, Entity, GraphChanges, Relation
from retrieval.stores.base import CHUNKS, ENTITIES, RELATIONS, GraphStore, VectorStore, updates, vector_updates
from retrieval.stores.rows import chunk_row, entity_row, entity_text, relation_row, relation_text

Embed = Callable[[Sequence[str]], np.ndarray]
Say = Callable[[str, int, int], None]  # (stage, done, total), as ingest reports its stages
READ_BATCH = 1_000


@dataclass
class Version:
    """What a changeset is written to: one version's stores and directory, and how to embed."""

    graph: GraphStore
    vectors: VectorStore
    dir: Path
    embed: Embed
    view: GraphView  # the graph as it was before the change (for relations whose text follows a rename)
    chunk_ids: Sequence[str]  # every chunk of the version (the BM25 index's rows)
    extras: Extras
    say: Say | None = None


@dataclass
class Written:
    """What writing changed, for the in-memory state."""

    graph: GraphChanges
    bm25: bm25.BM25Index | None = None  # rebuilt when chunks changed
    extras: Extras | None = None  # when communities or claims changed
    embedded: int = 0  # texts embedded again
    kept: int = 0  # rows rewritten with their stored vector (payload changed, text not)
    seconds: dict[str, float] = field(default_factory=dict)


def graph_changes(changes: Sequence[Change]) -> GraphChanges:
    """The store-level puts and deletes of a changeset (its `after` states)."""
    puts: dict[str, list] = {"entity": [], "relation": [], "chunk": []}
    deletes: dict[str, list[str]] = {"entity": [], "relation": [], "chunk": []}
    for c in changes:
        if c.kind not in puts:
            continue
        if c.after is not None:
            puts[c.kind].append(c.record("after"))
        elif c.before is not None:
            deletes[c.kind].append(c.id)
    return GraphChanges(entities=tuple(puts["entity"]), relations=tuple(puts["relation"]),
                        chunks=tuple(puts["chunk"]), delete_entities=tuple(deletes["entity"]),
                        delete_relations=tuple(deletes["relation"]), delete_chunks=tuple(deletes["chunk"]))


def _upsert(target: Version, collection: str, rows: list[dict], texts: list[str], fresh: list[bool],
            written: Written) -> None:
    """Write rows; embed the texts marked fresh, reuse the stored vector of the others."""
    if not rows:
        return
    vecs = np.zeros((len(rows), 0), dtype=np.float32)
    todo = [i for i, f in enumerate(fresh) if f]
    keep = [i for i, f in enumerate(fresh) if not f]
    parts: dict[int, np.ndarray] = {}
    if todo:
        stage = f"embedding {collection}"
        if target.say is not None:
            target.say(stage, 0, len(todo))
        for i, v in zip(todo, target.embed([texts[i] for i in todo]), strict=True):
            parts[i] = v
        if target.say is not None:
            target.say(stage, len(todo), len(todo))
    if keep:
        stored = target.vectors.vectors(collection, [rows[i]["id"] for i in keep])
        for i, v in zip(keep, stored, strict=True):
            if not v.any():  # not stored after all (a row a crash left out): embed it
                v = target.embed([texts[i]])[0]
                todo.append(i)
            parts[i] = v
    vecs = np.stack([parts[i] for i in range(len(rows))]).astype(np.float32)
    target.vectors.insert(collection, rows, vecs)
    written.embedded += len(todo)
    written.kept += len(rows) - len(todo)


def _names(target: Version, changes: GraphChanges, ids: Sequence[str]) -> dict[str, str]:
    names = {e.id: e.name for e in changes.entities}
    missing = [i for i in ids if i not in names]
    names.update({e.id: e.name for e in target.graph.get_entities(missing)} if missing else {})
    return names


def _write_vectors(target: Version, changes: Sequence[Change], gc: GraphChanges, written: Written) -> None:
    before = {(c.kind, c.id): c.record("before") for c in changes if c.before is not None}
    # entities: a new text is embedded, an unchanged text with a new name/type payload keeps its vector
    rows, texts, fresh = [], [], []
    for e in gc.entities:
        old: Entity | None = before.get(("entity", e.id))
        text = entity_text(e)
        if old is not None and (text, e.name, e.type) == (entity_text(old), old.name, old.type):
            continue
        rows.append(entity_row(e, text))
        texts.append(text)
        fresh.append(old is None or entity_text(old) != text)
    _upsert(target, ENTITIES, rows, texts, fresh, written)
    vector_updates(target.vectors).delete(ENTITIES, list(gc.delete_entities))
    # relations: the changed ones, and those without a description whose endpoint was renamed (their text is
    # `source TYPE target` by name)
    renamed = [e.id for e in gc.entities if ("entity", e.id) in before
               and before[("entity", e.id)].name != e.name]
    changed = {r.id: r for r in gc.relations}
    dead = set(gc.delete_relations)
    bare = target.view.undescribed() if renamed else set()
    follow = [rid for eid in renamed for rid in target.view.incident(eid)
              if rid in bare and rid not in changed and rid not in dead]
    followers = {r.id: r for r in target.graph.get_relations(list(dict.fromkeys(follow))) if not r.description}
    then: dict[str, Relation | None] = {rid: before.get(("relation", rid)) for rid in changed}
    then.update(followers)  # a follower's record is unchanged; only its endpoints' names are
    now = {**changed, **followers}
    ends = {i for r in [*now.values(), *(x for x in then.values() if x is not None)] for i in (r.source_id,
                                                                                               r.target_id)}
    names_now = _names(target, gc, sorted(ends))
    names_then = {**names_now, **{eid: rec.name for (kind, eid), rec in before.items() if kind == "entity"}}
    rows, texts, fresh = [], [], []
    for rid, r in now.items():
        text = relation_text(r, names_now)
        row = relation_row(r, text)
        old_r = then.get(rid)
        old_text = relation_text(old_r, names_then) if old_r is not None else None
        if old_r is not None and relation_row(old_r, old_text or "") == row:
            continue
        rows.append(row)
        texts.append(text)
        fresh.append(old_text != text)
    _upsert(target, RELATIONS, rows, texts, fresh, written)
    vector_updates(target.vectors).delete(RELATIONS, list(gc.delete_relations))
    # chunks
    chunk_texts = [bm25.chunk_text(c) for c in gc.chunks]
    _upsert(target, CHUNKS, [chunk_row(c) for c in gc.chunks], chunk_texts, [True] * len(gc.chunks), written)
    vector_updates(target.vectors).delete(CHUNKS, list(gc.delete_chunks))


def _chunk_texts(vectors: VectorStore, ids: Sequence[str]) -> dict[str, str]:
    fields = set(Chunk.model_fields)
    out: dict[str, str] = {}
    for start in range(0, len(ids), READ_BATCH):
        for row in vectors.get(CHUNKS, list(ids[start:start + READ_BATCH])):
            out[str(row["id"])] = bm25.chunk_text(Chunk(**{k: v for k, v in row.items() if k in fields}))
    return out


def rebuild_bm25(vectors: VectorStore, directory: Path, chunk_ids: Sequence[str]) -> bm25.BM25Index:
    """BM25 over `chunk_ids` (texts read back from DocumentChunks), saved into the version (`bm25.save_version`)."""
    texts = _chunk_texts(vectors, chunk_ids)
    ids = [c for c in chunk_ids if c in texts]
    index = bm25.build_index(ids, [texts[c] for c in ids])
    bm25.save_version(index, directory)
    return index


def _chapters(extras: Extras, changes: Sequence[Change]) -> dict[str, tuple[str, ...]]:
    """Each book's chapter names after chunks were added (their chapters appended) or a whole book removed."""
    out = dict(extras.chapter_names)
    added: dict[str, list[tuple[int, str]]] = {}
    removed: set[str] = set()
    for c in changes:
        if c.kind != "chunk":
            continue
        if c.after is not None and c.after.get("chapter"):
            added.setdefault(c.after["original_document"], []).append((c.after["position"], c.after["chapter"]))
        elif c.after is None and c.before is not None:
            removed.add(c.before.get("original_document", ""))
    for book in removed - added.keys():
        out.pop(book, None)
    for book, rows in added.items():
        out[book] = tuple(dict.fromkeys([*out.get(book, ()), *(ch for _, ch in sorted(rows))]))
    return out


def apply_extras(extras: Extras, changes: Sequence[Change]) -> Extras | None:
    """The sidecar after the changeset's community, claim and chunk changes (None: it has none)."""
    touched = [c for c in changes if c.kind in ("community", "claim")]
    if not touched and not any(c.kind == "chunk" for c in changes):
        return None
    communities: dict[str, Community] = {c.id: c for c in extras.communities}
    claims: dict[str, Claim] = {c.id: c for c in extras.claims}
    for c in touched:
        table: dict = communities if c.kind == "community" else claims
        if c.after is None:
            table.pop(c.id, None)
        else:
            table[c.id] = c.record("after")
    return Extras(tuple(communities.values()), tuple(claims.values()), _chapters(extras, changes))


def write_changes(target: Version, changes: Sequence[Change]) -> Written:
    """Write `changes` (their after-states) to the version: graph, vectors, BM25, sidecar, manifest counts."""
    import time

    say: Say = target.say or (lambda stage, done, total: None)
    gc = graph_changes(changes)
    written = Written(gc)
    t = time.perf_counter()
    say("graph store", 0, 1)
    updates(target.graph).write(gc)
    say("graph store", 1, 1)
    written.seconds["graph"] = time.perf_counter() - t
    t = time.perf_counter()
    _write_vectors(target, changes, gc, written)
    written.seconds["vectors"] = time.perf_counter() - t
    if gc.chunks or gc.delete_chunks:
        t = time.perf_counter()
        gone = set(gc.delete_chunks)
        ids = [c for c in target.chunk_ids if c not in gone]
        ids += [c.id for c in gc.chunks if c.id not in set(ids)]
        say("BM25 index", 0, 1)
        written.bm25 = rebuild_bm25(target.vectors, target.dir, ids)
        say("BM25 index", 1, 1)
        written.seconds["bm25"] = time.perf_counter() - t
    extras = apply_extras(target.extras, changes)
    if extras is not None:
        save_extras(target.dir, extras)
        written.extras = extras
    _update_counts(target)
    return written


def _update_counts(target: Version) -> None:
    """The manifest's counts are what the graph store holds once the change is written (a re-import compares them
    with the stores to tell lost data from curated data). Read from the store, never adjusted by the change's
    delta: a changeset killed before it reached the counts and then rolled back, or one written twice, would leave
    a delta's count off for good."""
    path = target.dir / catalog.MANIFEST
    if not path.is_file():
        return  # a build directory: its manifest is written at commit
    import json

    manifest = json.loads(path.read_text(encoding="utf-8"))
    stored = target.graph.counts()
    counts = {**manifest.get("counts", {}), **{k: stored[k] for k in ("entities", "relations", "chunks", "books",
                                                                       "chapters")}}
    if counts != manifest.get("counts"):
        catalog.write_json_atomic(path, {**manifest, "counts": counts})
