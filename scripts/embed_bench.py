"""Embedding benchmark: texts/s and GFLOP/s of each ONNX variant of the packaged MiniLM on this machine, with how
close its vectors are to the fp32 graph's.

    .venv/bin/python scripts/embed_bench.py [--texts musique|graphrag|demo|FILE] [--limit N] [--runs 3]
                                            [--variants minilm-plain,minilm,minilm-int8,...] [--json OUT]

Texts: `musique` (default) = every k-th of the entity, relation and passage texts a MuSiQue import embeds
(../shared/data/hipporag_musique_train; `--limit`, default 1,500), `graphrag` = those of
../shared/data/graphrag_operation_dulce (148 texts), `demo` = the demo library's entity, relation and chunk
texts, or a file
with one text per line. Variants run in turn, each `--runs` times after a warm-up (median reported), all in
this one process, so they meet the same machine; each line carries the load average at its end (the machine is
shared: compare variants within one run, and quote texts/s only from a quiet machine).

GFLOP/s counts the model's multiply-adds as two operations at the padded batch shapes the embedder really runs
(per layer: 8·b·w·h² for the attention projections, 4·b·w·h·i for the feed-forward, 4·b·w²·h for the attention
itself; b texts of padded width w, hidden h, intermediate i): the arithmetic rate the CPU sustained. For int8
variants it is the same count (operations of the fp32 model per second), so the columns compare.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from retrieval.embedding import OnnxEmbedder, default_model_path  # noqa: E402 (after the path set-up)
from retrieval.embedding.onnx_graphs import VARIANTS, batches  # noqa: E402

GRAPHRAG = ROOT.parent / "shared" / "data" / "graphrag_operation_dulce"
MUSIQUE = ROOT.parent / "shared" / "data" / "hipporag_musique_train"


def load_texts(source: str, limit: int) -> list[str]:
    """The texts an import of `source` embeds (see the module docstring)."""
    if source in ("graphrag", "musique"):
        from retrieval.graph.bm25 import chunk_text
        from retrieval.ingest import IngestOptions
        from retrieval.ingest.load import load_data
        from retrieval.stores.rows import entity_text, relation_text

        folder, fmt = (GRAPHRAG, "graphrag") if source == "graphrag" else (MUSIQUE, "hipporag")
        if not folder.is_dir():
            raise SystemExit(f"{folder} not found: use --texts demo or a file")
        data = load_data(folder, fmt, IngestOptions())
        names = {e.id: e.name for e in data.entities}
        texts = [entity_text(e) for e in data.entities] + [relation_text(r, names) for r in data.relations]
        texts += [chunk_text(c) for c in data.chunks]
        if limit and len(texts) > limit:  # every k-th: the import's own mix of entities, relations and passages
            texts = texts[:: len(texts) // limit]
    elif source == "demo":
        from retrieval.embedding.onnx_graphs import calibration_texts

        texts = calibration_texts(limit=10_000)
    else:
        texts = [line.rstrip("\n") for line in Path(source).read_text(encoding="utf-8").splitlines() if line.strip()]
    return texts[:limit] if limit else texts


def model_flops(embedder: OnnxEmbedder, texts: Sequence[str]) -> float:
    """Floating-point operations of one embed() of `texts` at its padded batch shapes (see the docstring)."""
    config = json.loads((Path(default_model_path()) / "config.json").read_text(encoding="utf-8"))
    h, inter, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    total = 0.0
    for _rows, feed in batches(embedder.tokens(texts), embedder.batch_size):
        b, w = feed["input_ids"].shape
        total += layers * (8 * b * w * h * h + 4 * b * w * h * inter + 4 * b * w * w * h)
    return total


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def bench(variant: str, texts: Sequence[str], runs: int,
          reference: np.ndarray | None) -> tuple[dict[str, Any], np.ndarray]:
    embedder = OnnxEmbedder(variant=variant)
    embedder.embed(texts[:64])  # warm-up: ONNX Runtime's first run allocates
    times, vectors = [], np.zeros(0)
    for _ in range(runs):
        t = time.perf_counter()
        vectors = embedder.embed(texts)
        times.append(time.perf_counter() - t)
    seconds = statistics.median(times)
    row: dict[str, Any] = {
        "variant": variant, "embedder": embedder.name, "providers": list(embedder.providers),
        "texts": len(texts), "seconds": round(seconds, 3), "texts_per_s": round(len(texts) / seconds, 1),
        "gflop_per_s": round(model_flops(embedder, texts) / seconds / 1e9, 1),
        "graph_mb": round(embedder.path.stat().st_size / 1e6, 1), "load_average": load_average(),
    }
    if reference is not None:
        cos = np.sum(vectors * reference, axis=1)
        nearest = lambda m: np.argsort(-(m @ m.T), axis=1)[:, 1]  # noqa: E731 - each text's nearest other text
        row.update(cos_mean=round(float(cos.mean()), 5), cos_min=round(float(cos.min()), 5),
                   same_nearest=round(float(np.mean(nearest(vectors) == nearest(reference))), 3))
    return row, vectors


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", default="musique", help="musique | graphrag | demo | a file, one text a line")
    parser.add_argument("--limit", type=int, default=1500, help="at most this many texts (0: all)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated of {', '.join(VARIANTS)}")
    parser.add_argument("--json", dest="json_out", help="write the rows here")
    parser.add_argument("--no-quality", action="store_true", help="skip the cosines to the default's vectors "
                        "(one variant alone, e.g. for paired timings of whole runs)")
    args = parser.parse_args(argv)
    texts = load_texts(args.texts, args.limit)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    print(f"{len(texts)} texts ({args.texts}), {os.cpu_count()} CPUs, load average {load_average()} at the start")
    print(f"{'variant':<22}{'texts/s':>9}{'GFLOP/s':>9}{'cos mean':>10}{'cos min':>9}{'same NN':>9}  load average")
    reference = None
    if variants[0] != "minilm" and not args.no_quality:
        reference = OnnxEmbedder(variant="minilm").embed(texts)  # quality against the default's vectors
    rows = []
    for variant in variants:
        row, vectors = bench(variant, texts, args.runs, reference)
        if reference is None or args.no_quality:
            reference = vectors
            row.update(cos_mean=1.0, cos_min=1.0, same_nearest=1.0)
        rows.append(row)
        print(f"{variant:<22}{row['texts_per_s']:>9.1f}{row['gflop_per_s']:>9.1f}{row['cos_mean']:>10.5f}"
              f"{row['cos_min']:>9.5f}{row['same_nearest']:>9.3f}  {row['load_average']}", flush=True)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
