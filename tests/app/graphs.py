"""Test data dirs for the app tiers: the demo graph plus a small hostile graph, built once per process."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from retrieval.config import Settings
from retrieval.embedding import Embedder
from retrieval.graph import catalog
from retrieval.ingest.build import ingest
from tests.conftest import DEMO_BUNDLE

HOSTILE_GRAPH = "hostile"
IMG = "<img src=x onerror=alert(1)>"
SCRIPT = "</script><script>alert(1)</script>"
HOSTILE_QUERY = "Who does Eve Evilname know?"
DEMO_QUESTION = "How does brand awareness connect to conversion rate?"
SECOND_QUESTION = "How do loyalty programmes lower price sensitivity?"

_BUILT: dict[str, Path] = {}
TEAM_QUESTIONS = ("How does brand awareness connect to conversion rate?", "What drives customer lifetime value?")
SECRET_TITLE = "Team B merger plan"


def write_hostile_bundle(folder: Path) -> Path:
    """Entity names, types, descriptions, relation text and chunk text carrying HTML/JS payloads."""
    folder.mkdir(parents=True, exist_ok=True)
    text = f"Eve Evilname {IMG} met Mallory Scriptson {SCRIPT} in the archive; Eve knows Mallory well."
    chunks = [{"id": "h-1", "text": text, "original_document": f"Book {IMG}", "chapter": f"Chapter {SCRIPT}",
               "author": f"Author {IMG}", "position": 0}]
    entities = [
        {"id": "eve", "name": f"Eve Evilname {IMG}", "type": f"person{SCRIPT}", "description": f"Eve {SCRIPT}",
         "source_chunks": ["h-1"]},
        {"id": "mallory", "name": f"Mallory Scriptson {SCRIPT}", "type": "person",
         "description": f"Mallory {IMG} <a href=javascript:alert(1)>link</a>", "source_chunks": ["h-1"]},
    ]
    relations = [
        {"id": "eve-knows-mallory", "source_id": "eve", "target_id": "mallory", "relation_type": f"KNOWS{IMG}",
         "description": f"Eve Evilname knows Mallory Scriptson {IMG}.", "source_chunks": ["h-1"]},
    ]
    for name, rows in (("chunks", chunks), ("entities", entities), ("relations", relations)):
        lines = "\n".join(json.dumps(r, ensure_ascii=False) for r in rows)
        (folder / f"{name}.jsonl").write_text(lines + "\n", encoding="utf-8")
    return folder


def build_app_data_dir(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder, *, pristine: bool = False,
                       ) -> Path:
    """A data dir with graphs `demo` (active) and `hostile`; built once per test process. The AppTest tier writes
    to it (labels, query sets, imports); `pristine` gives the copy taken right after the build, before any test."""
    if "dir" not in _BUILT:
        root = tmp_path_factory.mktemp("app-data")
        data_dir = root / "kg"
        cfg = Settings.from_env(env={}, data_dir=data_dir)
        ingest(cfg, DEMO_BUNDLE, fmt="bundle", name="demo", embedder=embedder, progress=False)
        hostile = write_hostile_bundle(root / "hostile-bundle")
        ingest(cfg, hostile, fmt="bundle", name=HOSTILE_GRAPH, embedder=embedder, progress=False)
        catalog.set_active(data_dir, "demo")
        shutil.copytree(data_dir, root / "pristine" / "kg", symlinks=True)  # catalog symlinks are relative
        _BUILT["dir"], _BUILT["pristine"] = data_dir, root / "pristine" / "kg"
    return _BUILT["pristine" if pristine else "dir"]


def graph_payloads(at: object) -> list[dict[str, object]]:
    """The data each live graph view on an AppTest page received (JSON the component's script reads), with the
    details panel, notice and undo state its `kg_lens_details` companion received merged in."""
    extras = {}
    for e in at.get("bidi_component"):  # type: ignore[attr-defined]
        if e.proto.component_name == "kg_lens_details":
            data = json.loads(e.proto.json or e.proto.mixed.json)
            extras[data["key"]] = data
    graphs = [json.loads(e.proto.bytes) for e in at.get("bidi_component")  # type: ignore[attr-defined]
              if e.proto.component_name == "kg_lens_graph"]
    return [{**g, **extras.get(g["key"], {})} for g in graphs]


def graph_text(at: object) -> str:
    """Every string a page's graph views received, as one JSON text (names, types, legend words, details)."""
    return json.dumps(graph_payloads(at), ensure_ascii=False)


def team_data_dir(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder, dst: Path) -> dict[str, object]:
    """A copy of the pristine data dir at `dst` for team mode: query set `team` pooled on `demo` (vector, depth 5), two
    annotators who disagree on its first item, and a stored graph in each of tenants team-a and team-b."""
    from retrieval.evaluation.labels import LabelStore
    from retrieval.evaluation.pooling import build_pool, stored_pool
    from retrieval.evaluation.querysets import import_queries
    from retrieval.explore.memory import GraphMemory
    from retrieval.graph.runtime import open_kg
    from retrieval.models import Entity

    shutil.copytree(build_app_data_dir(tmp_path_factory, embedder, pristine=True), dst, symlinks=True)
    store = LabelStore.in_data_dir(dst)
    qset = import_queries(store, "".join(f"t{i}\t{q}\n" for i, q in enumerate(TEAM_QUESTIONS, start=1)), "team")
    kg = open_kg(Settings.from_env(env={}, data_dir=dst, graph_name="demo"), embedder=embedder)
    try:
        build_pool(store, kg, qset, 5, ["vector"], [])
    finally:
        kg.close()
    version = catalog.resolve(dst, "demo").version
    _, items = stored_pool(store, "team", version)
    for who, grade in (("x@example.org", 0), ("y@example.org", 3)):  # one disagreement to adjudicate
        store.put_label(items[0].query, items[0].item_id, grade, graph_version=version, annotator=who)
    store.close()
    memory = GraphMemory(dst / "memory")
    node = Entity(id="n1", name="Acme", type="org")
    secret = memory.store_graph("team-b", "default", [node], [], keywords=["merger"], metadata={"title": SECRET_TITLE})
    mine = memory.store_graph("team-a", "default", [node], [], keywords=["acme"], metadata={"title": "Team A notes"})
    return {"data_dir": dst, "version": version, "items": items, "secret_gid": secret.graph_id,
            "mine_gid": mine.graph_id}
