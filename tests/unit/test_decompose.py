"""Query decomposition: name matching, relationship detection, and Gemini through the local stand-in."""

from __future__ import annotations

import json

import numpy as np
import pytest

from retrieval.config import Settings
from retrieval.graph.index import build_index, name_matcher
from retrieval.search.decompose import (
    decompose,
    entity_mentions,
    is_relationship_query,
    offline_decomposition,
)
from retrieval.stores.base import EdgeArrays, VectorHit
from tests.gemini_stub import gemini_stub

NAMES = ["price elasticity", "penetration pricing", "Aschenbrödel", "price", "the", "New York", "York"]


@pytest.fixture(scope="module")
def index():  # type: ignore[no-untyped-def]
    n = len(NAMES)
    arrays = EdgeArrays(
        node_ids=[f"n{i}" for i in range(n)], node_names=NAMES, node_types=["concept"] * n,
        node_chunks=[("c1",)] * n, src=np.array([0], dtype=np.int64), dst=np.array([1], dtype=np.int64),
        weight=np.ones(1), relation_ids=["r0"], relation_types=["INFORMS"],
        node_aliases=[("PED",), (), (), (), (), ("NYC",), ()],
    )
    return build_index(arrays)


def test_name_matching_is_word_bounded_longest_first_and_accent_folded(index) -> None:  # type: ignore[no-untyped-def]
    found = [m.name for m in name_matcher(index).find("How does Price-Elasticity shape penetration pricing in NYC?")]
    assert found == ["price elasticity", "penetration pricing", "nyc"]  # "price" inside a longer match dropped
    assert [m.name for m in name_matcher(index).find("priced out of new yorker")] == []  # no partial words
    assert [m.idx for m in name_matcher(index).find("Who wrote Aschenbrodel?")] == [2]
    assert [m.idx for m in name_matcher(index).find("the PED value")] == [0]  # alias; stop word "the" never


def test_mentions_add_only_close_embedding_neighbours(index) -> None:  # type: ignore[no-untyped-def]
    hits = [VectorHit("n5", 0.83, {}), VectorHit("n1", 0.5, {})]
    got = entity_mentions(index, "What about price elasticity?", hits)
    assert [(m.id, m.via) for m in got] == [("n0", "name"), ("n5", "vector")]


@pytest.mark.parametrize(
    ("query", "n_entities", "expected"),
    [
        ("How does brand awareness connect to conversion rate?", 1, True),
        ("What is the impact of churn?", 1, True),
        ("Which factors influence loyalty?", 0, True),
        ("What is price elasticity?", 1, False),
        ("Who founded Acme?", 1, False),
        ("Tell me about A and B", 2, True),
    ],
)
def test_relationship_queries(query: str, n_entities: int, expected: bool) -> None:
    assert is_relationship_query(query, n_entities) is expected


def test_offline_decomposition_sets_hops_and_subqueries() -> None:
    d = offline_decomposition("How does price elasticity affect penetration pricing?", ["price elasticity",
                                                                                       "penetration pricing"])
    assert d.hops == 2 and d.is_relationship_query and d.method == "offline"
    assert d.local_queries == ("price elasticity", "penetration pricing")
    assert d.global_queries == ("How does price elasticity affect penetration pricing?",
                                "price elasticity and penetration pricing relationship")
    simple = offline_decomposition("What is price elasticity?", ["price elasticity"])
    assert simple.hops == 1 and simple.global_queries == ("What is price elasticity?",)
    assert offline_decomposition("What is price elasticity?", ["price elasticity"], max_hops=3).hops == 3
    assert offline_decomposition("What is it?", []).local_queries  # never empty


def test_without_key_offline_says_so_by_its_method_not_a_warning() -> None:
    """No key is the design, not a degradation of this result: the method says offline (the Trace tab shows it)."""
    d, warnings = decompose("What is price elasticity?", ["price elasticity"], settings=Settings.from_env(env={}))
    assert d.method == "offline" and warnings == []


def _gemini(url: str) -> Settings:
    return Settings.from_env(env={}, gemini_api_key="test-key", gemini_base_url=url)


def test_gemini_good_answer() -> None:
    with gemini_stub() as (url, state):
        state.text = json.dumps({"local_queries": ["price elasticity"], "global_queries": ["elasticity vs pricing"],
                                 "entities": ["price elasticity", "penetration pricing"]})
        d, warnings = decompose("How does elasticity shape pricing?", [], settings=_gemini(url))
    assert warnings == [] and d.method == "gemini"
    assert d.global_queries == ("How does elasticity shape pricing?", "elasticity vs pricing")
    assert d.entity_mentions == ("price elasticity", "penetration pricing") and d.hops == 2
    assert "How does elasticity shape pricing?" in json.dumps(state.requests[0]["body"])


@pytest.mark.parametrize("text", ["not json", '{"local_queries": 3}', '{"local_queries": [], "global_queries": [], '
                                  '"entities": []}'])
def test_gemini_malformed_answer_falls_back(text: str) -> None:
    with gemini_stub() as (url, state):
        state.text = text
        d, warnings = decompose("What is price elasticity?", ["price elasticity"], settings=_gemini(url))
    assert d.method == "offline" and d.local_queries == ("price elasticity",)
    assert len(warnings) == 1 and warnings[0].startswith("Gemini decomposition failed")
    assert warnings[0].endswith("offline decomposition used")


def test_gemini_server_down_falls_back() -> None:
    with gemini_stub() as (url, _):
        pass
    d, warnings = decompose("What is price elasticity?", [], settings=_gemini(url))
    assert d.method == "offline" and "Gemini decomposition failed" in warnings[0]
