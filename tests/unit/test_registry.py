"""Every registry has one shape: its entries load and have the methods their kind requires; an unknown name or a
missing method raises an error that lists the valid names."""

from __future__ import annotations

import sys
import types

import pytest

from retrieval.errors import ConfigError, IngestError, ValidationError
from retrieval.ingest import FORMATS, reader
from retrieval.ingest.extract import EXTRACTORS
from retrieval.registry import Registry, protocol_methods
from retrieval.rerank import RERANKERS
from retrieval.search.modes import MODES, TABLE, run_mode
from retrieval.stores.base import GRAPH_CONSOLES, GRAPH_STORES, VECTOR_STORES, GraphStore, open_graph_store

ALL = (GRAPH_STORES, GRAPH_CONSOLES, VECTOR_STORES, FORMATS, RERANKERS, EXTRACTORS)


@pytest.mark.parametrize("registry", ALL, ids=lambda r: r.kind)
def test_every_entry_loads_with_the_methods_its_kind_requires(registry: Registry) -> None:
    registry.check()
    for name in registry:
        obj = registry.load(name)
        assert all(callable(getattr(obj, m)) for m in registry.required)


def test_the_store_protocols_declare_the_console_and_delete_functions() -> None:
    assert {"read_only_query", "explain_query"} <= set(GRAPH_CONSOLES.required)
    assert {"open", "delete_graph", "upsert", "export_edges"} <= set(GRAPH_STORES.required)
    assert len(protocol_methods(GraphStore)) <= 8  # small interfaces (GUIDE habits)


def test_an_unknown_name_lists_the_valid_ones(settings) -> None:
    with pytest.raises(ConfigError, match="unknown graph back end 'neo4j'; valid: kuzu, falkordb"):
        open_graph_store(settings.with_(graph_backend="neo4j"), None)  # type: ignore[arg-type]
    with pytest.raises(IngestError, match="valid: auto, hipporag, bundle"):
        reader("parquet")
    with pytest.raises(ConfigError, match="unknown reranker 'bm25'"):
        RERANKERS.load("bm25")


def test_a_missing_method_is_named_when_the_entry_is_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("fake_backend")

    class HalfStore:  # has `open` and nothing else a graph store needs
        @classmethod
        def open(cls, settings, location):  # noqa: ANN001, ANN206
            return cls()

    fake.HalfStore = HalfStore  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_backend", fake)
    registry = Registry("graph back end", {**GRAPH_STORES.entries, "half": "fake_backend:HalfStore"},
                        GRAPH_STORES.required)
    with pytest.raises(ConfigError, match=r"'half' \(fake_backend:HalfStore\) does not have upsert, .*valid names: "
                                          r"kuzu, falkordb, half"):
        registry.load("half")


def test_search_modes_are_one_table() -> None:
    assert MODES == tuple(TABLE) == ("kg", "vector", "graph", "hybrid", "comprehensive", "dual", "multidoc")
    assert {m for m, mode in TABLE.items() if mode.text} == {"vector", "hybrid", "comprehensive", "dual", "multidoc"}
    with pytest.raises(ValidationError, match="unknown mode 'bm25'; valid: kg, vector"):
        run_mode(None, "bm25", "pricing")  # type: ignore[arg-type]  # refused before the graph is used
