"""Calibration of the no-match threshold (`retrieval.search.nomatch`): answerable questions against questions
written to be unanswerable (other domains, gibberish, near misses); the threshold with the best F1 among those
that silence at most 2% of the answerable ones."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.graph.runtime import KG
from retrieval.search.retriever import search

MAX_FALSE_FIRES = 0.02
UNANSWERABLE = Path(__file__).resolve().parents[2] / "data" / "nomatch" / "unanswerable.json"


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
