"""One entry point per search mode, so the CLI, the pages and the benchmarks dispatch the same way."""

from __future__ import annotations

from retrieval.config import Settings
from retrieval.errors import ValidationError
from retrieval.graph.runtime import KG
from retrieval.models import SearchParams, SearchResult
from retrieval.search.verbalize import weak_matches_text

MODES = ("kg", "vector", "graph", "hybrid", "comprehensive", "dual", "multidoc")
TEXT_MODES = frozenset({"vector", "hybrid", "comprehensive", "dual", "multidoc"})  # they search source chunks
NO_TEXT = ("this graph has no source text (0 chunks, e.g. a GraphML or CSV import): document search finds "
           "nothing; the kg and graph modes search its entities and relations")


def run_mode(
    kg: KG,
    mode: str,
    query: str,
    *,
    limit: int = 10,
    text_weight: float = 0.3,
    params: SearchParams | None = None,
    settings: Settings | None = None,
    no_match: bool = True,
) -> SearchResult:
    """Run `mode` on `query`; `params` applies to the KG pipeline, `limit`/`text_weight` to the tools.

    `no_match`: apply the no-match signal (`retrieval.search.nomatch.gate`); evaluation turns it off to rank passages.
    """
    from retrieval.search import nomatch

    result = _dispatch(kg, mode, query, limit=limit, text_weight=text_weight, params=params, settings=settings)
    if mode in TEXT_MODES and not kg.handle.manifest.get("counts", {}).get("chunks", 1):
        result = result.model_copy(update={"warnings": (*result.warnings, NO_TEXT)})
    return nomatch.gate(result, kg) if no_match else result


def _dispatch(
    kg: KG,
    mode: str,
    query: str,
    *,
    limit: int,
    text_weight: float,
    params: SearchParams | None,
    settings: Settings | None,
) -> SearchResult:
    from retrieval.search import dual_channel, multidoc, retriever, tools

    if mode == "kg":
        base = params or SearchParams.model_validate({"max_results": limit})
        result = retriever.search(kg, query, base, settings=settings)
    elif mode == "vector":
        result = tools.vector_search(kg, query, limit)
    elif mode == "graph":
        result = tools.graph_search(kg, query, limit)
    elif mode == "hybrid":
        result = tools.hybrid_search(kg, query, limit, text_weight)
    elif mode == "comprehensive":
        result = tools.comprehensive_search(kg, query, limit)
    elif mode == "dual":
        result = dual_channel.dual_channel_search(kg, query, limit)
    elif mode == "multidoc":
        result = multidoc.multidoc_search(kg, query, num_docs=min(limit, 20))
    else:
        raise ValidationError(f"unknown mode {mode!r}; valid: {', '.join(MODES)}")
    return result


def cited_chunks(result: SearchResult) -> set[str]:
    """Chunk ids cited by a result's items (for comparing modes)."""
    return {c for f in result.facts for c in f.chunk_ids}


def jaccard(a: set[str], b: set[str]) -> float:
    """|A ∩ B| / |A ∪ B|; 1.0 for two empty sets."""
    return len(a & b) / len(a | b) if a | b else 1.0


def to_text(result: SearchResult) -> str:
    """A plain listing of a non-KG result: rank, main score, citation, text and source."""
    lines = [f"# {result.mode} search: {result.query}"]
    for n, f in enumerate(result.facts, 1):
        score = next((f.scores[k] for k in ("hybrid", "vector", "similarity", "ppr") if k in f.scores), 0.0)
        src = f.sources[0] if f.sources else None
        where = f" — {src.original_document} / {src.chapter}" if src else ""
        text = " ".join(f.text.split())
        lines.append(f"{n:>2}. [{score:.3f}] {f.citation + ' ' if f.citation else ''}{text[:300]}{where}")
    lines += [f"warning: {w}" for w in result.warnings]
    if result.no_match:
        lines.append(weak_matches_text(result.weak_matches, result.evidence_strength))
    elif not result.facts:
        lines.append("No results.")
    return "\n".join(lines) + "\n"
