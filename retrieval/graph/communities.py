"""Communities and claims of a graph version: computed at ingest when the input brings none, kept in a sidecar.

Computed communities: Leiden on the undirected, weighted entity graph (Traag, Waltman & van Eck, "From Louvain
to Leiden: guaranteeing well-connected communities", Sci. Rep. 9, 2019; leidenalg on igraph, modularity, fixed
seed), then Leiden again inside each community larger than `SPLIT_MIN` for a second level, as GraphRAG builds
its hierarchy. Their titles name their most connected entities (weighted degree) and their summaries are counts read
from the data, never prose.

The sidecar `extras.json` of a version holds communities, claims and each book's chapter names; it is written
into the build directory before the atomic commit and read through the opened KG.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from retrieval.errors import StoreError
from retrieval.models import Chunk, Claim, Community, Entity, GraphData, Relation

EXTRAS = "extras.json"
SEED = 42  # Leiden is randomised; a fixed seed makes the same graph give the same communities
SPLIT_MIN = 12  # a level-0 community of more entities is split once more (level 1)
MIN_SIZE = 2  # a lone entity is no community
TOP_NAMES = 3  # entities named in a computed community's title
NAME_CHARS = 60  # of each name in a title


@dataclass(frozen=True)
class Extras:
    """What a graph version keeps beside its stores."""

    communities: tuple[Community, ...] = ()
    claims: tuple[Claim, ...] = ()
    chapter_names: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass
class CommunityIndex:
    """Communities by id and by member entity; claims by subject entity."""

    extras: Extras
    by_id: dict[str, Community] = field(default_factory=dict)
    by_entity: dict[str, list[str]] = field(default_factory=dict)
    claims_by_entity: dict[str, list[Claim]] = field(default_factory=dict)

    @classmethod
    def of(cls, extras: Extras) -> CommunityIndex:
        index = cls(extras, {c.id: c for c in extras.communities})
        for c in extras.communities:
            for eid in c.entity_ids:
                index.by_entity.setdefault(eid, []).append(c.id)
        for claim in extras.claims:
            if claim.subject_id is not None:
                index.claims_by_entity.setdefault(claim.subject_id, []).append(claim)
        return index

    @property
    def communities(self) -> tuple[Community, ...]:
        return self.extras.communities

    @property
    def levels(self) -> list[int]:
        return sorted({c.level for c in self.extras.communities})

    def ranked(self, level: int | None = None) -> list[Community]:
        """By level, then rank (highest first; computed ones have none), then size."""
        rows = [c for c in self.extras.communities if level is None or c.level == level]
        return sorted(rows, key=lambda c: (c.level, -(c.rank if c.rank is not None else -1.0), -c.size, c.id))

    def of_entity(self, entity_id: str) -> list[Community]:
        return [self.by_id[cid] for cid in self.by_entity.get(entity_id, [])]

    def claims_of(self, entity_ids: Iterable[str]) -> list[Claim]:
        return [claim for eid in entity_ids for claim in self.claims_by_entity.get(eid, [])]

    @property
    def unattached_claims(self) -> list[Claim]:
        """Claims whose subject is not an entity of the graph (kept as text)."""
        return [c for c in self.extras.claims if c.subject_id is None]


# --- chapters -----------------------------------------------------------------------------------


def chapter_names(chunks: Sequence[Chunk]) -> dict[str, tuple[str, ...]]:
    """Each book's distinct chapter names in reading order (by chunk position); books without any are left out."""
    by_book: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for c in chunks:
        if c.chapter:
            by_book[c.original_document].append((c.position, c.chapter))
    return {book: tuple(dict.fromkeys(ch for _, ch in sorted(rows, key=lambda r: r[0]))) for book, rows in
            by_book.items()}


# --- computed communities -----------------------------------------------------------------------


def _short(name: str) -> str:
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + "…"


def _counts(counter: Counter[str], limit: int = 5) -> str:
    return ", ".join(f"{k} {n}" for k, n in counter.most_common(limit))


def _describe(
    cid: str,
    level: int,
    parent: str | None,
    members: list[int],
    entities: Sequence[Entity],
    relations: Sequence[Relation],
    inside: list[int],
    strength: Sequence[float],
) -> Community:
    """A computed community: title from its most connected entities, summary from its counts (no prose)."""
    central = sorted(members, key=lambda i: (-strength[i], entities[i].name, i))
    names = [_short(entities[i].name) for i in central[:TOP_NAMES]]
    more = len(members) - len(names)
    title = ", ".join(names) + (f" (+{more})" if more > 0 else "")
    chunk_ids = tuple(dict.fromkeys(
        [c for i in members for c in entities[i].source_chunks]
        + [c for r in inside for c in relations[r].source_chunks]
    ))
    types = Counter(entities[i].type for i in members)
    rel_types = Counter(relations[r].relation_type for r in inside)
    parts = [
        f"Computed community (Leiden, modularity, seed {SEED}), level {level}"
        + (f", inside community {parent}" if parent is not None else "") + ":",
        f"{len(members)} entities, {len(inside)} relations between them, {len(chunk_ids)} source chunks.",
        f"Entity types: {_counts(types)}.",
    ]
    if rel_types:
        parts.append(f"Relation types: {_counts(rel_types)}.")
    parts.append("Most connected (weighted degree): " + ", ".join(_short(entities[i].name) for i in central[:5])
                 + ".")
    return Community(
        id=cid,
        level=level,
        parent=parent,
        title=title,
        summary=" ".join(parts),
        entity_ids=tuple(entities[i].id for i in members),
        relation_ids=tuple(relations[r].id for r in inside),
        chunk_ids=chunk_ids,
        size=len(members),
        source="computed",
    )


