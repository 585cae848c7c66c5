"""Grades follow the graph: labels whose items a curation moved (a merged entity, a combined relation) count for
the item that took them over; labels whose evidence was deleted are set apart and said so
(`retrieval.curation.items`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from retrieval.curation.items import Followed, ItemMap, graph_item_map
from retrieval.evaluation.labels import Label
from retrieval.models import Record


class Gone(Record):
    """A label whose item's evidence the graph no longer holds."""

    label: Label
    why: str


def follow_labels(labels: Iterable[Label], items: ItemMap) -> tuple[list[Label], list[Gone]]:
    """Labels with their item ids mapped to where the items stand now, and those whose evidence was deleted.
    Two labels of one annotator that land on one item (both merged entities graded) keep the latest."""
    kept: dict[tuple[str, str, str, str], Label] = {}
    gone: list[Gone] = []
    for lb in labels:
        now: Followed = items.follow(lb.item_id)
        if now.status == "deleted":
            gone.append(Gone(label=lb, why=now.note))
            continue
        moved = lb if now.item_id == lb.item_id else lb.model_copy(update={"item_id": now.item_id})
        key = (moved.query_text, moved.item_id, moved.graph_version, moved.annotator)
        if key not in kept or (moved.updated_at or "") > (kept[key].updated_at or ""):
            kept[key] = moved
    return list(kept.values()), gone


def followed(data_dir: Path, graph: str, labels: Iterable[Label]) -> tuple[list[Label], list[Gone]]:
    """`follow_labels` through the curation log of graph `graph` (labels unchanged if it was never curated)."""
    return follow_labels(labels, graph_item_map(data_dir, graph))


def gone_note(gone: list[Gone]) -> str:
    """One sentence on the grades whose evidence was deleted ('' if none)."""
    if not gone:
        return ""
    first = gone[0]
    return (f"{len(gone)} grade(s) are on items whose evidence was deleted from the graph (e.g. "
            f"{first.label.item_id!r}: {first.why}); they are left out")
