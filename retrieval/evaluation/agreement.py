"""Inter-annotator agreement on graded labels, and the disagreements to adjudicate.

- Cohen's kappa for every pair of annotators on the items both graded (Cohen 1960), unweighted and with
  quadratic weights (Cohen 1968; for ordinal grades 0-3 a 3-vs-2 split costs less than 3-vs-0), computed by
  scikit-learn's `cohen_kappa_score`.
- Krippendorff's alpha at the ordinal level over every annotator at once (Krippendorff 2004; Hayes &
  Krippendorff 2007), computed by the `krippendorff` package. It takes any number of annotators and items that
  not everyone graded; it stands in for Fleiss' kappa (Fleiss 1971), which needs every item graded by the same
  number of annotators and has no well-kept implementation among this project's dependencies.
A statistic that is undefined (e.g. every grade the same, so no chance correction is possible) is None with a
note saying why. The `adjudicated` annotator is an adjudication, not a rater: it is left out of the statistics.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Iterable, Mapping
from itertools import combinations

import numpy as np

from retrieval.evaluation.consensus import consensus_grade, latest_per_annotator
from retrieval.evaluation.labels import ADJUDICATED, CONSENSUS, Label, query_id
from retrieval.models import Record

GRADES = (0, 1, 2, 3)


class PairAgreement(Record):
    """Two annotators on the items both graded."""

    a: str
    b: str
    items: int
    observed: float | None  # share of items with the same grade
    kappa: float | None
    weighted_kappa: float | None  # quadratic weights


class Disagreement(Record):
    """An item whose annotators gave different grades: each grade, the adjudication if any, and the grade the
    adjudication rule gives (None: a tie nobody adjudicated yet)."""

    query_id: str
    query: str
    item_id: str
    text: str = ""
    grades: dict[str, int]
    adjudicated: int | None = None
    resolved: int | None = None


class AgreementReport(Record):
    annotators: tuple[str, ...]
    items: int  # items graded by two or more annotators
    pairs: tuple[PairAgreement, ...] = ()
    alpha_ordinal: float | None = None
    disagreements: tuple[Disagreement, ...] = ()
    notes: tuple[str, ...] = ()


def _kappa(y1: list[int], y2: list[int], weights: str | None) -> float | None:
    from sklearn.metrics import cohen_kappa_score

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # undefined -> nan, reported as None with a note
        value = float(cohen_kappa_score(y1, y2, labels=list(GRADES), weights=weights, replace_undefined_by=np.nan))
    return None if np.isnan(value) else value


def _alpha(matrix: np.ndarray) -> float | None:
    import krippendorff

    if matrix.shape[1] == 0:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            value = float(krippendorff.alpha(reliability_data=matrix, level_of_measurement="ordinal",
                                             value_domain=list(GRADES)))
        except ValueError:  # no item graded by two annotators
            return None
    return None if np.isnan(value) else value


def agreement(
    labels: Iterable[Label],
    graph_version: str | None = None,
    texts: Mapping[tuple[str, str], str] | None = None,
    query_ids: Mapping[str, str] | None = None,
) -> AgreementReport:
    """Kappa per pair, ordinal alpha over all, and every disagreement, from each annotator's latest labels.

    `texts` maps (query text, item id) to the item's text (e.g. from a pool), shown beside each disagreement;
    `query_ids` maps query text to a query set's id (listed in that order; default: `query_id(text)`).
    """
    latest = latest_per_annotator(labels, graph_version)
    grades: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    decided: dict[tuple[str, str], int] = {}
    for lb in latest:
        if lb.annotator == ADJUDICATED:
            decided[lb.query_text, lb.item_id] = lb.grade
        elif lb.annotator != CONSENSUS:
            grades[lb.query_text, lb.item_id][lb.annotator] = lb.grade
    annotators = tuple(sorted({a for g in grades.values() for a in g}))
    ids = dict(query_ids or {})
    order = {text: n for n, text in enumerate(ids)}
    shared = sorted((k for k, g in grades.items() if len(g) >= 2),
                    key=lambda k: (order.get(k[0], len(order)), ids.get(k[0]) or query_id(k[0]), k[1]))
    notes: list[str] = []
    if len(annotators) < 2:
        notes.append(f"{len(annotators)} annotator(s): agreement needs two annotators grading the same items")
    pairs = []
    for a, b in combinations(annotators, 2):
        both = [k for k in shared if a in grades[k] and b in grades[k]]
        y1, y2 = [grades[k][a] for k in both], [grades[k][b] for k in both]
        kappa = _kappa(y1, y2, None) if both else None
        if both and kappa is None:
            notes.append(f"kappa {a!r}/{b!r} is undefined: their {len(both)} shared items leave no chance "
                         "correction (one grade throughout)")
        pairs.append(PairAgreement(
            a=a, b=b, items=len(both), observed=(sum(x == y for x, y in zip(y1, y2, strict=True)) / len(both))
            if both else None, kappa=kappa, weighted_kappa=_kappa(y1, y2, "quadratic") if both else None,
        ))
    matrix = np.array([[grades[k].get(a, np.nan) for k in shared] for a in annotators], dtype=float)
    alpha = _alpha(matrix) if len(annotators) >= 2 else None
    if shared and alpha is None:
        notes.append("Krippendorff's alpha is undefined: the shared items all carry one grade")
    texts = texts or {}
    disagreements = tuple(
        Disagreement(
            query_id=ids.get(k[0]) or query_id(k[0]), query=k[0], item_id=k[1], text=texts.get(k, ""),
            grades=dict(grades[k]),
            adjudicated=decided.get(k),
            resolved=decided[k] if k in decided else consensus_grade(list(grades[k].values())),
        )
        for k in shared if len(set(grades[k].values())) > 1
    )
    return AgreementReport(annotators=annotators, items=len(shared), pairs=tuple(pairs), alpha_ordinal=alpha,
                           disagreements=disagreements, notes=tuple(notes))
