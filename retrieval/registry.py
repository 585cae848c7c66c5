"""One shape for every registry: a table of name -> "module:attribute", imported lazily and checked on load.

As LightRAG's `kg/__init__.py` lists every storage kind with its implementations and the methods they must
have, a `Registry` names its entries and the attributes each must provide; loading an entry imports its
module, and an unknown name or a missing method raises an error that lists the valid names. Back ends, ingest
formats, search modes, rerankers and extractors are registries of this one shape.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from retrieval.errors import ConfigError


def protocol_methods(*protocols: type) -> tuple[str, ...]:
    """The public methods a Protocol class declares (what an implementation must have)."""
    names: dict[str, None] = {}
    for proto in protocols:
        for name, value in vars(proto).items():
            if not name.startswith("_") and (callable(value) or isinstance(value, (staticmethod, classmethod))):
                names[name] = None
    return tuple(names)


@dataclass(frozen=True)
class Registry:
    """Named implementations of one kind. `entries`: name -> "module:attribute" (or "module" for the module
    itself); `required`: attribute names every loaded entry must have; `error`: builds the exception raised
    for an unknown name (ConfigError by default)."""

    kind: str
    entries: Mapping[str, str]
    required: tuple[str, ...] = ()
    error: Callable[[str], Exception] = field(default=ConfigError)

    def names(self) -> list[str]:
        return list(self.entries)

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def valid(self) -> str:
        return ", ".join(self.entries)

    def load(self, name: str) -> Any:
        """The entry `name`, imported and checked for every required attribute."""
        if name not in self.entries:
            raise self.error(f"unknown {self.kind} {name!r}; valid: {self.valid()}")
        target = self.entries[name]
        module, _, attr = target.partition(":")
        obj: Any = importlib.import_module(module)
        if attr:
            obj = getattr(obj, attr)
        missing = [m for m in self.required if not callable(getattr(obj, m, None))]
        if missing:
            raise ConfigError(f"{self.kind} {name!r} ({target}) does not have {', '.join(missing)}, which every "
                              f"{self.kind} must provide; valid names: {self.valid()}")
        return obj

    def check(self) -> None:
        """Load and check every entry (tests/unit/test_registry.py checks every registry)."""
        for name in self.entries:
            self.load(name)
