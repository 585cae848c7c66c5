"""Benchmark curation in place: one-entity edit → a search that sees it, a merge → a search that sees it, and adding
10 documents, beside the time of a full rebuild of the same graph.

  python scripts/curation_bench.py --data-dir DIR --graph NAME [--build PATH --format FMT] [--build-seconds S]
      [--embed-model hash-384] [--edits 5] [--json]

With --build, the graph is first built from PATH into DIR (timed: the full rebuild); otherwise --build-seconds
gives the full build's time measured elsewhere (e.g. the 1M-relation graph's, which takes an hour here). The
graph in DIR is changed (edits, merges, 10 documents): run it on a copy. Every timed search is the KG search a
page runs (`retrieval.search.retriever.search`), on the same opened graph, right after the change returned.

The 10 documents are the demo library's chapters (data/demo/src, its prose without the KG lines) as Markdown.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from retrieval.config import Settings  # noqa: E402
from retrieval.curation.apply import Curator  # noqa: E402
from retrieval.curation.ops import MergeEntities, RenameEntity  # noqa: E402
from retrieval.embedding import load_embedder  # noqa: E402
from retrieval.graph.runtime import open_kg  # noqa: E402
from retrieval.ingest.build import ingest  # noqa: E402
from retrieval.ingest.update import add_documents  # noqa: E402
from retrieval.models import SearchParams  # noqa: E402
from retrieval.search.retriever import search  # noqa: E402

DEMO_SRC = ROOT / "data" / "demo" / "src"
DOCS = 10


def write_documents(out: Path, n: int = DOCS) -> list[str]:
    """`n` chapters of the demo library's books as Markdown documents (prose only); returns their titles."""
    titles = []
    for book in sorted(DEMO_SRC.glob("*.txt")):
        if book.name == "entities.txt":
            continue
        chapter, lines = "", []
        for line in book.read_text(encoding="utf-8").splitlines() + ["## end"]:
            if line.startswith("## "):
                if chapter and lines and len(titles) < n:
                    title = f"Notes on {chapter}"
                    (out / f"doc-{len(titles):02d}.md").write_text(
                        f"# {title}\n\n## {chapter}\n\n" + "\n\n".join(lines) + "\n", encoding="utf-8")
                    titles.append(title)
                chapter, lines = line[3:].strip(), []
            elif line.startswith("* "):
                lines.append(line[2:])
    return titles


