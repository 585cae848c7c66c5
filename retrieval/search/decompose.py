"""Query decomposition into entity-centred (local) and relation-centred (global) sub-queries.

Offline by default: entity mentions come from the graph's names (Aho-Corasick, `graph_index.name_matcher`)
plus close embedding neighbours; the relationship-query test of seed 002 (keywords, or two or more
entities) sets the hop depth. With a Gemini key, Gemini writes the sub-queries as structured JSON; any
failure falls back to the offline decomposition with a warning the result carries.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from retrieval.config import Settings
from retrieval.graph.index import STOP_WORDS, GraphIndex, name_matcher, normalise_name
from retrieval.llm import LLMError, gemini_json
from retrieval.models import Decomposition
from retrieval.stores.base import VectorHit

# Seed 002's relationship cues (matched as word prefixes: "connects", "dependency", "influenced" ...).
RELATION_CUES = (
    "connect", "depend", "affect", "relationship", "relation", "relate", "impact", "influenc", "between",
    "link", "interact", "cause", "effect", "lead", "compare", "contrast", "differ", "versus", "vs",
)
_CUE = re.compile(r"\b(?:" + "|".join(RELATION_CUES) + r")\w*", re.IGNORECASE)
# An embedding neighbour counts as a mention only when it is as close as a synonym (HippoRAG's τ = 0.8).
MENTION_SIMILARITY = 0.8
MAX_PAIRS = 3


@dataclass(frozen=True)
class EntityMatch:
    """A graph entity the query mentions: by name, or as a close embedding neighbour."""

    idx: int
    id: str
    name: str
    score: float  # 1.0 for a name match, the cosine otherwise
    via: Literal["name", "vector", "gemini"]


def entity_mentions(index: GraphIndex, query: str, neighbours: Sequence[VectorHit] = ()) -> list[EntityMatch]:
    """Entities named in `query` (longest matches, in text order), then embedding neighbours with cos >= 0.8."""
    out: dict[int, EntityMatch] = {}
    for m in name_matcher(index).find(query):
        if m.idx not in out:
            out[m.idx] = EntityMatch(m.idx, index.arrays.node_ids[m.idx], index.arrays.node_names[m.idx], 1.0, "name")
    for hit in neighbours:
        idx = index.id_to_idx.get(hit.id)
        if idx is not None and idx not in out and hit.score >= MENTION_SIMILARITY:
            out[idx] = EntityMatch(idx, hit.id, index.arrays.node_names[idx], float(hit.score), "vector")
    return list(out.values())


def is_relationship_query(query: str, n_entities: int) -> bool:
    """Seed 002: a relationship cue word, or two or more entities (question words are never entities)."""
    return bool(_CUE.search(query)) or n_entities >= 2


def hops_for(query: str, n_entities: int, max_hops: int | None) -> int:
    """The caller's `max_hops`, else 2 for a relationship query and 1 otherwise."""
    if max_hops is not None:
        return max_hops
    return 2 if is_relationship_query(query, n_entities) else 1


def _content_words(text: str) -> list[str]:
    return [w for w in normalise_name(text).split() if w not in STOP_WORDS]


def offline_decomposition(query: str, mentions: Sequence[str], max_hops: int | None = None) -> Decomposition:
    """Local sub-queries: one per mentioned entity; global: the query, plus "A and B relationship" per pair."""
    names = list(dict.fromkeys(m for m in mentions if m.strip()))
    local = names or [" ".join(_content_words(query)) or query]
    pairs = [f"{a} and {b} relationship" for a, b in itertools.islice(itertools.combinations(names, 2), MAX_PAIRS)]
    return Decomposition(
        query=query,
        local_queries=tuple(local),
        global_queries=tuple(dict.fromkeys([query, *pairs])),
        entity_mentions=tuple(names),
        is_relationship_query=is_relationship_query(query, len(names)),
        hops=hops_for(query, len(names), max_hops),
        method="offline",
    )


class GeminiDecompositionAnswer(BaseModel):
    """The JSON shape Gemini must answer with."""

    local_queries: list[str] = Field(description="entity-centred sub-queries, one per key entity")
    global_queries: list[str] = Field(description="relation-centred sub-queries about how entities relate")
    entities: list[str] = Field(description="the entity names mentioned or implied by the query")


DECOMPOSE_INSTRUCTION = (
    "You decompose questions for retrieval from a knowledge graph of entities and relations. "
    "Local queries are entity-centred (about one entity each); global queries are relation-centred "
    "(about how entities connect). Answer only with the JSON object requested."
)


def gemini_decomposition(
    settings: Settings, query: str, known_mentions: Sequence[str] = (), max_hops: int | None = None
) -> Decomposition:
    """Ask Gemini for the sub-queries (structured JSON); raises LLMError on any failure or empty answer."""
    hint = f"\nEntities already recognised in the graph: {', '.join(known_mentions)}" if known_mentions else ""
    prompt = (
        f"Question: {query}{hint}\n\nReturn local_queries (1-5), global_queries (1-5) and entities "
        "(the entity names, as they would appear in a knowledge graph)."
    )
    answer = gemini_json(settings, prompt, GeminiDecompositionAnswer, system_instruction=DECOMPOSE_INSTRUCTION)

    def clean(items: list[str], limit: int) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.strip()[:300] for s in items if s.strip()))[:limit]

    local, global_ = clean(answer.local_queries, 5), clean(answer.global_queries, 5)
    entities = clean(answer.entities, 10)
    if not (local or global_):
        raise LLMError("Gemini returned no sub-queries")
    names = tuple(dict.fromkeys([*known_mentions, *entities]))
    return Decomposition(
        query=query,
        local_queries=local or names or (query,),
        global_queries=tuple(dict.fromkeys([query, *global_])),
        entity_mentions=names,
        is_relationship_query=is_relationship_query(query, len(names)),
        hops=hops_for(query, len(names), max_hops),
        method="gemini",
    )


def decompose(
    query: str, mentions: Sequence[str], *, settings: Settings | None = None, max_hops: int | None = None
) -> tuple[Decomposition, list[str]]:
    """Gemini when a key is set, else offline; returns the decomposition and any (visible) warnings. Without a key
    offline is the design, not a degradation: no warning (the decomposition's `method` says it); a failed Gemini
    call is one."""
    if settings is None or not settings.gemini_enabled:
        return offline_decomposition(query, mentions, max_hops), []
    try:
        return gemini_decomposition(settings, query, mentions, max_hops), []
    except LLMError as exc:
        warning = f"Gemini decomposition failed: {exc}; offline decomposition used"
        return offline_decomposition(query, mentions, max_hops), [warning]