def compute_communities(data: GraphData) -> tuple[Community, ...]:
    """Leiden communities of the entity graph: level 0 on the whole graph, level 1 inside large communities."""
    import igraph as ig
    import leidenalg

    entities, relations = data.entities, data.relations
    if not entities or not relations:
        return ()
    idx = {e.id: i for i, e in enumerate(entities)}
    ends = [(idx[r.source_id], idx[r.target_id]) for r in relations]
    weights: dict[tuple[int, int], float] = defaultdict(float)
    for (a, b), rel in zip(ends, relations, strict=True):
        if a != b:
            weights[(min(a, b), max(a, b))] += max(rel.weight, 0.0) or 1.0
    graph = ig.Graph(n=len(entities), edges=list(weights), directed=False)
    graph.es["weight"] = list(weights.values())
    strength = graph.strength(weights="weight")  # O(E); PageRank would cost seconds at 1M edges

    def leiden(sub: ig.Graph) -> list[list[int]]:
        part = leidenalg.find_partition(sub, leidenalg.ModularityVertexPartition, weights="weight", seed=SEED)
        return [list(p) for p in part if len(p) >= MIN_SIZE]

    def inside(groups: list[list[int]]) -> list[list[int]]:
        """The relations with both ends in each group (one pass over the relations)."""
        member = [-1] * len(entities)
        for k, group in enumerate(groups):
            for i in group:
                member[i] = k
        out: list[list[int]] = [[] for _ in groups]
        for r, (a, b) in enumerate(ends):
            if a != b and member[a] == member[b] != -1:
                out[member[a]].append(r)
        return out

    top = sorted(leiden(graph), key=lambda m: (-len(m), m[0]))
    level1: list[tuple[str, list[int]]] = []
    for k, members in enumerate(top):
        if len(members) > SPLIT_MIN:
            parts = leiden(graph.induced_subgraph(members))
            if len(parts) > 1:
                level1 += [(str(k), [members[i] for i in p]) for p in sorted(parts, key=lambda p: (-len(p), p[0]))]
    out = [_describe(str(k), 0, None, m, entities, relations, rels, strength)
           for k, (m, rels) in enumerate(zip(top, inside(top), strict=True))]
    children: dict[str, list[str]] = defaultdict(list)
    for (parent, members), rels in zip(level1, inside([m for _, m in level1]), strict=True):
        cid = str(len(out))
        children[parent].append(cid)
        out.append(_describe(cid, 1, parent, members, entities, relations, rels, strength))
    return tuple(c.model_copy(update={"children": tuple(children[c.id])}) if c.id in children else c for c in out)


# --- sidecar ------------------------------------------------------------------------------------


def save_extras(directory: Path, extras: Extras) -> None:
    """Write the version's sidecar atomically (at build, and when a curation changes communities or claims)."""
    doc = {
        "communities": [c.model_dump(mode="json") for c in extras.communities],
        "claims": [c.model_dump(mode="json") for c in extras.claims],
        "chapter_names": {k: list(v) for k, v in extras.chapter_names.items()},
    }
    path = Path(directory) / EXTRAS
    tmp = path.with_name(f".{EXTRAS}.partial")
    with tmp.open("w", encoding="utf-8") as fh:
        json.dump(doc, fh, ensure_ascii=False)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def load_extras(directory: Path) -> Extras:
    """The version's sidecar; a version built before sidecars existed has none (empty Extras)."""
    path = Path(directory) / EXTRAS
    if not path.is_file():
        return Extras()
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return Extras(
            communities=tuple(Community.model_validate(c) for c in doc.get("communities", [])),
            claims=tuple(Claim.model_validate(c) for c in doc.get("claims", [])),
            chapter_names={k: tuple(v) for k, v in doc.get("chapter_names", {}).items()},
        )
    except (OSError, ValueError) as exc:
        raise StoreError(f"cannot read the communities sidecar {path}: {exc}") from exc


def claim_text(claim: Claim, names: dict[str, str] | None = None) -> str:
    """`SUBJECT [TYPE, STATUS] OBJECT: description (start – end)` as one line."""
    names = names or {}
    subject = names.get(claim.subject_id or "", claim.subject) or claim.subject
    obj = names.get(claim.object_id or "", claim.object) if claim.object_id else claim.object
    head = f"{subject} [{claim.type}" + (f", {claim.status}" if claim.status else "") + "]"
    if obj:
        head += f" {obj}"
    when = " – ".join(d for d in (claim.start_date, claim.end_date) if d)
    return head + (f": {claim.description}" if claim.description else "") + (f" ({when})" if when else "")
