"""Input formats: one module per format, each declaring its `FORMAT`: a detector (does a folder hold this format?)
beside its reader (`read(path, options) -> GraphData`, validated).

`FORMATS` is a `retrieval.registry.Registry` of name -> "module:FORMAT", in detection order (the first format
whose detector answers yes wins; documents last, as other formats' folders may hold a README.md). Modules are
imported lazily, as the store registry does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from retrieval.errors import IngestError
from retrieval.registry import Registry

if TYPE_CHECKING:
    from retrieval.config import Settings
    from retrieval.models import GraphData

ProgressFn = Callable[[str, int, int], None]  # (stage, done, total)



@dataclass(frozen=True)
class IngestOptions:
    """What a reader may need besides the path: settings (LLM key, cache dir), a stage progress callback,
    and attribute-name mappings for formats whose column names vary (graphml, csv)."""

    settings: Settings | None = None
    progress: ProgressFn | None = None
    mapping: Mapping[str, str] = field(default_factory=dict)

    @property
    def max_name_chars(self) -> int:
        """The longest name, type, relation type or attribute name a reader accepts (KG_MAX_NAME_CHARS)."""
        from retrieval.config import Settings

        return (self.settings or Settings()).max_name_chars

    def report(self, stage: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(stage, done, total)


Reader = Callable[[Path, IngestOptions], "GraphData"]


@dataclass(frozen=True)
class Format:
    """What a format module declares: `detect(folder)` tells whether the folder holds this format (by its marker
    files), `read(folder, options)` parses it."""

    detect: Callable[[Path], bool]
    read: Reader


def _unknown(message: str) -> IngestError:
    return IngestError("<format>", 0, "format", message.replace("valid: ", "valid: auto, "))


FORMATS = Registry("format", {
    "hipporag": "retrieval.ingest.hipporag:FORMAT",
    "bundle": "retrieval.ingest.bundle:FORMAT",
    "graphrag": "retrieval.ingest.graphrag:FORMAT",
    "lightrag": "retrieval.ingest.lightrag:FORMAT",
    "csv": "retrieval.ingest.csvgraph:FORMAT",
    "graphml": "retrieval.ingest.graphml:FORMAT",
    "documents": "retrieval.ingest.documents:FORMAT",
}, ("detect", "read"), _unknown)


def reader(fmt: str) -> Reader:
    """The reader function of format `fmt`; IngestError listing the valid names for an unknown one."""
    form: Format = FORMATS.load(fmt)
    return form.read
