"""Facts as text (seed formats), their book/chapter sources, and the agent-facing Markdown.

Paths: `A --[REL: description]--> B --[REL2: description]--> C` (the arrow follows each edge's own
direction); global relations: `A --[REL]--> B: description` (seed "Task 22: Knowledge Graph Search Tool").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from retrieval.embedding import Embedder
from retrieval.graph.traverse import chunk_sources, path_steps, read_chunks, readable, verbalize
from retrieval.items import path_item_id, relation_item_id
from retrieval.models import (
    Chunk,
    Entity,
    EvidenceStrength,
    FactStep,
    GlobalRelation,
    SearchResult,
    SemanticPath,
    SourceMetadata,
    VerbalizedFact,
)
from retrieval.stores.base import RELATIONS, VectorStore, unique

HEADER = "## Retrieved Knowledge from Knowledge Graph"
NOTHING = "No relevant knowledge found for this query."


def path_nodes(path: SemanticPath) -> list[Entity]:
    return [path.source_node, *path.intermediate_nodes, path.destination_node]


def path_text(path: SemanticPath) -> str:
    """`A --[REL: description]--> B ...` chained over every hop of the path."""
    return verbalize(path_nodes(path), path.edges)


def global_text(rel: GlobalRelation) -> str:
    """`A --[REL]--> B: description`."""
    head = f"{rel.source.name} --[{rel.relation_type}]--> {rel.target.name}"
    return f"{head}: {rel.description}" if rel.description else head


def screen_text(fact: VerbalizedFact) -> str:
    """How a fact reads on screen: one layout for every fact with relations (`traverse.readable`: relation,
    direction, then the description as text); a passage's own text otherwise."""
    return readable(fact.steps) if fact.steps else fact.text


def _validity(values: Iterable[str | None], latest: bool) -> str | None:
    present = sorted(v for v in values if v)
    return (present[-1] if latest else present[0]) if present else None


def path_fact(path: SemanticPath) -> VerbalizedFact:
    """A local fact: the path text with its PPR and path-semantic scores and its edges' chunks."""
    nodes = path_nodes(path)
    return VerbalizedFact(
        id=path_item_id([n.id for n in nodes], [e.id for e in path.edges]),
        type="local",
        channel="graph",
        text=path_text(path),
        steps=path_steps(nodes, path.edges),
        scores={"ppr": path.ppr_score, "path_semantic": path.path_semantic_score},
        chunk_ids=tuple(dict.fromkeys(c for e in path.edges for c in e.source_chunks)),
        entity_ids=tuple(n.id for n in nodes),
        relation_ids=tuple(e.id for e in path.edges),
        # a path holds only while all of its edges hold
        valid_at=_validity((e.valid_at for e in path.edges), latest=True),
        invalid_at=_validity((e.invalid_at for e in path.edges), latest=False),
    )


def global_fact(rel: GlobalRelation) -> VerbalizedFact:
    """A global fact: the relation text with its description-search similarity."""
    r = rel.relation
    return VerbalizedFact(
        id=relation_item_id(r.id),
        type="global",
        channel="graph",
        text=global_text(rel),
        steps=(FactStep(left=rel.source.name, relation=rel.relation_type, right=rel.target.name,
                        description=rel.description),),
        scores={"similarity": rel.score},
        chunk_ids=r.source_chunks,
        entity_ids=(rel.source.id, rel.target.id),
        relation_ids=(r.id,),
        valid_at=r.valid_at,
        invalid_at=r.invalid_at,
    )


def fact_vectors(store: VectorStore, embedder: Embedder, facts: Sequence[VerbalizedFact]) -> np.ndarray:
    """One unit vector per fact, without embedding graph facts again at query time.

    A graph fact's vector is the normalised sum of its relations' description vectors, stored at ingest
    (a path reads as its edges' sentences); a fact without stored relations (a document chunk) is embedded
    from its text.
    """
    rel_ids = unique(r for f in facts for r in f.relation_ids)
    stored = dict(zip(rel_ids, store.vectors(RELATIONS, rel_ids), strict=True)) if rel_ids else {}
    out = np.zeros((len(facts), embedder.dim), dtype=np.float32)
    for row, fact in enumerate(facts):
        if fact.relation_ids:
            out[row] = np.sum([stored[r] for r in fact.relation_ids], axis=0)
    norms = np.linalg.norm(out, axis=1)
    missing = [row for row, n in enumerate(norms) if n == 0]
    if missing:
        out[missing] = embedder.embed([facts[row].text for row in missing])
        norms[missing] = 1.0
    return out / norms[:, None]


