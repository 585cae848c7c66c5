"""The map layout of a real graph version (Kuzu + Milvus Lite): written by the ingest, read back by the opened
KG without computing it again; a version built before layouts were stored gets it on first use, with progress,
stored for the next open; the map's arrays follow the opened index."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from retrieval.config import Settings
from retrieval.embedding import Embedder
from retrieval.graph import catalog
from retrieval.graph.layout import LAYOUT_FILE, load_layout
from retrieval.graph.mapdata import map_data
from retrieval.graph.runtime import KG, open_kg

pytestmark = pytest.mark.integration


def test_the_ingest_stores_the_layout_and_the_kg_reads_it(demo_data_dir: Path, demo_kg: KG) -> None:
    handle = catalog.resolve(demo_data_dir, "demo")
    stored = load_layout(handle.dir)
    assert stored is not None and len(stored.node_ids) == demo_kg.index.n_nodes
    heard: list[tuple[str, int, int]] = []
    layout = demo_kg.layout(lambda *a: heard.append(a))
    assert heard == []  # read, not computed
    assert demo_kg.stored_layout() is layout and np.array_equal(layout.xy, stored.xy)
    data = map_data(demo_kg.index, layout, demo_kg.communities, demo_kg.version)
    ids = demo_kg.index.arrays.node_ids
    pos = layout.positions(ids[:20])
    assert [tuple(float(v) for v in row) for row in data.xy[:20]] == [pos[i] for i in ids[:20]]
    assert {layout.regions[k].id for k in set(data.region.tolist()) if k >= 0} >= {
        c.id for c in demo_kg.communities.communities if c.level == 0}


def test_an_older_version_gets_its_layout_on_first_use(demo_data_dir: Path, tmp_path: Path,
                                                       embedder: Embedder) -> None:
    data_dir = tmp_path / "kg"
    shutil.copytree(demo_data_dir, data_dir, symlinks=True)
    handle = catalog.resolve(data_dir, "demo")
    (handle.dir / LAYOUT_FILE).unlink()  # as a version built before layouts were stored
    cfg = Settings.from_env(env={}, data_dir=data_dir)
    kg = open_kg(cfg, "demo", embedder)
    try:
        assert kg.stored_layout() is None
        heard: list[tuple[str, int, int]] = []
        layout = kg.layout(lambda *a: heard.append(a))
        assert heard[0][0] == "layout" and heard[-1] == ("layout", kg.index.n_nodes, kg.index.n_nodes)
        assert (handle.dir / LAYOUT_FILE).is_file() and not list(handle.dir.glob(".layout-*"))
    finally:
        kg.close()
    again = open_kg(cfg, "demo", embedder)
    try:
        stored = again.stored_layout()
        assert stored is not None and np.array_equal(stored.xy, layout.xy)
    finally:
        again.close()
