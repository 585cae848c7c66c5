"""Evaluate systems (rerankers, search modes) on hand labels: nDCG@k, P@k, RR (MRR) and Recall@k with ir-measures,
with bootstrap confidence intervals and a paired significance test.

Gains are the grades 0-3 (trec_eval's linear nDCG); P, R and RR count grade >= 1 as relevant. Labels are first
reduced to one grade per (query, item) by the adjudication rule (`resolve_labels`). Only queries
with at least one relevant label are scored (others are listed as skipped); a system that returns nothing for a
scored query scores 0 on it. Lift is against "no rerank".

Uncertainty, over queries (the unit that varies): a percentile bootstrap interval of each mean (Efron &
Tibshirani, "An Introduction to the Bootstrap", 1993, ch. 13), B resamples of the scored queries with a fixed
seed; and for two systems a paired randomization test of the mean per-query difference (Fisher 1935; the test
Smucker, Allan & Carterette recommend for IR, CIKM 2007), by `scipy.stats.permutation_test` (sign flips of the
per-query differences; exact for up to 13 queries), two-sided, reported as `p_value`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from retrieval.errors import ValidationError
from retrieval.evaluation.consensus import current_labels, resolve_labels
from retrieval.evaluation.labels import Label, query_id
from retrieval.models import Record, VerbalizedFact
from retrieval.rerank.base import Reranker

BASELINE = "none"
BOOTSTRAP = 1000  # resamples for each interval
SEED = 0
CONFIDENCE = 0.95
PERMUTATIONS = 9999  # randomization-test resamples when the exact test (2^n sign flips) is larger


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


class Estimate(Record):
    """A mean over the scored queries with its percentile bootstrap interval."""

    value: float
    ci_low: float
    ci_high: float


class SystemScores(Record):
    """One system's metrics with intervals, and how much of its top k is still unjudged (over the scored queries)."""

    system: str
    n_queries: int
    metrics: dict[str, Estimate]
    unjudged: dict[str, int]  # k -> items in the top k with no label from anyone
    ranked: dict[str, int]  # k -> items in the top k (a system may return fewer than k)


class Comparison(Record):
    """System a minus system b on one measure, paired by query."""

    a: str
    b: str
    measure: str
    n_queries: int
    mean_a: float
    mean_b: float
    delta: float
    ci_low: float  # bootstrap interval of the mean difference
    ci_high: float
    p_value: float  # paired randomization test, two-sided
    test: str = "paired randomization (sign-flip) test, two-sided"


class EvalReport(Record):
    """Per-query and mean tables, lift over the baseline, intervals, comparisons, unjudged counts."""

    measures: tuple[str, ...]
    baseline: str
    per_query: tuple[QueryScores, ...] = ()
    means: tuple[MeanScores, ...] = ()
    lift: tuple[Lift, ...] = ()
    systems: tuple[SystemScores, ...] = ()
    comparisons: tuple[Comparison, ...] = ()
    skipped_queries: tuple[str, ...] = ()
    unresolved: int = 0  # (query, item)s left out: annotators split evenly and nobody adjudicated
    bootstrap: int = BOOTSTRAP
    seed: int = SEED
    warnings: tuple[str, ...] = ()

    def table(self) -> str:
        """The mean table (with lift and unjudged counts), the intervals and the comparisons, for the CLI."""
        head = f"{'system':<22}{'queries':>8}" + "".join(f"{m:>10}" for m in self.measures)
        unjudged = {s.system: s for s in self.systems}
        ks = sorted({k for s in self.systems for k in s.unjudged}, key=int)
        head += "".join(f"{'unjudged@' + k:>14}" for k in ks)
        lines = [head, "-" * len(head)]
        lifts = {(lf.reranker, lf.measure): lf for lf in self.lift}
        for mean in self.means:
            sys = unjudged.get(mean.reranker)
            counts = "".join(f"{f'{sys.unjudged[k]}/{sys.ranked[k]}':>14}" for k in ks) if sys else ""
            lines.append(
                f"{mean.reranker:<22}{mean.n_queries:>8}" + "".join(f"{mean.values[m]:>10.4f}" for m in self.measures)
                + counts
            )
            if mean.reranker != self.baseline and lifts and (mean.reranker, self.measures[0]) in lifts:
                cells = "".join(f"{lifts[mean.reranker, m].delta:>+10.4f}" for m in self.measures)
                lines.append(f"{'  lift':<22}{'':>8}" + cells)
        if self.systems:
            lines += ["", f"{CONFIDENCE:.0%} bootstrap intervals over queries (B={self.bootstrap}, seed {self.seed})",
                      f"{'system':<22}" + "".join(f"{m:>16}" for m in self.measures)]
            for s in self.systems:
                cells = "".join(f"{f'[{e.ci_low:.3f}, {e.ci_high:.3f}]':>16}" for e in s.metrics.values())
                lines.append(f"{s.system:<22}{cells}")
        for c in self.comparisons:
            if c is self.comparisons[0]:
                lines += ["", f"{c.a} vs {c.b}: {c.test}, {c.n_queries} queries"]
            lines.append(f"  {c.measure:<8} {c.mean_a:.4f} - {c.mean_b:.4f} = {c.delta:+.4f} "
                         f"[{c.ci_low:+.4f}, {c.ci_high:+.4f}]  p = {c.p_value:.4f}")
        return "\n".join(lines)


