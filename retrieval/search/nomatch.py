"""The no-match signal (seed 000: "No relevant knowledge found for this query."): evidence strength and its gate.

Strength = the mean of three numbers the retriever already has: the query's best cosine among the relation
descriptions, among the chunks and among the entities (its three vector searches). Off-topic and meaningless
queries sit far below answerable ones on both graphs measured (demo, MuSiQue); queries that name real entities
with a relation the graph does not hold ("near misses") overlap with answerable ones and are only partly caught.
`python -m retrieval calibrate-nomatch` measures the threshold (README: the no-match table).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retrieval.graph.runtime import KG, embedding_cache
from retrieval.models import EvidenceStrength, SearchResult
from retrieval.stores.base import CHUNKS, ENTITIES, RELATIONS, VectorHit

# Calibrated with `calibrate-nomatch` on the demo and MuSiQue sets (README): the highest F1 among thresholds
# that silence at most 2% of the answerable questions (hiding a real answer costs more than showing weak facts).
THRESHOLD = 0.50
WEAK_MATCHES = 5  # candidates kept to show under the no-match notice
CALIBRATED_FOR = "all-MiniLM-L6-v2"  # cosines of other embedders live on other scales


def strength(relation_hits: Sequence[VectorHit], chunk_hits: Sequence[VectorHit], entity_hits: Sequence[VectorHit],
             embedder: str, threshold: float = THRESHOLD) -> EvidenceStrength:
    """Evidence strength from the nearest relation description, chunk and entity (hits best first).

    A collection with no hit is empty (a graph without text has no chunks): it is left out of the mean rather
    than counted as a miss, so such a graph is judged on what it holds.
    """
    signals = {name: float(hits[0].score)
               for name, hits in (("relation", relation_hits), ("chunk", chunk_hits), ("entity", entity_hits)) if hits}
    score = sum(signals.values()) / len(signals) if signals else 0.0
    return EvidenceStrength(score=score, threshold=threshold,
                            applied=embedder == CALIBRATED_FOR, signals=signals)


def measure(kg: KG, query: str) -> EvidenceStrength:
    """Evidence strength of `query` on `kg` by three vector searches (for results that did not record it)."""
    vec = np.asarray(embedding_cache(kg).embed([query]), dtype=np.float32)
    rel, chunk, entity = (kg.vectors.search(name, vec, 1, payload=False)[0] for name in (RELATIONS, CHUNKS, ENTITIES))
    return strength(rel, chunk, entity, kg.embedder.name)


def gate(result: SearchResult, kg: KG | None = None) -> SearchResult:
    """Apply the no-match signal: below the threshold, the facts move to `weak_matches` and `no_match` is set.

    A result without a recorded strength is measured on `kg` first (the tool modes).
    """
    found = result.evidence_strength
    if found is None and kg is not None:
        found = measure(kg, result.query)
        result = result.model_copy(update={"evidence_strength": found})
    if found is None or not found.applied or found.score >= found.threshold or result.no_match:
        return result
    return result.model_copy(update={
        "no_match": True, "facts": (), "weak_matches": result.facts[:WEAK_MATCHES],
    })
