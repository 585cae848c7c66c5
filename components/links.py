"""Links between pages that the graph view opens: Paths with both ends set, Search from an entity."""

from __future__ import annotations

from ui_text import clean

PATH_MODES = {"explore": "Explore a neighbourhood", "why": "Why are these connected?"}


def paths_params(graph: str, start: str, end: str) -> dict[str, str]:
    """Query parameters that open Paths on 'Why are these connected?' with both pickers set (by label)."""
    return {"graph": graph, "mode": PATH_MODES["why"], "a": start, "b": end}


def search_params(graph: str, name: str) -> dict[str, str]:
    """'Search from here': a KG search whose query is the entity's name, so name matching makes it the seed
    and Personalized PageRank walks from it."""
    return {"graph": graph, "q": clean(name)[:2000]}