def timed(fn, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN201
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--graph", required=True)
    ap.add_argument("--build", type=Path, help="build the graph from this folder first (timed)")
    ap.add_argument("--format", default="auto")
    ap.add_argument("--build-seconds", type=float, help="the full build's time, measured elsewhere")
    ap.add_argument("--embed-model", default="")
    ap.add_argument("--edits", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    settings = Settings.from_env(data_dir=args.data_dir, embed_model=args.embed_model or None)
    embedder = load_embedder(settings.embed_model)
    out: dict[str, object] = {"graph": args.graph, "embed_model": embedder.name}
    if args.build is not None:
        report, seconds = timed(ingest, settings, args.build, fmt=args.format, name=args.graph, embedder=embedder,
                                progress=False)
        out["build_s"] = round(seconds, 1)
        out["build_unchanged"] = report.unchanged
    elif args.build_seconds is not None:
        out["build_s"] = args.build_seconds
    kg, open_s = timed(open_kg, settings, args.graph, embedder)
    out["open_s"] = round(open_s, 1)
    curator = Curator(kg)
    params = SearchParams.model_validate({})
    a = kg.index.arrays
    out["entities"], out["relations"] = len(a.node_ids), len(a.relation_ids)
    _, warm_s = timed(search, kg, f"How does {a.node_names[0][:60]} relate to {a.node_names[-1][:60]}?", params)
    out["first_search_s"] = round(warm_s, 2)  # builds the lazy parts (memory graph, matcher) before timing edits

    # one-entity edits: rename, then a search naming the new name must seed from that entity
    degree = kg.index.und_csr.indptr[1:] - kg.index.und_csr.indptr[:-1]
    order = sorted(range(len(a.node_ids)), key=lambda i: -int(degree[i]))
    edits = []
    for k in range(args.edits):
        eid = kg.index.arrays.node_ids[order[k * 7 % len(order)]]
        name = f"Curated Entity Number {k} Zeta"
        cs, apply_s = timed(curator.apply, [RenameEntity(entity_id=eid, name=name)], author="bench")
        result, search_s = timed(search, kg, f"What is {name}?", params)
        assert eid in result.seed_ids, f"the search did not see the rename of {eid!r}"
        edits.append({"apply_s": apply_s, "search_s": search_s, "visible_s": apply_s + search_s,
                      **{f"apply_{k2}_s": v for k2, v in curator.last_seconds.items()}})
    out["edit"] = summary(edits)

    # a merge of two well-connected entities (the index's topology changes), then a search about the kept one
    keep, other = (kg.index.arrays.node_ids[order[i]] for i in (1, 2))
    keep_name = kg.graph.get_entities([keep])[0].name
    cs, merge_s = timed(curator.apply, [MergeEntities(entity_ids=(keep, other))], author="bench")
    result, search_s = timed(search, kg, f"What is {keep_name}?", params)
    assert other not in {n.id for n in result.subgraph.nodes}
    out["merge"] = {"apply_s": round(merge_s, 3), "search_s": round(search_s, 3),
                    "visible_s": round(merge_s + search_s, 3), "records": len(cs.changes),
                    **{f"apply_{k}_s": round(v, 3) for k, v in curator.last_seconds.items()}}

    # 10 documents: the extractor's model loaded first (a running app has it), and cold in a fresh process below
    with tempfile.TemporaryDirectory(prefix="curation-bench-") as tmp:
        folder = Path(tmp) / "docs"
        folder.mkdir()
        titles = write_documents(folder)
        from retrieval.ingest.extract.offline import load_pipeline

        _, load_s = timed(load_pipeline)  # spaCy's model, loaded once per process (the app keeps it)
        (cs, _warnings), add_s = timed(add_documents, curator, folder, author="bench")
        chunks = sum(1 for c in cs.changes if c.kind == "chunk")
        result, search_s = timed(search, kg, "How does brand equity show up in business results?", params)
    out["add_documents"] = {"documents": len(titles), "chunks": chunks, "records": len(cs.changes),
                            "extractor_load_s": round(load_s, 2), "add_s": round(add_s, 2),
                            "search_s": round(search_s, 3),
                            **{f"apply_{k}_s": round(v, 3) for k, v in curator.last_seconds.items()}}
    if "build_s" in out and out["build_s"]:
        out["add_vs_build"] = round(add_s / float(out["build_s"]), 4)  # type: ignore[arg-type]
    kg.close()
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print_table(out)


def summary(rows: list[dict[str, float]]) -> dict[str, float]:
    keys = rows[0].keys()
    return {**{f"{k}_p50": round(statistics.median(r[k] for r in rows), 3) for k in keys},
            **{f"{k}_max": round(max(r[k] for r in rows), 3) for k in keys}, "n": len(rows)}


def print_table(out: dict[str, object]) -> None:
    e, m, d = out["edit"], out["merge"], out["add_documents"]  # type: ignore[index]
    print(f"graph {out['graph']}: {out['entities']:,} entities, {out['relations']:,} relations "
          f"(embedder {out['embed_model']}); open {out['open_s']} s, first search {out['first_search_s']} s")
    if "build_s" in out:
        print(f"full build: {out['build_s']} s")
    print(f"edit (rename one entity) -> search sees it: p50 {e['visible_s_p50']:.3f} s, max {e['visible_s_max']:.3f} s"
          f" (apply p50 {e['apply_s_p50']:.3f} s: graph {e['apply_graph_s_p50']:.3f}, vectors "
          f"{e['apply_vectors_s_p50']:.3f}; search p50 {e['search_s_p50']:.3f} s; n={e['n']})")
    print(f"merge two hubs ({m['records']} records) -> search sees it: {m['visible_s']:.3f} s "
          f"(apply {m['apply_s']:.3f} s, search {m['search_s']:.3f} s)")
    ratio = f", {100 * float(out['add_vs_build']):.1f}% of the full build" if "add_vs_build" in out else ""  # type: ignore[arg-type]
    print(f"add {d['documents']} documents ({d['chunks']} chunks, {d['records']} records): {d['add_s']:.2f} s{ratio} "
          f"(+ {d['extractor_load_s']:.2f} s to load the offline extractor once per process); "
          f"a search over them {d['search_s']:.3f} s")


if __name__ == "__main__":
    main()
