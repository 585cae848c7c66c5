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
