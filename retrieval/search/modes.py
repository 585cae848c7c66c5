"""One entry point per search mode, so the CLI, the pages and the benchmarks dispatch the same way."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from retrieval.config import Settings
from retrieval.errors import ValidationError
from retrieval.graph.runtime import KG
from retrieval.models import SearchParams, SearchResult
from retrieval.search import dual_channel, multidoc, nomatch, retriever, tools
from retrieval.search.verbalize import weak_matches_text

NO_TEXT = ("this graph has no source text (0 chunks, e.g. a GraphML or CSV import): document search finds "
           "nothing; the kg and graph modes search its entities and relations")


@dataclass(frozen=True)
class Ask:
    """What a mode may use: `limit` and `text_weight` (the tools), `params` and `settings` (the KG pipeline)."""

    limit: int = 10
    text_weight: float = 0.3
    params: SearchParams | None = None
    settings: Settings | None = None


@dataclass(frozen=True)
class Mode:
    """One search mode: how it runs, and whether it searches source chunks (then a graph without text says so)."""

    run: Callable[[KG, str, Ask], SearchResult]
    text: bool


def _kg(kg: KG, query: str, ask: Ask) -> SearchResult:
    params = ask.params or SearchParams.model_validate({"max_results": ask.limit})
    return retriever.search(kg, query, params, settings=ask.settings)


# The search modes, in the order the pages and the CLI offer them.
TABLE: dict[str, Mode] = {
    "kg": Mode(_kg, text=False),
    "vector": Mode(lambda kg, q, a: tools.vector_search(kg, q, a.limit), text=True),
    "graph": Mode(lambda kg, q, a: tools.graph_search(kg, q, a.limit), text=False),
    "hybrid": Mode(lambda kg, q, a: tools.hybrid_search(kg, q, a.limit, a.text_weight), text=True),
    "comprehensive": Mode(lambda kg, q, a: tools.comprehensive_search(kg, q, a.limit), text=True),
    "dual": Mode(lambda kg, q, a: dual_channel.dual_channel_search(kg, q, a.limit), text=True),
    "multidoc": Mode(lambda kg, q, a: multidoc.multidoc_search(kg, q, num_docs=min(a.limit, 20)), text=True),
}
MODES = tuple(TABLE)
TEXT_MODES = frozenset(name for name, mode in TABLE.items() if mode.text)  # they search source chunks


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

    `no_match`: apply the no-match signal (`nomatch.gate`); evaluation turns it off to rank passages.
    """
    if mode not in TABLE:
        raise ValidationError(f"unknown mode {mode!r}; valid: {', '.join(MODES)}")
    with kg.reading():  # a curation changeset waits: the search sees the graph before or after it
        result = TABLE[mode].run(kg, query, Ask(limit, text_weight, params, settings))
    if TABLE[mode].text and not kg.handle.manifest.get("counts", {}).get("chunks", 1):
        result = result.model_copy(update={"warnings": (*result.warnings, NO_TEXT)})
    return nomatch.gate(result, kg) if no_match else result


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
