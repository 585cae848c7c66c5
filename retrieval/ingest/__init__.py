"""Input formats: one module per format, each a reader `load(path, options) -> GraphData` (validated).

`FORMATS` maps a format name to "module:function"; readers are imported lazily, as the store registry does.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from retrieval.errors import IngestError

if TYPE_CHECKING:
    from retrieval.config import Settings
    from retrieval.models import GraphData

ProgressFn = Callable[[str, int, int], None]  # (stage, done, total)

FORMATS: dict[str, str] = {
    "bundle": "retrieval.ingest.bundle:load_bundle",
    "hipporag": "retrieval.ingest.hipporag:load_hipporag",
    "graphrag": "retrieval.ingest.graphrag:load_graphrag",
    "lightrag": "retrieval.ingest.lightrag:load_lightrag",
    "graphml": "retrieval.ingest.graphml:load_graphml",
    "csv": "retrieval.ingest.csvgraph:load_csv",
    "documents": "retrieval.ingest.documents:load_documents",
}


@dataclass(frozen=True)
class IngestOptions:
    """What a reader may need besides the path: settings (LLM key, cache dir), a stage progress callback,
    and attribute-name mappings for formats whose column names vary (graphml, csv)."""

    settings: Settings | None = None
    progress: ProgressFn | None = None
    mapping: Mapping[str, str] = field(default_factory=dict)

    def report(self, stage: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(stage, done, total)


Reader = Callable[[Path, IngestOptions], "GraphData"]


def reader(fmt: str) -> Reader:
    """The reader function of format `fmt`; IngestError listing the valid names for an unknown one."""
    if fmt not in FORMATS:
        valid = ", ".join(["auto", *sorted(FORMATS)])
        raise IngestError("<format>", 0, "format", f"unknown format {fmt!r}; valid: {valid}")
    module, func = FORMATS[fmt].split(":")
    fn: Reader = getattr(importlib.import_module(module), func)
    return fn
