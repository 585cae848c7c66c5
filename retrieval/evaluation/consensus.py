"""One grade per (query, item): the adjudication rule over the annotators' latest labels (adjudicated first, else
the only annotator, else the consensus grade; ties left out unless asked)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from retrieval.evaluation.labels import ADJUDICATED, CONSENSUS, Label, query_id
from retrieval.models import Record


class Unresolved(Record):
    """A (query, item) whose annotators' grades give no consensus and that nobody adjudicated."""

    query_text: str
    item_id: str
    grades: dict[str, int]  # annotator -> grade


def latest_per_annotator(labels: Iterable[Label], graph_version: str | None = None) -> list[Label]:
    """One label per (query, item, annotator): the one on `graph_version`, or else the most recently updated."""
    latest: dict[tuple[str, str, str], Label] = {}
    for lb in labels:
        if graph_version is not None and lb.graph_version != graph_version:
            continue
        key = (lb.query_text, lb.item_id, lb.annotator)
        if key not in latest or lb.updated_at > latest[key].updated_at:
            latest[key] = lb
    return list(latest.values())


def consensus_grade(grades: Sequence[int], *, include_ties: bool = False) -> int | None:
    """The median of the annotators' grades; for an even count whose two middle grades differ, None (a tie),
    or their lower one with `include_ties` (never overstates relevance). A strict majority is always the median."""
    ordered = sorted(grades)
    if not ordered:
        return None
    n = len(ordered)
    low, high = ordered[(n - 1) // 2], ordered[n // 2]
    return low if low == high or include_ties else None


def resolve_labels(
    labels: Iterable[Label], graph_version: str | None = None, *, include_ties: bool = False
) -> tuple[list[Label], list[Unresolved]]:
    """One label per (query, item) by the adjudication rule, and the (query, item)s left unresolved.

    Rule: an `adjudicated` label first; else the only annotator's label; else the consensus grade of every
    annotator's latest label (`consensus_grade`), marked annotator `consensus`. Ties are excluded unless
    `include_ties`.
    """
    groups: dict[tuple[str, str], list[Label]] = defaultdict(list)
    for lb in latest_per_annotator(labels, graph_version):
        groups[lb.query_text, lb.item_id].append(lb)
    out: list[Label] = []
    unresolved: list[Unresolved] = []
    for (query, item), group in groups.items():
        decided = [lb for lb in group if lb.annotator == ADJUDICATED]
        voters = [lb for lb in group if lb.annotator not in (ADJUDICATED, CONSENSUS)]
        if decided:
            out.append(decided[0])
        elif len(voters) == 1 or (not voters and group):
            out.append((voters or group)[0])
        else:
            grades = [lb.grade for lb in voters]
            if consensus_grade(grades) is None:
                unresolved.append(Unresolved(query_text=query, item_id=item,
                                             grades={lb.annotator: lb.grade for lb in voters}))
            grade = consensus_grade(grades, include_ties=include_ties)
            if grade is not None:
                newest = max(voters, key=lambda lb: lb.updated_at)
                out.append(newest.model_copy(update={"grade": grade, "annotator": CONSENSUS, "note": ""}))
    out.sort(key=lambda lb: (query_id(lb.query_text), lb.item_id))
    unresolved.sort(key=lambda u: (query_id(u.query_text), u.item_id))
    return out, unresolved


def shown_labels(labels: Iterable[Label], annotator: str) -> dict[str, Label]:
    """item id -> the label to show `annotator` beside an item of one query: their own, else the resolved one
    (adjudication, consensus, or the only other annotator's), so a grade given anywhere shows everywhere."""
    labels = list(labels)
    out = {lb.item_id: lb for lb in current_labels(labels)}
    out.update({lb.item_id: lb for lb in latest_per_annotator(labels) if lb.annotator == annotator})
    return out


def current_labels(labels: Iterable[Label], graph_version: str | None = None) -> list[Label]:
    """One label per (query, item) by the adjudication rule (`resolve_labels`; ties left out): with a single
    annotator, that annotator's label of `graph_version`, or else their most recent one."""
    return resolve_labels(labels, graph_version)[0]
