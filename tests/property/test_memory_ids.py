"""Property tests: graph-memory ids. Whatever string (or other value) arrives as tenant, namespace, graph id,
start node, keyword or tag, every operation answers with a MemoryResult (never an exception), refuses an
invalid id as `invalid`, and nothing is written outside the memory root."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.explore.memory import ID_PATTERN, GraphMemory
from retrieval.models import MemoryResult

TRAVERSAL = ["../../etc/passwd", "..", ".", "a/../../b", "/etc", "C:\\Windows", "..\\..", "%2e%2e%2f", "a\x00b",
             "~root", "a" * 64, "a" * 65, "-a", "_a", "a\n", "\u202ea", "ａ", "a b", "a.json", "*", "?"]
IDS = st.one_of(
    st.text(max_size=80),
    st.text(alphabet="./\\\x00-_aZ9~:% \n*", max_size=12),
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}", fullmatch=True),
    st.sampled_from(TRAVERSAL),
)
VALUES = st.one_of(IDS, st.none(), st.integers(), st.lists(st.text(max_size=3), max_size=2))
WORDS = st.one_of(st.none(), st.lists(st.text(max_size=30), max_size=3), st.text(max_size=30))
NODES = [{"id": "a", "name": "Alpha"}, {"id": "b", "name": "../../b"}]
EDGES = [{"source": "a", "target": "b", "relation": "knows"}]
KINDS = {"invalid", "not_found"}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("memory-props")


def valid(value: object) -> bool:
    return isinstance(value, str) and ID_PATTERN.fullmatch(value) is not None


def answered(result: object, *ids: object) -> MemoryResult:
    assert isinstance(result, MemoryResult)
    if not all(valid(i) for i in ids):
        assert not result.ok and result.error_kind == "invalid" and result.error, (ids, result)
    elif not result.ok:
        assert result.error_kind in KINDS and result.error, result
    return result


def inside(sandbox: Path, root: Path) -> None:
    """Every path the operations left lies in the root, under directories named by valid ids."""
    assert [p for p in sandbox.rglob("*") if not p.is_relative_to(root)] == []
    for path in root.rglob("*"):
        assert path.resolve().is_relative_to(root.resolve())
        rel = path.relative_to(root).parts
        assert all(ID_PATTERN.fullmatch(part) for part in rel[:2]), rel


@settings(max_examples=60, deadline=None)
@given(tenant=VALUES, namespace=VALUES, graph_id=VALUES, start=VALUES, query=st.text(max_size=40),
       keywords=WORDS, tags=WORDS)
def test_every_operation_answers_and_stays_inside_the_root(
    base: Path, tenant: Any, namespace: Any, graph_id: Any, start: Any, query: str, keywords: Any, tags: Any
) -> None:
    sandbox = Path(tempfile.mkdtemp(dir=base))
    root = sandbox / "memory"
    memory = GraphMemory(root)
    known = memory.store_graph("t", "n", NODES, EDGES)
    assert known.ok and known.graph_id

    stored = answered(memory.store_graph(tenant, namespace, NODES, EDGES, keywords, tags), tenant, namespace)
    if stored.ok:
        assert (root / tenant / namespace / "graphs" / f"{stored.graph_id}.json").is_file()
        assert memory.get_graph(tenant, stored.graph_id, namespace).graph == memory.get_graph(
            tenant, stored.graph_id, namespace).graph
    got = answered(memory.get_graph(tenant, graph_id, namespace), tenant, namespace, graph_id)
    assert not got.ok or got.graph is not None
    answered(memory.traverse_graph(tenant, graph_id, start, namespace=namespace), tenant, namespace, graph_id)
    answered(memory.list_graphs(tenant, namespace), tenant, namespace)
    wanted = tags if isinstance(tags, list) else None
    if namespace is None:  # None searches every namespace of the tenant
        answered(memory.search_graphs(tenant, query, None, wanted), tenant)
    else:
        answered(memory.search_graphs(tenant, query, namespace, wanted), tenant, namespace)
    answered(memory.search_graphs(tenant, query), tenant)
    answered(memory.delete_graph(tenant, graph_id, namespace), tenant, namespace, graph_id)
    # the stored graph of another scope is untouched by any of it
    assert memory.get_graph("t", known.graph_id, "n").ok
    inside(sandbox, root)


@settings(max_examples=60, deadline=None)
@given(graph_id=IDS)
def test_a_valid_but_unknown_graph_id_is_not_found_and_an_invalid_one_is_refused(base: Path, graph_id: str) -> None:
    memory = GraphMemory(Path(tempfile.mkdtemp(dir=base)) / "memory")
    stored = memory.store_graph("t", "n", NODES, EDGES)
    assert stored.ok
    for result in (memory.get_graph("t", graph_id, "n"), memory.delete_graph("t", graph_id, "n"),
                   memory.traverse_graph("t", graph_id, "a", namespace="n")):
        if graph_id == stored.graph_id:
            assert result.ok
        else:
            assert not result.ok and result.error_kind == ("not_found" if valid(graph_id) else "invalid")