def with_sources(
    facts: Sequence[VerbalizedFact], vectors: VectorStore, max_per_fact: int = 5
) -> tuple[list[VerbalizedFact], dict[str, Chunk]]:
    """Resolve every fact's chunk ids to SourceMetadata in ONE store call; dedup per fact by (source, book).
    Also returns the chunk records that call read, by id, so the result carries their text without a second read."""
    ids = list(dict.fromkeys(c for f in facts for c in f.chunk_ids if c))
    chunks = read_chunks(vectors, ids) if ids else {}
    by_chunk = {s.chunk_id: s for s in chunk_sources(ids, chunks)}
    out = []
    for fact in facts:
        seen: dict[tuple[str, str], SourceMetadata] = {}
        for cid in fact.chunk_ids:
            src = by_chunk.get(cid)
            if src is not None:
                seen.setdefault((src.source, src.original_document), src)
        out.append(fact.model_copy(update={"sources": tuple(seen.values())[:max_per_fact]}))
    return out, chunks


def cited(facts: Iterable[VerbalizedFact], chunks: Mapping[str, Chunk]) -> dict[str, Chunk]:
    """The records of the chunks `facts` cite (their chunk ids and sources), in citation order."""
    ids = dict.fromkeys(c for f in facts for c in (*f.chunk_ids, *(s.chunk_id for s in f.sources)) if c)
    return {c: chunks[c] for c in ids if c in chunks}


def source_line(sources: Sequence[SourceMetadata]) -> str:
    """`Book — Chapter (author); Book2` for the sources of one fact."""
    parts = []
    for s in sources:
        text = s.original_document or s.source
        if s.chapter:
            text += f" — {s.chapter}"
        if s.author:
            text += f" ({s.author})"
        parts.append(text)
    return "; ".join(dict.fromkeys(parts))


def _one_line(text: str) -> str:
    return " ".join(text.split())


def weak_matches_text(weak: Sequence[VerbalizedFact], strength: EvidenceStrength | None) -> str:
    """The no-match message, the evidence strength against its threshold, the nearest candidates as weak matches."""
    lines = [NOTHING]
    if strength is not None:
        lines.append(f"(evidence strength {strength.score:.2f}, below the threshold {strength.threshold:.2f})")
    if weak:
        lines += ["", "Weak matches (the nearest candidates, not evidence):"]
        lines += [f"{n}. {_one_line(f.text)}" for n, f in enumerate(weak, start=1)]
    return "\n".join(lines)


def to_markdown(result: SearchResult) -> str:
    """The seed's agent context: a header, Entities, then Relationships & Paths with a source line each."""
    if result.no_match:
        return weak_matches_text(result.weak_matches, result.evidence_strength) + "\n"
    if not result.facts:
        return NOTHING
    lines = [HEADER, "", f"**Query:** {_one_line(result.query)}", ""]
    nodes = {n.id: n for n in result.subgraph.nodes}
    key_ids = [i for i in dict.fromkeys([*result.seed_ids, *result.destination_ids]) if i in nodes]
    if key_ids:
        lines.append("### Entities")
        for nid in key_ids:
            node = nodes[nid]
            role = "seed" if nid in result.seed_ids else "related"
            desc = f": {_one_line(node.description)}" if node.description else ""
            lines.append(f"- **{_one_line(node.name)}** ({node.type}, {role}){desc}")
        lines.append("")
    lines.append("### Relationships & Paths")
    for n, fact in enumerate(result.facts, start=1):
        lines.append(f"{n}. {_one_line(fact.text)}")
        if fact.sources:
            lines.append(f"   _Source: {_one_line(source_line(fact.sources))}_")
    return "\n".join(lines) + "\n"
