"""The Map's data as the bytes its browser view decodes (components/assets/map/map.js): built once per graph version
(app_state caches them) from `retrieval.graph.mapdata.MapData`, then sent with each view's own small header.

Layout of one message: b"KGM1", a little-endian uint32 length and the view's JSON header (key, height, actions,
the body's revision), padding to 4 bytes; then the body: a uint32 length and the body's JSON header (counts, names,
types with their colours, relation types, communities, and where each array lies), padding to 8 bytes, then the
arrays themselves (x, y, type, region, subregion, degree, pagerank, src, dst, rel), each 4-byte aligned from the
body's start. Strings travel inside JSON and are drawn as canvas text or set with textContent by the browser."""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval.graph.mapdata import MapData
from ui_palette import ordered_palette, type_key
from ui_text import clean, short

MAGIC = b"KGM1"
NAME_CHARS = 200  # of each entity name sent (labels show fewer)
TITLE_CHARS = 160  # of each community title
ARRAY_KINDS = {np.dtype(np.float32): "f32", np.dtype(np.uint32): "u32", np.dtype(np.int32): "i32",
               np.dtype(np.uint16): "u16"}


@dataclass(frozen=True)
class MapBody:
    """One graph version's map, encoded: the bytes and what the page says about them."""

    rev: str
    data: bytes
    entities: int
    relations: int
    communities: int
    layout_seconds: float
    warnings: tuple[str, ...] = ()


def _json(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def _pad(blob: bytes, to: int, fill: bytes = b" ") -> bytes:
    return blob + fill * (-len(blob) % to)


def encode_body(data: MapData) -> MapBody:
    """The version's map as the body of the Map's messages (see the module doc)."""
    arrays = {"x": data.xy[:, 0], "y": data.xy[:, 1], "type": data.type_code, "region": data.region,
              "subregion": data.subregion, "degree": data.degree, "pagerank": data.pagerank, "src": data.src,
              "dst": data.dst, "rel": data.rel_code}
    blobs, where, offset = [], {}, 0
    for name, values in arrays.items():
        blob = _pad(np.ascontiguousarray(values).astype(values.dtype.newbyteorder("<")).tobytes(), 4, b"\0")
        where[name] = [offset, int(len(values)), ARRAY_KINDS[values.dtype]]
        blobs.append(blob)
        offset += len(blob)
    colors = ordered_palette([type_key(t) for t in data.types])  # as the live views colour them
    regions = data.regions
    head = {
        "n": data.n, "m": int(len(data.src)), "arrays": where,
        "names": [short(name, NAME_CHARS) for name in data.names],
        "types": [[clean(t), colors[type_key(t)]] for t in data.types],
        "rels": [clean(t) for t in data.rel_types],
        "regions": {"level": [r.level for r in regions], "parent": [r.parent for r in regions],
                    "x": [round(r.x, 2) for r in regions], "y": [round(r.y, 2) for r in regions],
                    "r": [round(r.r, 2) for r in regions], "size": [r.size for r in regions],
                    "title": [short(t, TITLE_CHARS) for t in data.region_titles]},
    }
    head_bytes = _json(head)
    body = _pad(struct.pack("<I", len(head_bytes)) + head_bytes, 8) + b"".join(blobs)
    rev = hashlib.blake2b(body, digest_size=8).hexdigest()
    return MapBody(rev, body, data.n, int(len(data.src)), sum(1 for r in regions if r.id), data.layout_seconds,
                   data.warnings)


def message(body: MapBody, view: dict[str, Any]) -> bytes:
    """One view's message: its header (the body's revision added) and the version's body."""
    head = _json({**view, "rev": body.rev})
    # the body's start is padded so that its JSON length field and arrays stay 4-byte aligned in the message
    prefix = _pad(MAGIC + struct.pack("<I", len(head)) + head, 8)
    return prefix + body.data


def decode_message(raw: bytes) -> tuple[dict[str, Any], dict[str, Any], dict[str, np.ndarray]]:
    """A message read back as the browser reads it: the view's header, the body's header, the arrays (the
    format's reference reader, for tests and benchmarks)."""
    if raw[:4] != MAGIC:
        raise ValueError("not a KG Lens map message")
    (view_len,) = struct.unpack_from("<I", raw, 4)
    view = json.loads(raw[8: 8 + view_len])
    start = 8 + view_len + (-(8 + view_len) % 8)
    (head_len,) = struct.unpack_from("<I", raw, start)
    head = json.loads(raw[start + 4: start + 4 + head_len])
    base = start + 4 + head_len + (-(4 + head_len) % 8)
    kinds = {v: k for k, v in ARRAY_KINDS.items()}
    arrays = {name: np.frombuffer(raw, dtype=kinds[kind].newbyteorder("<"), count=count, offset=base + off)
              for name, (off, count, kind) in head["arrays"].items()}
    return view, head, arrays
