"""The no-match signal (seed 000: "No relevant knowledge found for this query."): evidence strength and its gate.

Strength = the mean of three numbers the retriever already has: the query's best cosine among the relation
descriptions, among the chunks and among the entities (its three vector searches). Off-topic and meaningless
queries sit far below answerable ones on both graphs measured (demo, MuSiQue); queries that name real entities
with a relation the graph does not hold ("near misses") overlap with answerable ones and are only partly caught.
`python -m retrieval calibrate-nomatch` measures the threshold (README: the no-match table).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.models import EvidenceStrength, SearchResult
from retrieval.runtime import KG
from retrieval.stores.base import CHUNKS, ENTITIES, RELATIONS, VectorHit

# Calibrated with `calibrate-nomatch` on the demo and MuSiQue sets (README): the highest F1 among thresholds
# that silence at most 2% of the answerable questions (hiding a real answer costs more than showing weak facts).
THRESHOLD = 0.50
WEAK_MATCHES = 5  # candidates kept to show under the no-match notice
CALIBRATED_FOR = "all-MiniLM-L6-v2"  # cosines of other embedders live on other scales
MAX_FALSE_FIRES = 0.02
UNANSWERABLE = Path(__file__).resolve().parents[1] / "data" / "nomatch" / "unanswerable.json"


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
    from retrieval.retriever import embedding_cache

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


# --- calibration ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Labelled:
    """One calibration question: its graph, its set (answerable, other-domain, gibberish, near-miss), its score."""

    graph: str
    kind: str
    question: str
    score: float

    @property
    def unanswerable(self) -> bool:
        return self.kind != "answerable"


@dataclass(frozen=True)
class Quality:
    """Precision / recall / F1 of "no match" (the positive class: the question cannot be answered)."""

    threshold: float
    precision: float
    recall: float
    f1: float
    false_fires: int  # answerable questions silenced
    answerable: int


def unanswerable_questions(graph_kind: str, path: Path = UNANSWERABLE) -> list[tuple[str, str]]:
    """(kind, question) written for KG Lens: every `any` question plus the near misses for `graph_kind`."""
    rows = json.loads(path.read_text(encoding="utf-8"))["questions"]
    return [(r["kind"], r["question"]) for r in rows if r["graph"] in ("any", graph_kind)]


def score_questions(kg: KG, graph: str, labelled: Sequence[tuple[str, str]],
                    progress: Callable[[int], None] | None = None) -> list[Labelled]:
    """Run the KG retriever on each question and keep the evidence strength it records."""
    from retrieval.retriever import search

    out = []
    for i, (kind, question) in enumerate(labelled):
        found = search(kg, question).evidence_strength
        out.append(Labelled(graph, kind, question, found.score if found else 0.0))
        if progress:
            progress(i + 1)
    return out


def quality(rows: Sequence[Labelled], threshold: float) -> Quality:
    fire = np.array([r.score < threshold for r in rows], dtype=bool)
    bad = np.array([r.unanswerable for r in rows], dtype=bool)
    tp, fp, fn = int((fire & bad).sum()), int((fire & ~bad).sum()), int((~fire & bad).sum())
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return Quality(threshold, precision, recall, f1, fp, int((~bad).sum()))


def calibrate(rows: Sequence[Labelled], max_false_fires: float = MAX_FALSE_FIRES) -> Quality:
    """The threshold (on a 0.01 grid) with the best F1 among those silencing at most `max_false_fires` of the
    answerable questions."""
    grid = np.round(np.arange(0.0, 1.0, 0.01), 2)
    allowed = [q for q in (quality(rows, float(t)) for t in grid)
               if q.false_fires <= max_false_fires * max(q.answerable, 1)]
    return max(allowed, key=lambda q: (q.f1, -q.threshold))


def set_rows(rows: Sequence[Labelled], threshold: float) -> list[dict[str, Any]]:
    """Per graph and set: questions, how many the signal silenced, and the rate."""
    out = []
    for graph in dict.fromkeys(r.graph for r in rows):
        for kind in dict.fromkeys(r.kind for r in rows if r.graph == graph):
            group = [r for r in rows if r.graph == graph and r.kind == kind]
            fired = sum(r.score < threshold for r in group)
            out.append({"graph": graph, "set": kind, "questions": len(group), "no_match": fired,
                        "rate": fired / len(group)})
    return out


def held_out(rows: Sequence[Labelled]) -> list[dict[str, Any]]:
    """Calibrate on each graph alone and measure on the others: how well one threshold carries over."""
    out = []
    graphs = list(dict.fromkeys(r.graph for r in rows))
    for graph in graphs if len(graphs) > 1 else []:
        fitted = calibrate([r for r in rows if r.graph == graph])
        rest = [r for r in rows if r.graph != graph]
        out.append({"calibrated_on": graph, "threshold": fitted.threshold,
                    "measured_on": ", ".join(g for g in graphs if g != graph),
                    **vars(quality(rest, fitted.threshold))})
    return out
