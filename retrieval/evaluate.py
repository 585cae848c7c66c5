"""Evaluate rerankers on hand labels: nDCG@k, P@k, RR (MRR) and Recall@k with ir-measures.

Gains are the grades 0-3 (trec_eval's linear nDCG); P, R and RR count grade >= 1 as relevant.
Only queries with at least one relevant label are scored (others are listed as skipped); a
reranker that returns nothing for a scored query scores 0 on it. Lift is against "no rerank".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from retrieval.labels import Label, current_labels, query_id
from retrieval.models import Record, VerbalizedFact
from retrieval.rerank.base import Reranker

BASELINE = "none"


class QueryScores(Record):
    """One reranker's metric values on one query."""

    reranker: str
    query_id: str
    query: str
    values: dict[str, float]


class MeanScores(Record):
    """One reranker's metric means over the scored queries."""

    reranker: str
    n_queries: int
    values: dict[str, float]


class Lift(Record):
    """A reranker's mean minus the baseline's, for one measure (relative: None when the baseline is 0)."""

    reranker: str
    measure: str
    baseline: float
    value: float
    delta: float
    relative: float | None


class EvalReport(Record):
    """Per-query and mean tables, and lift over the baseline."""

    measures: tuple[str, ...]
    baseline: str
    per_query: tuple[QueryScores, ...] = ()
    means: tuple[MeanScores, ...] = ()
    lift: tuple[Lift, ...] = ()
    skipped_queries: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def table(self) -> str:
        """The mean table (with lift) as fixed-width text, for the CLI."""
        head = f"{'reranker':<16}{'queries':>8}" + "".join(f"{m:>10}" for m in self.measures)
        lines = [head, "-" * len(head)]
        lifts = {(lf.reranker, lf.measure): lf for lf in self.lift}
        for mean in self.means:
            lines.append(
                f"{mean.reranker:<16}{mean.n_queries:>8}" + "".join(f"{mean.values[m]:>10.4f}" for m in self.measures)
            )
            if mean.reranker != self.baseline and lifts:
                cells = "".join(f"{lifts[mean.reranker, m].delta:>+10.4f}" for m in self.measures)
                lines.append(f"{'  lift':<16}{'':>8}" + cells)
        return "\n".join(lines)


def measures_for(ks: Sequence[int]) -> list[str]:
    """nDCG@k, P@k and R@k for each k, then RR (its mean is MRR)."""
    if not ks or any(k < 1 for k in ks):
        raise ValueError(f"cutoffs must be positive integers, got {list(ks)}")
    names = [f"{m}@{k}" for k in sorted(set(ks)) for m in ("nDCG", "P", "R")]
    return [*names, "RR"]


def evaluate(
    labels: Iterable[Label],
    runs: Mapping[str, Mapping[str, Sequence[str]]],
    ks: Sequence[int] = (10,),
    baseline: str = BASELINE,
) -> EvalReport:
    """Score `runs` (reranker -> query text -> ranked item ids) against the labels.

    Labels are reduced to one per (query, item) first (the most recent, see `current_labels`).
    """
    import ir_measures

    names = measures_for(ks)
    measures = [ir_measures.parse_measure(n) for n in names]
    judged = current_labels(labels)
    texts = {query_id(lb.query_text): lb.query_text for lb in judged}
    relevant = {query_id(lb.query_text) for lb in judged if lb.grade >= 1}
    qrels = [ir_measures.Qrel(query_id(lb.query_text), lb.item_id, lb.grade) for lb in judged]
    skipped = tuple(sorted(texts[q] for q in texts if q not in relevant))
    warnings = []
    per_query: list[QueryScores] = []
    means: list[MeanScores] = []
    for reranker, ranking in runs.items():
        unlabelled = [q for q in ranking if query_id(q) not in texts]
        if unlabelled:
            warnings.append(f"{reranker}: {len(unlabelled)} ranked queries have no labels; ignored")
        run = [
            ir_measures.ScoredDoc(query_id(q), item, float(len(items) - rank))  # trec_eval sorts by score
            for q, items in ranking.items()
            if query_id(q) in relevant
            for rank, item in enumerate(dict.fromkeys(items))
        ]
        values: dict[str, dict[str, float]] = {q: dict.fromkeys(names, 0.0) for q in sorted(relevant)}
        for metric in ir_measures.iter_calc(measures, qrels, run) if run else ():
            if metric.query_id in values:
                values[metric.query_id][str(metric.measure)] = float(metric.value)
        per_query += [QueryScores(reranker=reranker, query_id=q, query=texts[q], values=v) for q, v in values.items()]
        n = len(values)
        means.append(MeanScores(
            reranker=reranker,
            n_queries=n,
            values={m: (sum(v[m] for v in values.values()) / n if n else 0.0) for m in names},
        ))
    lift: list[Lift] = []
    base = next((m for m in means if m.reranker == baseline), None)
    if base is None and runs:
        warnings.append(f"no {baseline!r} run: lift not computed")
    for mean in means:
        if base is None or mean.reranker == baseline:
            continue
        for m in names:
            b, v = base.values[m], mean.values[m]
            lift.append(Lift(
                reranker=mean.reranker, measure=m, baseline=b, value=v, delta=v - b,
                relative=(v - b) / b if b > 0 else None,
            ))
    return EvalReport(
        measures=tuple(names), baseline=baseline, per_query=tuple(per_query), means=tuple(means),
        lift=tuple(lift), skipped_queries=skipped, warnings=tuple(warnings),
    )


@dataclass(frozen=True)
class RerankRuns:
    """Every reranker's ranking (query text -> item ids) of each query's pool, and their warnings."""

    runs: dict[str, dict[str, list[str]]]
    warnings: list[str]


def rerank_runs(
    queries: Sequence[str],
    pool: Callable[[str], Sequence[VerbalizedFact]],
    rerankers: Mapping[str, Reranker],
    top_k: int = 10,
) -> RerankRuns:
    """Retrieve each query's candidate pool once, rerank it under every reranker, keep the item ids.

    Warnings are collected per reranker and counted, e.g. a cross-encoder passthrough on every query.
    """
    runs: dict[str, dict[str, list[str]]] = {name: {} for name in rerankers}
    seen: Counter[str] = Counter()
    for query in queries:
        candidates = list(pool(query))
        for name, reranker in rerankers.items():
            out = reranker.rerank(query, candidates, top_k)
            runs[name][query] = [c.id for c in out.candidates[:top_k]]
            seen.update(f"{name}: {w}" for w in out.warnings)
    warnings = [f"{w} (x{n})" if n > 1 else w for w, n in seen.items()]
    return RerankRuns(runs, warnings)


def evaluate_rerankers(
    labels: Iterable[Label],
    pool: Callable[[str], Sequence[VerbalizedFact]],
    rerankers: Mapping[str, Reranker],
    ks: Sequence[int] = (10,),
    baseline: str = BASELINE,
) -> tuple[EvalReport, RerankRuns]:
    """Re-run every labelled query (its pool from `pool`) under every reranker and score the rankings."""
    judged = current_labels(labels)
    queries = sorted({lb.query_text for lb in judged})
    runs = rerank_runs(queries, pool, rerankers, top_k=max(ks))
    report = evaluate(judged, runs.runs, ks, baseline)
    return report.model_copy(update={"warnings": (*runs.warnings, *report.warnings)}), runs
