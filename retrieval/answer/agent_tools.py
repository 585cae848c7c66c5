"""Agent tools: `search_knowledge_graph(query, max_results) -> Markdown` (seed "Task 22") and
`answer_with_knowledge_graph(query) -> Markdown` (a grounded answer with citations, seed 004).

The retriever's state (an opened graph version with its in-memory indexes) comes from an explicit,
cached factory keyed on (Settings, graph name, version): a re-ingest is picked up, nothing is global.
"""

from __future__ import annotations

import asyncio
from functools import lru_cache

from pydantic import ValidationError as PydanticValidationError

from retrieval.config import Settings
from retrieval.errors import ValidationError
from retrieval.graph import catalog
from retrieval.graph.runtime import KG, open_kg
from retrieval.models import Enhancements, SearchParams
from retrieval.search.nomatch import gate
from retrieval.search.retriever import check_query, search
from retrieval.search.verbalize import to_markdown


@lru_cache(maxsize=4)
def _kg_for(settings: Settings, name: str, version: str) -> KG:
    # `version` is part of the key only: a new version makes a new entry (old ones age out of the LRU).
    return open_kg(settings, name)


def kg_for(settings: Settings) -> KG:
    """The opened graph that `settings` names (or the active one), built once per graph version."""
    handle = catalog.resolve(settings.data_dir, settings.graph_name or None)
    return _kg_for(settings, handle.name, handle.version)


async def search_knowledge_graph(query: str, max_results: int = 10, *, settings: Settings | None = None) -> str:
    """Search the knowledge graph and return the facts, paths and sources as Markdown for an agent.

    Raises ValidationError for an empty or over-long query or max_results outside 1-50.
    """
    settings = settings or Settings.from_env()
    check_query(query)
    try:
        params = SearchParams.model_validate({"max_results": max_results})
    except PydanticValidationError as exc:
        raise ValidationError(f"max_results must be an integer from 1 to 50, got {max_results!r}") from exc
    kg = kg_for(settings)
    result = await asyncio.to_thread(search, kg, query, params, settings=settings)
    return to_markdown(gate(result))


async def answer_with_knowledge_graph(query: str, *, enhancements: Enhancements | None = None,
                                      settings: Settings | None = None) -> str:
    """Answer from the knowledge graph with [n] citations, as Markdown: written by Gemini with GEMINI_API_KEY,
    else extractive (labelled so); "No relevant knowledge found for this query." with the weak matches when
    nothing matches. Raises ValidationError for an empty or over-long query."""
    from retrieval.answer.synthesis import answer_question
    from retrieval.answer.synthesis import to_markdown as answer_markdown

    settings = settings or Settings.from_env()
    check_query(query)
    kg = kg_for(settings)
    answer = await asyncio.to_thread(answer_question, kg, query, settings=settings, enhancements=enhancements)
    return answer_markdown(answer)