def measures_for(ks: Sequence[int]) -> list[str]:
    """nDCG@k, P@k and R@k for each k, then RR (its mean is MRR)."""
    if not ks or any(k < 1 for k in ks):
        raise ValueError(f"cutoffs must be positive integers, got {list(ks)}")
    names = [f"{m}@{k}" for k in sorted(set(ks)) for m in ("nDCG", "P", "R")]
    return [*names, "RR"]


def bootstrap_ci(values: np.ndarray, resamples: int = BOOTSTRAP, seed: int = SEED,
                 confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap interval of the column means of `values` (queries x measures), resampling queries."""
    n = values.shape[0]
    if n == 0:  # nothing scored: no spread, and no numpy "mean of empty slice" warning
        zeros = np.zeros(values.shape[1:])
        return zeros, zeros
    if resamples < 1:
        return values.mean(axis=0), values.mean(axis=0)
    idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    means = values[idx].mean(axis=1)  # resamples x measures
    tail = (1 - confidence) / 2 * 100
    return np.percentile(means, tail, axis=0), np.percentile(means, 100 - tail, axis=0)


def paired_p_value(a: np.ndarray, b: np.ndarray, seed: int = SEED, resamples: int = PERMUTATIONS) -> float:
    """Two-sided paired randomization test of mean(a - b) (scipy.stats.permutation_test, sign flips)."""
    from scipy.stats import permutation_test

    if len(a) < 2:
        return 1.0  # one query: its two sign flips give the same |mean|; scipy refuses a one-observation sample
    if np.allclose(a, b):
        return 1.0  # every flip gives the same statistic
    res = permutation_test(
        (a, b), lambda x, y, axis: np.mean(x - y, axis=axis), permutation_type="samples", vectorized=True,
        n_resamples=resamples, alternative="two-sided", random_state=seed,
    )
    return float(min(1.0, res.pvalue))


def evaluate(
    labels: Iterable[Label],
    runs: Mapping[str, Mapping[str, Sequence[str]]],
    ks: Sequence[int] = (10,),
    baseline: str = BASELINE,
    *,
    include_ties: bool = False,
    bootstrap: int = BOOTSTRAP,
    seed: int = SEED,
    compare: tuple[str, str] | None = None,
) -> EvalReport:
    """Score `runs` (system -> query text -> ranked item ids) against the labels.

    Labels are reduced to one per (query, item) first (`resolve_labels`: adjudication, else the annotators'
    consensus; even splits are left out unless `include_ties`). `compare=(a, b)` adds a paired test per measure.
    """
    import ir_measures

    names = measures_for(ks)
    measures = [ir_measures.parse_measure(n) for n in names]
    raw = list(labels)
    judged_pairs = {(query_id(lb.query_text), lb.item_id) for lb in raw}
    judged, unresolved = resolve_labels(raw, include_ties=include_ties)
    texts = {query_id(lb.query_text): lb.query_text for lb in judged}
    relevant = {query_id(lb.query_text) for lb in judged if lb.grade >= 1}
    qrels = [ir_measures.Qrel(query_id(lb.query_text), lb.item_id, lb.grade) for lb in judged]
    skipped = tuple(sorted(texts[q] for q in texts if q not in relevant))
    warnings = []
    if unresolved:
        warnings.append(f"{len(unresolved)} (query, item) pairs are split evenly between annotators and not "
                        f"adjudicated: {'scored at the lower grade' if include_ties else 'left out'} "
                        "(`labels agreement` lists them)")
    if compare is not None:
        missing = [s for s in compare if s not in runs]
        if missing:
            raise ValidationError(f"--compare: no system {', '.join(missing)}; systems: {', '.join(runs)}")
    per_query: list[QueryScores] = []
    means: list[MeanScores] = []
    systems: list[SystemScores] = []
    matrices: dict[str, np.ndarray] = {}
    for system, ranking in runs.items():
        unlabelled = [q for q in ranking if query_id(q) not in texts]
        if unlabelled:
            warnings.append(f"{system}: {len(unlabelled)} ranked queries have no labels; ignored")
        by_qid = {query_id(q): list(dict.fromkeys(items)) for q, items in ranking.items()}
        run = [
            ir_measures.ScoredDoc(qid, item, float(len(items) - rank))  # trec_eval sorts by score
            for qid, items in by_qid.items()
            if qid in relevant
            for rank, item in enumerate(items)
        ]
        values: dict[str, dict[str, float]] = {q: dict.fromkeys(names, 0.0) for q in sorted(relevant)}
        for metric in ir_measures.iter_calc(measures, qrels, run) if run else ():
            if metric.query_id in values:
                values[metric.query_id][str(metric.measure)] = float(metric.value)
        per_query += [QueryScores(reranker=system, query_id=q, query=texts[q], values=v) for q, v in values.items()]
        n = len(values)
        matrix = np.array([[v[m] for m in names] for v in values.values()], dtype=float).reshape(n, len(names))
        matrices[system] = matrix
        mean = matrix.mean(axis=0) if n else np.zeros(len(names))
        means.append(MeanScores(reranker=system, n_queries=n, values=dict(zip(names, map(float, mean), strict=True))))
        low, high = bootstrap_ci(matrix, bootstrap, seed) if n else (mean, mean)
        tops = {k: [by_qid.get(q, [])[:k] for q in values] for k in sorted(set(ks))}
        systems.append(SystemScores(
            system=system, n_queries=n,
            metrics={m: Estimate(value=float(mean[i]), ci_low=float(low[i]), ci_high=float(high[i]))
                     for i, m in enumerate(names)},
            unjudged={str(k): sum((q, item) not in judged_pairs for q, top in zip(values, lists, strict=True)
                                  for item in top) for k, lists in tops.items()},
            ranked={str(k): sum(map(len, lists)) for k, lists in tops.items()},
        ))
    comparisons: list[Comparison] = []
    if compare is not None:
        a, b = compare
        diff = matrices[a] - matrices[b]
        low, high = bootstrap_ci(diff, bootstrap, seed)
        for i, m in enumerate(names):
            n = diff.shape[0]
            comparisons.append(Comparison(
                a=a, b=b, measure=m, n_queries=n, mean_a=float(matrices[a][:, i].mean()) if n else 0.0,
                mean_b=float(matrices[b][:, i].mean()) if n else 0.0, delta=float(diff[:, i].mean()) if n else 0.0,
                ci_low=float(low[i]) if n else 0.0, ci_high=float(high[i]) if n else 0.0,
                p_value=paired_p_value(matrices[a][:, i], matrices[b][:, i], seed),
            ))
    lift: list[Lift] = []
    base = next((m for m in means if m.reranker == baseline), None)
    if base is None and runs:
        warnings.append(f"no {baseline!r} run: lift not computed")
    for mean_scores in means:
        if base is None or mean_scores.reranker == baseline:
            continue
        for m in names:
            b_value, v = base.values[m], mean_scores.values[m]
            lift.append(Lift(
                reranker=mean_scores.reranker, measure=m, baseline=b_value, value=v, delta=v - b_value,
                relative=(v - b_value) / b_value if b_value > 0 else None,
            ))
    return EvalReport(
        measures=tuple(names), baseline=baseline, per_query=tuple(per_query), means=tuple(means),
        lift=tuple(lift), systems=tuple(systems), comparisons=tuple(comparisons), skipped_queries=skipped,
        unresolved=len(unresolved), bootstrap=bootstrap, seed=seed, warnings=tuple(warnings),
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
