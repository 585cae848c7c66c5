"""Write the LightRAG test fixture with LightRAG's own storage code (lightrag-hku 1.5.7), no LLM.

Run it in a private venv, never the app's (lightrag-hku is not an app requirement):

    python3 -m venv /tmp/lightrag-venv && /tmp/lightrag-venv/bin/pip install lightrag-hku==1.5.7
    /tmp/lightrag-venv/bin/python tests/data/lightrag/make_fixture.py

It rebuilds `tests/data/lightrag/workdir/` from the prepared graph below:
- `insert_custom_kg` (once per document, so each chunk names its `full_doc_id`) writes the chunks
  (`kv_store_text_chunks.json`), the graph (`graph_chunk_entity_relation.graphml`) and the vector stores;
- `merge_entities` joins two spellings of one person, so LightRAG itself writes `<SEP>`-joined
  descriptions and source chunk ids and merges their edges' comma-separated keywords;
- the documents' full text and status go through LightRAG's own KV stores (`full_docs`, `doc_status`).
One document's `file_path` is LightRAG's placeholder `unknown_source`.

The LLM function raises if it is ever called; embeddings are a deterministic hash (8 dimensions).
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from lightrag import LightRAG
from lightrag.base import DocStatus
from lightrag.utils import EmbeddingFunc, Tokenizer

OUT = Path(__file__).resolve().parent / "workdir"
DIM = 8

# Three documents: two Markdown books with chapter headings, one note with no known source file.
DOCS: dict[str, dict[str, object]] = {
    "doc-engines": {
        "file_path": "engines.md",
        "chunks": [
            "# Engines of Thought\n\n## Chapter 1: The Difference Engine\n\n"
            "Charles Babbage designed the Difference Engine to tabulate polynomials. The British government "
            "funded the work, and Joseph Clement machined its parts in London.",
            "Babbage later turned to a more general machine, the Analytical Engine, which separated the store "
            "from the mill.\n\n## Chapter 2: The Notes\n\n"
            "Ada Lovelace translated Menabrea's paper on the Analytical Engine and added notes of her own.",
            "Her Note G described an algorithm for the Bernoulli numbers. Lovelace saw that the engine could "
            "act on symbols as well as numbers.",
        ],
    },
    "doc-turing": {
        "file_path": "turing.md",
        "chunks": [
            "# Machines and Minds\n\n## Part I: Computable Numbers\n\n"
            "Alan Turing described the universal machine in 1936 while at King's College, Cambridge.",
            "## Part II: Bletchley Park\n\n"
            "During the war A. M. Turing worked at Bletchley Park on the Bombe, which broke Enigma settings.",
        ],
    },
    "doc-notes": {
        "file_path": "unknown_source",
        "chunks": [
            "Joseph Clement was an engineer and draughtsman; his workshop kept the Difference Engine's drawings.",
        ],
    },
}

# Entities and relations per document; `source_id` names a chunk as "<doc>#<index>".
ENTITIES = [
    ("Charles Babbage", "person", "Mathematician who designed the Difference and Analytical Engines.", "doc-engines#0"),
    ("Difference Engine", "artifact", "A mechanical calculator for tabulating polynomials.", "doc-engines#0"),
    ("Joseph Clement", "person", "The engineer who machined the Difference Engine's parts.", "doc-engines#0"),
    ("Analytical Engine", "artifact", "Babbage's general-purpose machine with a store and a mill.", "doc-engines#1"),
    ("Ada Lovelace", "person", "Translator of Menabrea's paper and author of its notes.", "doc-engines#1"),
    ("Note G", "work", "Lovelace's note giving an algorithm for the Bernoulli numbers.", "doc-engines#2"),
    ("Alan Turing", "person", "Mathematician who described the universal machine.", "doc-turing#0"),
    ("King's College", "organization", "A college of the University of Cambridge.", "doc-turing#0"),
    ("A. M. Turing", "person", "Codebreaker at Bletchley Park during the war.", "doc-turing#1"),
    ("Bletchley Park", "location", "The wartime codebreaking centre.", "doc-turing#1"),
    ("Bombe", "artifact", "An electromechanical device that found Enigma settings.", "doc-turing#1"),
    ("Workshop Drawings", "artifact", "Drawings of the Difference Engine kept in Clement's workshop.", "doc-notes#0"),
]
RELATIONS = [
    ("Charles Babbage", "Difference Engine", "Babbage designed the Difference Engine.", "design, invention", 2.0,
     "doc-engines#0"),
    ("Joseph Clement", "Difference Engine", "Clement machined the parts of the Difference Engine.",
     "engineering, construction", 1.0, "doc-engines#0"),
    ("Charles Babbage", "Analytical Engine", "Babbage turned from the Difference Engine to the Analytical Engine.",
     "design", 1.0, "doc-engines#1"),
    ("Ada Lovelace", "Analytical Engine", "Lovelace wrote notes on the Analytical Engine.",
     "analysis, programming", 2.0, "doc-engines#1"),
    ("Ada Lovelace", "Note G", "Lovelace wrote Note G.", "authorship", 1.0, "doc-engines#2"),
    ("Alan Turing", "King's College", "Turing described the universal machine while at King's College.",
     "affiliation", 1.0, "doc-turing#0"),
    ("A. M. Turing", "Bletchley Park", "Turing worked at Bletchley Park during the war.", "employment, war", 1.0,
     "doc-turing#1"),
    ("A. M. Turing", "Bombe", "Turing worked on the Bombe.", "codebreaking", 1.0, "doc-turing#1"),
    ("Alan Turing", "Bombe", "The universal machine preceded Turing's design of the Bombe.",
     "design, codebreaking", 1.0, "doc-turing#0"),
    ("Joseph Clement", "Workshop Drawings", "Clement's workshop kept the drawings.", "archive", 1.0, "doc-notes#0"),
]


class ByteTokenizer:
    """UTF-8 bytes as tokens: deterministic and offline (tiktoken would download its encoding)."""

    def encode(self, content: str) -> list[int]:
        return list(content.encode("utf-8"))

    def decode(self, tokens: list[int]) -> str:
        return bytes(tokens).decode("utf-8", errors="replace")


async def no_llm(*args: object, **kwargs: object) -> str:
    raise RuntimeError("the fixture is written without an LLM; LightRAG must not call one")


async def hash_embed(texts: list[str], **kwargs: object) -> np.ndarray:
    rows = [np.frombuffer(hashlib.sha256(t.encode("utf-8")).digest()[: DIM * 4], dtype=np.uint32) for t in texts]
    vecs = np.asarray(rows, dtype=np.float64) / 2**32 - 0.5
    return (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float32)


def custom_kg(doc_id: str) -> dict[str, list[dict[str, object]]]:
    doc = DOCS[doc_id]
    chunks = [
        {"content": text, "source_id": f"{doc_id}#{i}", "file_path": doc["file_path"], "chunk_order_index": i}
        for i, text in enumerate(doc["chunks"])  # type: ignore[arg-type]
    ]
    mine = {c["source_id"] for c in chunks}
    entities = [
        {"entity_name": n, "entity_type": t, "description": d, "source_id": s, "file_path": doc["file_path"]}
        for n, t, d, s in ENTITIES if s in mine
    ]
    relationships = [
        {"src_id": a, "tgt_id": b, "description": d, "keywords": k, "weight": w, "source_id": s,
         "file_path": doc["file_path"]}
        for a, b, d, k, w, s in RELATIONS if s in mine
    ]
    return {"chunks": chunks, "entities": entities, "relationships": relationships}


async def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    rag = LightRAG(
        working_dir=str(OUT),
        llm_model_func=no_llm,
        embedding_func=EmbeddingFunc(embedding_dim=DIM, max_token_size=8192, func=hash_embed),
        tokenizer=Tokenizer(model_name="bytes", tokenizer=ByteTokenizer()),
    )
    await rag.initialize_storages()
    try:
        now = datetime(2026, 11, 24, tzinfo=UTC).isoformat()
        for doc_id, doc in DOCS.items():
            await rag.ainsert_custom_kg(custom_kg(doc_id), full_doc_id=doc_id)
            text = "\n\n".join(doc["chunks"])  # type: ignore[arg-type]
            await rag.full_docs.upsert({doc_id: {"content": text, "file_path": doc["file_path"]}})
            await rag.doc_status.upsert({doc_id: {
                "status": DocStatus.PROCESSED, "content_summary": text[:100], "content_length": len(text),
                "file_path": doc["file_path"], "created_at": now, "updated_at": now,
                "chunks_count": len(doc["chunks"]),  # type: ignore[arg-type]
            }})
        # Two spellings of one person: LightRAG joins their descriptions and chunk ids with <SEP>,
        # and merges the two Bombe edges (descriptions joined, keywords unioned).
        await rag.amerge_entities(["A. M. Turing"], "Alan Turing")
        for store in (rag.full_docs, rag.doc_status):
            await store.index_done_callback()
    finally:
        await rag.finalize_storages()


if __name__ == "__main__":
    asyncio.run(main())
