"""The extraction interface: chunks in, typed entities and relations per chunk out; merged into graph records.

Two back ends implement `Extractor`: `retrieval.ingest.extract.gemini` (an LLM through a JSON schema, when
GEMINI_API_KEY is set) and `retrieval.ingest.extract.offline` (spaCy NER and dependency rules, always available).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pydantic import BaseModel, Field

from retrieval.ingest import ProgressFn
from retrieval.models import Entity, Relation

ENTITY_PREFIX = "e:"
MAX_ENTITY_ID_BYTES = 512


class EntityOut(BaseModel):
    """An entity named in one chunk (the JSON schema the LLM answers in)."""

    name: str = Field(description="The entity's name as written in the passage")
    type: str = Field(description="A short type, e.g. PERSON, ORGANIZATION, PLACE, EVENT, WORK, CONCEPT")
    description: str = Field(default="", description="One sentence on who or what it is, from the passage")


class RelationOut(BaseModel):
    """A relation stated in one chunk between two of its entities."""

    source: str = Field(description="Name of the source entity (one of the entities listed)")
    target: str = Field(description="Name of the target entity (one of the entities listed)")
    type: str = Field(description="An upper-case relation type, e.g. FOUNDED, BORN_IN, PART_OF, MARRIED_TO")
    description: str = Field(description="One sentence, from the passage, that states the relation")


class ChunkGraph(BaseModel):
    """What one chunk yields."""

    entities: list[EntityOut] = Field(default_factory=list)
    relations: list[RelationOut] = Field(default_factory=list)


@dataclass(frozen=True)
class ChunkInput:
    """A chunk to extract from, with the context an extractor may use."""

    id: str
    text: str
    book: str = ""
    chapter: str = ""


@dataclass
class ExtractionRun:
    """One ChunkGraph per input chunk (None: nothing could be extracted), what happened, and why."""

    graphs: list[ChunkGraph | None]
    stats: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


class Extractor(Protocol):
    """A back end; `describe` is the one line the ingest warnings show (which extractor ran, and how)."""

    name: str

    def describe(self) -> str: ...

    def extract(self, chunks: Sequence[ChunkInput], progress: ProgressFn | None = None) -> ExtractionRun: ...


def name_key(name: str) -> str:
    """Merge key of an entity name: NFKC, case-folded, punctuation to spaces, a leading article dropped.

    Unicode letters are kept (unlike HippoRAG's ASCII-only normalisation), so 'Zoë' and 'Жуков' survive.
    """
    text = unicodedata.normalize("NFKC", name).casefold()
    text = " ".join(re.sub(r"[^\w]+|_", " ", text).split())
    return re.sub(r"^(?:the|a|an) ", "", text)


def relation_type(text: str) -> str:
    """'born in' / 'Born-In' -> 'BORN_IN' (empty if nothing is left)."""
    return "_".join(re.sub(r"[^\w]+|_", " ", unicodedata.normalize("NFKC", text)).split()).upper()


def entity_id(key: str) -> str:
    eid = ENTITY_PREFIX + key
    if len(eid.encode("utf-8")) <= MAX_ENTITY_ID_BYTES:
        return eid
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
    return ENTITY_PREFIX + key.encode("utf-8")[:400].decode("utf-8", "ignore") + "~" + digest


def _sentence(text: str) -> str:
    return " ".join(text.split())


def merge_graphs(chunks: Sequence[ChunkInput], graphs: Sequence[ChunkGraph | None]
                 ) -> tuple[tuple[Entity, ...], tuple[Relation, ...], list[str]]:
    """Entities merged across chunks by `name_key` (most frequent spelling and type win; first description);
    relations merged by (source, type, target), keeping every source chunk (weight = their number).

    A relation naming an entity its chunk did not list adds that entity with type `unknown` (counted).
    """
    from retrieval.ingest.bundle import relation_id

    names: dict[str, Counter[str]] = {}
    types: dict[str, Counter[str]] = {}
    descriptions: dict[str, str] = {}
    mentions: dict[str, dict[str, None]] = {}
    rels: dict[tuple[str, str, str], tuple[str, dict[str, None]]] = {}
    empty_names = empty_types = implicit = self_loops = 0

    def add_entity(name: str, etype: str, description: str, chunk: str) -> str | None:
        key = name_key(name)
        if not key:
            return None
        names.setdefault(key, Counter())[_sentence(name)] += 1
        types.setdefault(key, Counter())[etype] += 1
        if description and not descriptions.get(key):
            descriptions[key] = _sentence(description)
        mentions.setdefault(key, {})[chunk] = None
        return key

    for chunk, graph in zip(chunks, graphs, strict=True):
        if graph is None:
            continue
        listed: set[str] = set()
        for ent in graph.entities:
            key = add_entity(ent.name, relation_type(ent.type).lower() or "entity", ent.description, chunk.id)
            if key is None:
                empty_names += 1
            else:
                listed.add(key)
        for rel in graph.relations:
            rtype = relation_type(rel.type)
            src_key, dst_key = name_key(rel.source), name_key(rel.target)
            if not (src_key and dst_key):
                empty_names += 1
                continue
            if not rtype:
                empty_types += 1
                continue
            if src_key == dst_key:
                self_loops += 1
                continue
            for key, name in ((src_key, rel.source), (dst_key, rel.target)):
                if key not in listed:
                    implicit += 1
                    add_entity(name, "unknown", "", chunk.id)
                    listed.add(key)
            entry = rels.setdefault((src_key, rtype, dst_key), (_sentence(rel.description), {}))
            entry[1][chunk.id] = None

    ids = {key: entity_id(key) for key in names}
    entities = tuple(
        Entity(
            id=ids[key],
            name=counts.most_common(1)[0][0],
            type=types[key].most_common(1)[0][0],
            description=descriptions.get(key, ""),
            source_chunks=tuple(mentions[key]),
        )
        for key, counts in names.items()
    )
    relations = []
    for (src_key, rtype, dst_key), (sentence, cids) in rels.items():
        src, dst = ids[src_key], ids[dst_key]
        rid = relation_id(src, rtype, dst)
        relations.append(Relation(
            id=rid, source_id=src, target_id=dst, relation_type=rtype, description=sentence,
            weight=float(len(cids)), vector_db_ref_id=rid, source_chunks=tuple(cids),
        ))
    counted = (
        (empty_names, "skipped {n} entity or relation names with no letters or digits"),
        (empty_types, "skipped {n} relations with an empty type"),
        (self_loops, "skipped {n} relations from an entity to itself"),
        (implicit, "{n} relation ends were not among their chunk's entities; added them with type 'unknown'"),
    )
    warnings = ["extraction: " + text.format(n=n) for n, text in counted if n]
    return entities, tuple(relations), warnings
