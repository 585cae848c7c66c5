"""CLI: `paths A B` on a small graph built into Kuzu + Milvus Lite, and `memory ...` end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from retrieval.cli import memory as memory_cli
from retrieval.cli import paths as paths_cli
from retrieval.models import Chunk, Entity, GraphData, Relation

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def _app() -> typer.Typer:
    app = typer.Typer(add_completion=False)
    paths_cli.register(app)
    memory_cli.register(app)
    return app


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(_app(), list(args))
    return result.exit_code, result.stdout, result.stderr


# --- paths ------------------------------------------------------------------------------------


def _curie_graph() -> GraphData:
    chunk = {
        "c1": ("Marie Curie discovered radium with Pierre Curie.", "Madame Curie", "Radium"),
        "c2": ("Pierre Curie taught at the Sorbonne in Paris.", "Madame Curie", "Paris"),
        "c3": ("Marie Curie was born in Warsaw and later moved to Paris.", "Madame Curie", "Warsaw"),
    }
    ents = ["Marie Curie", "Pierre Curie", "Radium", "Sorbonne", "Paris", "Warsaw"]
    rels = [
        ("Marie Curie", "discovered", "Radium", "Marie Curie discovered radium.", "c1"),
        ("Pierre Curie", "discovered", "Radium", "Pierre Curie co-discovered radium.", "c1"),
        ("Pierre Curie", "taught_at", "Sorbonne", "Pierre Curie taught at the Sorbonne.", "c2"),
        ("Sorbonne", "located_in", "Paris", "The Sorbonne is in Paris.", "c2"),
        ("Marie Curie", "born_in", "Warsaw", "Marie Curie was born in Warsaw.", "c3"),
        ("Marie Curie", "moved_to", "Paris", "Marie Curie moved to Paris.", "c3"),
    ]
    eid = {n: n.lower().replace(" ", "_") for n in ents}
    return GraphData(
        entities=tuple(Entity(id=eid[n], name=n) for n in ents),
        relations=tuple(
            Relation(id=f"r{i}", source_id=eid[s], target_id=eid[t], relation_type=r, description=d, source_chunks=(c,))
            for i, (s, r, t, d, c) in enumerate(rels)
        ),
        chunks=tuple(
            Chunk(id=c, text=text, source=c, original_document=book, chapter=chapter, author="Eve Curie", position=i)
            for i, (c, (text, book, chapter)) in enumerate(chunk.items())
        ),
    )


_BUILD = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from retrieval.config import Settings
from retrieval.embedding import HashEmbedder
from retrieval.ingest.build import build_graph
from tests.integration.test_paths_cli import _curie_graph
build_graph(Settings.from_env(env={}, data_dir=Path(sys.argv[1])), _curie_graph(), "curie",
            embedder=HashEmbedder(), progress=False)
"""


