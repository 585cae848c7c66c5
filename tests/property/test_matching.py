"""Property tests: query decomposition and entity-name matching on arbitrary Unicode never crash, stay fast
(a per-call deadline), and find every entity whose name a question quotes."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from retrieval.graph.index import STOP_WORDS, GraphIndex, Mention, build_index, name_matcher, normalise_name
from retrieval.search.decompose import entity_mentions, is_relationship_query, offline_decomposition
from retrieval.search.tools import MAX_QUERY_CHARS
from retrieval.stores.base import EdgeArrays
from tests.data.hostile.make_bundle import load_payloads

DEADLINE = timedelta(seconds=2)  # each call takes milliseconds; the slack is for a loaded 2-core machine
ANY_TEXT = st.text(max_size=300)  # every code point but surrogates: controls, combining marks, RTL, astral
NAME = st.text(min_size=1, max_size=40)


def index_of(names: Sequence[str], aliases: Sequence[tuple[str, ...]] = ()) -> GraphIndex:
    n = len(names)
    none = np.zeros(0, dtype=np.int64)
    return build_index(EdgeArrays(
        node_ids=[f"n{i}" for i in range(n)], node_names=list(names), node_types=["t"] * n, node_chunks=[()] * n,
        src=none, dst=none, weight=np.zeros(0), relation_ids=[], relation_types=[],
        node_aliases=list(aliases) or [()] * n,
    ))


HOSTILE_INDEX = index_of([p.value for p in load_payloads() if not p.reject])


def matchable(name: str) -> bool:
    key = normalise_name(name)
    return len(key) >= 2 and key not in STOP_WORDS


@settings(max_examples=300, deadline=DEADLINE)
@given(query=ANY_TEXT)
def test_any_query_against_the_hostile_names_is_decomposed_without_error(query: str) -> None:
    mentions = entity_mentions(HOSTILE_INDEX, query)
    names = HOSTILE_INDEX.arrays.node_names
    assert all(names[m.idx] == m.name and m.via == "name" for m in mentions)
    assert len({m.idx for m in mentions}) == len(mentions)
    d = offline_decomposition(query, [m.name for m in mentions])
    assert d.query == query and d.local_queries and d.global_queries[0] == query
    assert d.hops == (2 if is_relationship_query(query, len(d.entity_mentions)) else 1)


@settings(max_examples=300, deadline=DEADLINE)
@given(name=NAME, before=ANY_TEXT, after=ANY_TEXT, other=NAME)
def test_a_name_quoted_anywhere_in_a_question_is_found(name: str, before: str, after: str, other: str) -> None:
    index = index_of([name, other])
    found = {m.idx for m in entity_mentions(index, f"{before} {name} {after}")}
    # found unless it is not a matchable name, or a longer name (the other one) spans it in this question
    assert 0 in found or not matchable(name) or 1 in found


@settings(max_examples=200, deadline=DEADLINE)
@given(name=NAME)
@example(name="\u210cilbert space")  # black-letter H: NFKD gives "H" (lower-casing first left it upper case)
@example(name="\u3392 radio")  # the MHz ligature
@example(name="\U0001d401rand")  # mathematical bold B
def test_normalisation_is_idempotent_and_lower_case(name: str) -> None:
    key = normalise_name(name)
    assert normalise_name(key) == key
    assert key == key.lower() and key == key.strip() and "  " not in key


def test_compatibility_letters_match_their_plain_spelling() -> None:
    index = index_of(["\u210cilbert space", "\u3392 radio", "\U0001d401rand equity"])
    found = entity_mentions(index, "How do hilbert space, MHZ radio and Brand Equity relate?")
    assert [m.idx for m in found] == [0, 1, 2]


def brute_force_maximal(found: list[Mention]) -> list[Mention]:
    """The definition: drop a mention whose span lies inside another, different span."""
    spans = {(m.start, m.end) for m in found}
    kept = [m for m in found if not any(s <= m.start and m.end <= e and (s, e) != (m.start, m.end) for s, e in spans)]
    return sorted(kept, key=lambda m: (m.start, m.idx))


WORDS = st.lists(st.sampled_from(["ab", "cd", "ab cd", "x", "é", "ß"]), min_size=1, max_size=6).map(" ".join)


@settings(max_examples=300, deadline=DEADLINE)
@given(names=st.lists(WORDS, min_size=1, max_size=6), query=st.lists(WORDS, max_size=12).map(" ".join))
def test_maximal_mentions_match_their_definition(names: list[str], query: str) -> None:
    matcher = name_matcher(index_of(names))
    padded = f" {normalise_name(query)} "
    every: list[Mention] = []
    if matcher.automaton is None:  # no name of two or more characters
        assert matcher.find(query) == [] and not any(matchable(n) for n in names)
        return
    for end, (key, nodes) in matcher.automaton.iter(padded):
        every.extend(Mention(idx, key, end - len(key) - 1, end - 1) for idx in nodes)
    assert matcher.find(query) == brute_force_maximal(every)


def test_a_longest_query_over_nested_names_is_matched_in_bounded_time() -> None:
    """Names nested like "xy", "xy xy", ... and a 2,000-character query of "xy": every position matches
    every name (40,608 mentions). Comparing each mention with every span was quadratic; one sort is not."""
    index = index_of([" ".join(["xy"] * i) for i in range(1, 65)])
    query = ("xy " * (MAX_QUERY_CHARS // 3))[:MAX_QUERY_CHARS]
    start = time.perf_counter()
    mentions = entity_mentions(index, query)
    elapsed = time.perf_counter() - start
    assert [m.idx for m in mentions] == [63]  # every shorter name lies inside a match of the longest
    assert elapsed < 10.0, f"{elapsed:.2f} s"  # measured under load: 0.7 s; the pairwise version took 45 s
