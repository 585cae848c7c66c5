"""Add and remove documents of a built graph, as curation changesets (undoable, in the history).

Adding reads only the new files (the documents format: chunks, extraction, merge among themselves), then joins
what they name to the graph: an extracted entity whose name the graph already has (name or alias, any case) is
that entity (its sources grow); the rest are new. Only the new chunks, and the entities and relations whose
text is new, are embedded. Removing drops a document's chunks and the entities and relations no other chunk
supports (`retrieval.curation.compile`).
"""

from __future__ import annotations

from pathlib import Path

from retrieval.curation.apply import Curator
from retrieval.curation.compile import GraphView
from retrieval.curation.ops import AddDocuments, Changeset, RemoveDocument
from retrieval.errors import ValidationError
from retrieval.ingest import IngestOptions, ProgressFn
from retrieval.ingest.bundle import relation_id
from retrieval.ingest.documents import load_documents
from retrieval.models import Entity, GraphData, Relation


def join_graph(view: GraphView, data: GraphData) -> GraphData:
    """`data` with each entity the graph already has (by id, else by name or alias) given that entity's id,
    and relation ids recomputed from the new endpoints."""
    have = view.entities([e.id for e in data.entities])
    ids: dict[str, str] = {}
    for e in data.entities:
        if e.id in have:
            ids[e.id] = e.id
            continue
        found = view.named(e.name)
        ids[e.id] = found[0].id if len(found) == 1 else e.id
    entities: dict[str, Entity] = {}
    for e in data.entities:
        new = ids[e.id]
        old = entities.get(new)
        entities[new] = e.model_copy(update={"id": new}) if old is None else old.model_copy(update={
            "source_chunks": tuple(dict.fromkeys([*old.source_chunks, *e.source_chunks]))})
    relations: dict[str, Relation] = {}
    for r in data.relations:
        s, t = ids[r.source_id], ids[r.target_id]
        if s == t:
            continue
        rid = relation_id(s, r.relation_type, t)
        old_r = relations.get(rid)
        relations[rid] = r.model_copy(update={"id": rid, "source_id": s, "target_id": t}) if old_r is None else \
            old_r.model_copy(update={"source_chunks": tuple(dict.fromkeys([*old_r.source_chunks, *r.source_chunks])),
                                     "weight": old_r.weight + r.weight})
    return data.model_copy(update={"entities": tuple(entities.values()), "relations": tuple(relations.values())})


def add_documents(curator: Curator, folder: Path, *, author: str | None = None,
                  progress: ProgressFn | None = None) -> tuple[Changeset, tuple[str, ...]]:
    """Read the documents in `folder` (documents format) and add them to the graph as one changeset; returns it
    and the reader's warnings (which extractor ran, what was skipped)."""
    settings = curator.kg.settings
    data = load_documents(folder, IngestOptions(settings=settings, progress=progress))
    if not data.chunks:
        raise ValidationError(f"{folder}: no text to add")
    with curator.kg.reading():
        data = join_graph(curator.view(), data)
    books = tuple(dict.fromkeys(c.original_document for c in data.chunks))
    op = AddDocuments(documents=books, chunks=data.chunks, entities=data.entities, relations=data.relations)
    changeset = curator.apply([op], author=author, reason=f"add {len(books)} document(s) from {Path(folder).name}",
                              progress=progress)
    return changeset, data.warnings


def remove_document(curator: Curator, document: str, *, author: str | None = None,
                    progress: ProgressFn | None = None) -> Changeset:
    """Remove one document (its book title or source file) as one changeset."""
    return curator.apply([RemoveDocument(document=document)], author=author, reason=f"remove {document!r}",
                         progress=progress)
