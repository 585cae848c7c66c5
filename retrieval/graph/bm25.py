"""BM25 over document chunks with bm25s, stored next to each graph version.

Okapi BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009),
Lucene IDF variant, k1 = 1.2, b = 0.75; lower-cased `[a-z0-9]+` tokens, no stemming or stop words
(the baseline described in shared/data/hipporag_musique_train/SOURCE.md).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import bm25s
import numpy as np

from retrieval.errors import NotFoundError, StoreError
from retrieval.models import Chunk

_TOKEN = re.compile(r"[a-z0-9]+")
K1, B = 1.2, 0.75
_IDS_FILE = "chunk_ids.json"
VERSION_DIR = "bm25"  # the index's folder inside a graph version


@dataclass(frozen=True)
class BM25Index:
    """A bm25s retriever and the chunk id of each of its documents (by row)."""

    retriever: bm25s.BM25
    chunk_ids: tuple[str, ...]


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def chunk_text(chunk: Chunk) -> str:
    """What BM25 and the chunk embedding see: book title, chapter and passage (HippoRAG's title + text)."""
    return "\n".join(part for part in (chunk.original_document, chunk.chapter, chunk.text) if part)


def build_index(chunk_ids: Sequence[str], texts: Sequence[str]) -> BM25Index:
    """Index `texts` (one per chunk id)."""
    if len(chunk_ids) != len(texts):
        raise ValueError(f"{len(chunk_ids)} chunk ids but {len(texts)} texts")
    retriever = bm25s.BM25(k1=K1, b=B, method="lucene")
    if texts:
        retriever.index([tokenize(t) for t in texts], show_progress=False)
    return BM25Index(retriever=retriever, chunk_ids=tuple(chunk_ids))


def save_index(index: BM25Index, directory: Path) -> None:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if index.chunk_ids:
        index.retriever.save(str(directory), show_progress=False)
    (directory / _IDS_FILE).write_text(json.dumps(list(index.chunk_ids), ensure_ascii=False), encoding="utf-8")


def load_index(directory: Path) -> BM25Index:
    directory = Path(directory)
    ids_path = directory / _IDS_FILE
    if not ids_path.is_file():
        raise NotFoundError(f"no BM25 index in {directory}")
    try:
        chunk_ids = tuple(json.loads(ids_path.read_text(encoding="utf-8")))
        retriever = (
            bm25s.BM25.load(str(directory), show_progress=False, verbosity=0)
            if chunk_ids
            else bm25s.BM25(k1=K1, b=B, method="lucene")
        )
    except (OSError, ValueError) as exc:
        raise StoreError(f"cannot load the BM25 index in {directory}: {exc}") from exc
    return BM25Index(retriever=retriever, chunk_ids=chunk_ids)


def save_version(index: BM25Index, version_dir: Path) -> None:
    """Replace a version's `bm25/` by renames: a crash between them leaves `bm25.new` or `bm25.old`, which
    `load_version` falls back to."""
    version_dir = Path(version_dir)
    new, live, old = version_dir / f"{VERSION_DIR}.new", version_dir / VERSION_DIR, version_dir / f"{VERSION_DIR}.old"
    shutil.rmtree(new, ignore_errors=True)
    save_index(index, new)
    shutil.rmtree(old, ignore_errors=True)
    if live.exists():
        live.rename(old)
    new.rename(live)
    shutil.rmtree(old, ignore_errors=True)


def load_version(version_dir: Path) -> BM25Index:
    """A version's BM25 index (`bm25/`; after a crash mid-`save_version`, the copy that survived it)."""
    version_dir = Path(version_dir)
    for name in (VERSION_DIR, f"{VERSION_DIR}.new", f"{VERSION_DIR}.old"):
        if (version_dir / name / _IDS_FILE).is_file():
            return load_index(version_dir / name)
    return load_index(version_dir / VERSION_DIR)  # NotFoundError naming the directory


def scores(index: BM25Index, query: str) -> np.ndarray:
    """BM25 score of every chunk (row order of `index.chunk_ids`) for `query`; zeros if no term matches."""
    out = np.zeros(len(index.chunk_ids), dtype=np.float32)
    if not index.chunk_ids:
        return out
    # Okapi BM25 ignores query-term frequency: each distinct term counts once.
    ids = index.retriever.get_tokens_ids(list(dict.fromkeys(tokenize(query))))
    if not ids:
        return out
    return np.asarray(index.retriever.get_scores_from_ids(ids), dtype=np.float32)


def search(index: BM25Index, query: str, k: int) -> list[tuple[str, float]]:
    """Top-k (chunk_id, score) with score > 0, best first; empty when no query term is in the corpus."""
    if k <= 0:
        return []
    s = scores(index, query)
    k = min(k, int(np.count_nonzero(s > 0)))
    if k == 0:
        return []
    top = np.argpartition(-s, k - 1)[:k]
    top = top[np.lexsort((top, -s[top]))]
    return [(index.chunk_ids[i], float(s[i])) for i in top]
