"""What each vector collection holds for a record: the text that is embedded and the row stored beside it.

Ingest writes these for a whole graph, curation for the records a change touched; both must agree, so they
live here, beside the payload schema (`stores.base.PAYLOAD_FIELDS`).
"""

from __future__ import annotations

from typing import Any

from retrieval.models import Chunk, Entity, Relation


def entity_text(entity: Entity) -> str:
    """What the Entities collection embeds: `name: description` (name alone without a description)."""
    return f"{entity.name}: {entity.description}" if entity.description else entity.name


def relation_text(relation: Relation, names: dict[str, str]) -> str:
    """The relation's sentence; without one, `source TYPE target` from the entity names."""
    if relation.description:
        return relation.description
    return f"{names.get(relation.source_id, relation.source_id)} {relation.relation_type} " \
        f"{names.get(relation.target_id, relation.target_id)}"


def entity_row(e: Entity, text: str) -> dict[str, Any]:
    return {"id": e.id, "name": e.name, "type": e.type, "text": text}


def relation_row(r: Relation, text: str) -> dict[str, Any]:
    return {
        "id": r.id,
        "text": text,
        "source_id": r.source_id,
        "target_id": r.target_id,
        "relation_type": r.relation_type,
    }


def chunk_row(c: Chunk) -> dict[str, Any]:
    return {
        "id": c.id,
        "text": c.text,
        "source": c.source,
        "original_document": c.original_document,
        "chapter": c.chapter,
        "author": c.author,
        "position": c.position,
    }
