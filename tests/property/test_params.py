"""Property tests: search and tool parameters. Valid values are accepted unchanged; anything else raises a
ValidationError with a message, never another exception, and the tools refuse before touching a store."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError as PydanticValidationError

from retrieval.errors import ValidationError
from retrieval.models import SearchParams
from retrieval.search.retriever import check_query
from retrieval.search.tools import (
    MAX_QUERY_CHARS,
    ComprehensiveParams,
    HybridParams,
    ToolParams,
    comprehensive_search,
    graph_search,
    hybrid_search,
    vector_search,
)

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(-5, 200), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30), st.sampled_from(["mmr", "llm", "none", "10", "0.5", "", " "]),
)
JSONISH = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
SEARCH_FIELDS = sorted(SearchParams.model_fields)
TOOL_FIELDS = ["query", "limit", "text_weight", "use_vector", "use_graph"]


def message_of(exc: PydanticValidationError) -> str:
    assert exc.errors(), "a validation error names what is wrong"
    text = str(exc)
    assert text.strip()
    return text


@settings(max_examples=300, deadline=None)
@given(values=st.dictionaries(st.sampled_from([*SEARCH_FIELDS, "other"]), JSONISH, max_size=5))
def test_search_params_accept_or_explain(values: dict[str, Any]) -> None:
    try:
        params = SearchParams.model_validate(values)
    except PydanticValidationError as exc:
        message_of(exc)
        return
    assert "other" not in values  # unknown fields are refused
    assert 1 <= params.max_results <= 50 and 1 <= params.max_seed_nodes <= 50
    assert params.max_hops is None or 1 <= params.max_hops <= 4
    assert 0 < params.damping < 1 and math.isfinite(params.damping) and 10 <= params.max_edges <= 100_000
    assert SearchParams.model_validate_json(params.model_dump_json()) == params


VALID_SEARCH = st.fixed_dictionaries({}, optional={
    "max_results": st.integers(1, 50), "max_seed_nodes": st.integers(1, 50),
    "max_hops": st.none() | st.integers(1, 4), "top_k_destinations": st.integers(1, 100),
    "top_k_per_query": st.integers(1, 50), "damping": st.floats(0.001, 0.999),
    "max_edges": st.integers(10, 100_000), "rerank": st.sampled_from(["mmr", "llm", "none"]),
    "full_graph_max_edges": st.integers(0, 10**9),
})


@settings(max_examples=200, deadline=None)
@given(values=VALID_SEARCH)
def test_valid_search_params_are_kept_as_given(values: dict[str, Any]) -> None:
    params = SearchParams.model_validate(values)
    assert {k: getattr(params, k) for k in values} == values


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200))
def test_search_params_json_from_a_url_never_fails_otherwise(text: str) -> None:
    try:
        SearchParams.model_validate_json(text)
    except PydanticValidationError as exc:
        message_of(exc)


@settings(max_examples=200, deadline=None)
@given(values=st.dictionaries(st.sampled_from([*TOOL_FIELDS, "other"]), JSONISH, max_size=5),
       query=st.none() | st.text(max_size=50) | st.text(min_size=MAX_QUERY_CHARS - 2, max_size=MAX_QUERY_CHARS + 2))
def test_tool_params_accept_or_explain(values: dict[str, Any], query: str | None) -> None:
    if query is not None:
        values = {**values, "query": query}
    for model in (ToolParams, HybridParams, ComprehensiveParams):
        try:
            p = model.model_validate(values)
        except PydanticValidationError as exc:
            message_of(exc)
            continue
        assert isinstance(p.query, str) and p.query.strip() and len(p.query) <= MAX_QUERY_CHARS
        assert 1 <= p.limit <= 50
        if isinstance(p, HybridParams):
            assert 0.0 <= p.text_weight <= 1.0


@settings(max_examples=120, deadline=None)
@given(query=JSONISH | st.text(max_size=2100), limit=JSONISH, weight=JSONISH)
def test_tools_refuse_bad_parameters_before_touching_a_store(query: Any, limit: Any, weight: Any) -> None:
    """With no graph at all (kg=None), a bad parameter must still come back as a ValidationError."""
    calls = (
        (ToolParams, {"query": query, "limit": limit}, lambda: vector_search(None, query, limit)),  # type: ignore[arg-type]
        (ToolParams, {"query": query, "limit": limit}, lambda: graph_search(None, query, limit)),  # type: ignore[arg-type]
        (HybridParams, {"query": query, "limit": limit, "text_weight": weight},
         lambda: hybrid_search(None, query, limit, weight)),  # type: ignore[arg-type]
        (ComprehensiveParams, {"query": query, "limit": limit},
         lambda: comprehensive_search(None, query, limit)),  # type: ignore[arg-type]
    )
    for model, values, call in calls:
        try:
            model.model_validate(values)
        except PydanticValidationError:
            with pytest.raises(PydanticValidationError):
                call()


@settings(max_examples=300, deadline=None)
@given(query=JSONISH | st.text(max_size=2100))
def test_check_query_accepts_or_raises_a_validation_error(query: Any) -> None:
    try:
        q = check_query(query)
    except ValidationError as exc:
        assert str(exc)
        return
    assert q == query.strip() and q and len(query) <= MAX_QUERY_CHARS
