"""Item ids: one scheme for everything that can be graded, so a grade given anywhere counts everywhere.

- `chunk:<chunk id>`: a document chunk (vector, hybrid, comprehensive, dual, multidoc; the chunks pool);
- `entity:<entity id>`: an entity with its context (dual's graph channel; the Inspector's entities pool);
- `rel:<16 hex>`: one relation as a fact (kg global facts, graph, comprehensive, multidoc);
- `path:<16 hex>`: a path, its nodes and edges in walk order (kg / graph / comprehensive local facts, Paths).

`rel:` hashes the relation id and `path:` hashes the node ids then the edge ids (joined by U+001F, SHA-1, first
16 hex digits): graph ids may hold whitespace, and TREC files need one token per id. A one-hop path and the
same relation as a global fact are two items (`path:` vs `rel:`), since they are shown as different texts.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

CHUNK_PREFIX = "chunk:"
ENTITY_PREFIX = "entity:"


def digest_id(prefix: str, parts: Iterable[str]) -> str:
    """`prefix:` + the first 16 hex digits of SHA-1 over the parts joined by U+001F."""
    joined = "\x1f".join(parts).encode("utf-8", "surrogatepass")
    return f"{prefix}:" + hashlib.sha1(joined).hexdigest()[:16]


def chunk_item_id(chunk_id: str) -> str:
    return CHUNK_PREFIX + chunk_id


def entity_item_id(entity_id: str) -> str:
    return ENTITY_PREFIX + entity_id


def relation_item_id(relation_id: str) -> str:
    return digest_id("rel", [relation_id])


def path_item_id(node_ids: Iterable[str], edge_ids: Iterable[str]) -> str:
    """The id of a path walked through `node_ids` over `edge_ids` (a KG local fact or a Paths-page path)."""
    return digest_id("path", [*node_ids, *edge_ids])



_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def opens_as_formula(text: str) -> bool:
    """Whether a spreadsheet would read `text` in a cell as a formula (CSV injection, OWASP): it starts with
    `=`, `@`, a tab or a carriage return, or with `+` or `-` and is not a plain number."""
    if not text:
        return False
    if text[0] in "=@\t\r":
        return True
    return text[0] in "+-" and not _NUMBER.fullmatch(text)