@pytest.fixture(scope="module")
def curie_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Kuzu + Milvus Lite graph built by another process, as `ingest` then `paths` would run.

    `paths` never searches vectors (only reads chunk metadata), so the fast hash embedder builds it.
    """
    data_dir = tmp_path_factory.mktemp("kg")
    proc = subprocess.run([sys.executable, "-c", _BUILD, str(data_dir), str(ROOT)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return data_dir


def test_paths_json_known_answer(curie_dir: Path) -> None:
    code, out, err = _run("paths", "Pierre Curie", "Paris", "--k", "5", "--max-hops", "3", "--json",
                          "--data-dir", str(curie_dir))
    assert code == 0, err
    result = json.loads(out)
    got = [[n["name"] for n in p["nodes"]] for p in result["paths"]]
    assert got == [
        ["Pierre Curie", "Sorbonne", "Paris"],
        ["Pierre Curie", "Radium", "Marie Curie", "Paris"],
    ]
    first = result["paths"][0]
    assert first["text"] == (
        "Pierre Curie --[taught_at: Pierre Curie taught at the Sorbonne.]--> Sorbonne "
        "--[located_in: The Sorbonne is in Paris.]--> Paris"
    )
    assert first["sources"] == [
        {"source": "c2", "original_document": "Madame Curie", "chapter": "Paris", "author": "Eve Curie",
         "chunk_id": "c2"}
    ]
    assert result["paths"][1]["text"].startswith("Pierre Curie --[discovered: Pierre Curie co-discovered radium.]--> "
                                                 "Radium <--[discovered: Marie Curie discovered radium.]-- Marie Curie")


def test_paths_text_fuzzy_names_and_query(curie_dir: Path) -> None:
    code, out, err = _run("paths", "marie curie", "Warsaw", "--max-hops", "2", "--data-dir", str(curie_dir))
    assert code == 0, err
    assert "1. [1 hops" in out and "Marie Curie --[born_in: Marie Curie was born in Warsaw.]--> Warsaw" in out
    assert "source: Madame Curie / Warsaw / Eve Curie (c3)" in out
    code, out, err = _run("paths", "Radium", "Paris", "--query", "where did someone teach?", "--json",
                          "--data-dir", str(curie_dir))
    assert code == 0, err
    paths = json.loads(out)["paths"]
    assert [[n["name"] for n in p["nodes"]] for p in paths] == [
        ["Radium", "Marie Curie", "Paris"],
        ["Radium", "Pierre Curie", "Sorbonne", "Paris"],
    ]
    # hop count ranks first; the query still scores the teaching path as the closer one
    assert paths[1]["query_similarity"] > paths[0]["query_similarity"] > 0


def test_paths_unknown_entity_and_bad_params(curie_dir: Path) -> None:
    code, out, err = _run("paths", "Albert Einstein Qwxyz", "Paris", "--data-dir", str(curie_dir))
    assert code == 2 and err.strip() == "error: no entity named 'Albert Einstein Qwxyz'"
    code, _, err = _run("paths", "Radium", "Paris", "--k", "21", "--data-dir", str(curie_dir))
    assert code == 2 and "k must be an integer from 1 to 20" in err and len(err.strip().splitlines()) == 1


def test_a_name_that_is_no_entity_is_never_swapped_for_another(curie_dir: Path) -> None:
    """Issue 27: `paths` from a name no entity has (a deleted one's, a typo) started from the closest name, silently;
    it is refused, naming the closest names to give instead."""
    code, out, err = _run("paths", "Marie Curies", "Paris", "--data-dir", str(curie_dir))
    assert code == 2 and out == "" and "no entity named 'Marie Curies'" in err
    assert "the closest names: 'Marie Curie'" in err


def test_paths_through_python_dash_m(curie_dir: Path) -> None:
    env = {**os.environ, "KG_DATA_DIR": str(curie_dir)}
    proc = subprocess.run(
        [sys.executable, "-m", "retrieval", "paths", "Radium", "Warsaw", "--k", "1"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Radium <--[discovered: Marie Curie discovered radium.]-- Marie Curie --[born_in" in proc.stdout


# --- memory -----------------------------------------------------------------------------------


def test_memory_cli_round_trip(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "kg")
    bundle = tmp_path / "graph.json"
    bundle.write_text(json.dumps({
        "nodes": [{"id": "a", "name": "Ada Lovelace"}, {"id": "b", "name": "Analytical Engine"},
                  {"id": "c", "name": "Charles Babbage"}],
        "edges": [{"source": "a", "target": "b", "relation": "wrote_about"},
                  {"source": "c", "target": "b", "relation": "designed"}],
        "keywords": ["computing history"], "tags": ["people"], "metadata": {"title": "Engines"},
    }))
    base = ["--tenant", "acme", "--namespace", "hist", "--data-dir", data_dir]
    code, out, err = _run("memory", "store", str(bundle), *base)
    assert code == 0, err
    gid = out.strip()
    code, out, _ = _run("memory", "list", *base)
    assert code == 0 and gid in out and "3 nodes  2 edges" in out and "Engines" in out
    code, out, _ = _run("memory", "search", "history", "--tenant", "acme", "--tag", "people", "--json",
                        "--data-dir", data_dir)
    assert code == 0 and [g["graph_id"] for g in json.loads(out)["graphs"]] == [gid]
    code, out, _ = _run("memory", "get", gid, *base)
    assert code == 0 and "edge Charles Babbage --[designed]--> Analytical Engine" in out
    code, out, _ = _run("memory", "traverse", gid, "c", "--direction", "both", "--depth", "2", *base)
    assert code == 0 and out.splitlines()[0] == "showing 2 of 2"
    assert "2: Charles Babbage --[designed]--> Analytical Engine <--[wrote_about]-- Ada Lovelace" in out
    code, out, err = _run("memory", "delete", gid, *base)
    assert code == 2 and "without --yes" in err
    code, out, _ = _run("memory", "delete", gid, "--yes", *base)
    assert code == 0
    code, out, err = _run("memory", "get", gid, *base)
    assert code == 1 and err.strip() == f"error: no graph '{gid}' in namespace 'hist'"


@pytest.mark.parametrize("bad", ["../etc", "/abs", "a/b", "", "x" * 65])
def test_memory_cli_bad_ids(tmp_path: Path, bad: str) -> None:
    data_dir = tmp_path / "kg"
    for args in (["list", "--tenant", bad], ["list", "--tenant", "t", "--namespace", bad],
                 ["get", bad, "--tenant", "t"], ["traverse", bad, "a", "--tenant", "t"]):
        code, out, err = _run("memory", *args, "--data-dir", str(data_dir))
        assert code == 2, (args, out, err)
        assert err.startswith("error: invalid ") and len(err.strip().splitlines()) == 1
    assert not data_dir.exists() or not any(data_dir.rglob("*.json"))


def test_memory_cli_bad_store_files(tmp_path: Path) -> None:
    cases = {"not.json": "{nodes: [", "list.json": "[1, 2]", "extra.json": '{"nodes": [], "colour": 1}',
             "deep.json": "[" * 100_000 + "]" * 100_000}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        code, _, err = _run("memory", "store", str(tmp_path / name), "--tenant", "t", "--data-dir", str(tmp_path))
        assert code == 2 and err.startswith(f"error: {tmp_path / name}: "), (name, err)
        assert len(err.strip().splitlines()) == 1


def test_memory_bad_id_through_python_dash_m(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "retrieval", "memory", "list", "--tenant", "../../etc", "--data-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: invalid tenant '../../etc': use 1-64 letters, digits, '_' or '-', starting with a letter or digit"
    ]
    assert list(tmp_path.iterdir()) == []


def test_bfs_and_expand_read_details_from_kuzu(curie_dir: Path) -> None:
    from retrieval.config import Settings
    from retrieval.embedding import HashEmbedder
    from retrieval.graph.runtime import open_kg
    from retrieval.graph.traverse import bfs, expand

    kg = open_kg(Settings.from_env(env={}, data_dir=curie_dir), embedder=HashEmbedder())
    try:
        near = expand(kg.index, "pierre_curie", 10, details=kg.graph)
        assert (near.shown, near.total) == (2, 2) and near.warnings == ()
        assert {p.text for p in near.paths} == {
            "Pierre Curie --[discovered: Pierre Curie co-discovered radium.]--> Radium",
            "Pierre Curie --[taught_at: Pierre Curie taught at the Sorbonne.]--> Sorbonne",
        }
        far = bfs(kg.index, "marie_curie", 3, relation_types=["moved_to", "born_in"], details=kg.graph)
        assert far.depths == {"marie_curie": 0, "warsaw": 1, "paris": 1}
        assert all(e.source_chunks == ("c3",) for e in far.subgraph.edges)
    finally:
        kg.close()
