"""Passage ranking modes and passage Recall@k, for the retrieval benchmark (`python -m retrieval eval`).

Modes (every query batched: one encode call, one vector search per collection, one PPR call):
  bm25   Okapi BM25 over title + text (the index stored with the graph version).
  dense  cosine of MiniLM query and passage vectors (DocumentChunks).
  ppr    HippoRAG v1 (arXiv:2405.14831): PPR over the entity graph from the query's seeds;
         passage score = PPR node probabilities x the node-to-passage matrix.
  fused  Reciprocal rank fusion (Cormack et al., SIGIR 2009; k = 60) of ppr and dense.
  graph  HippoRAG 2 (arXiv:2502.14802): PPR on the memory graph (entities + passage nodes) with dense
         passage similarity in the personalisation; passages ranked by their own PPR mass.
         The same seeds and graph as the search's local stage (retrieval.search.local_search).
Search modes (one `retrieval.search.modes.run_mode` call per question, asked for `limit` results, default max k):
  vector hybrid kg comprehensive dual multidoc   the mode of the same name;
  graph_tool     run_mode's `graph` tool (named apart from the `graph` ranker above; it is the KG retriever
                 with its default parameters, so it ranks exactly as `kg` does).
  A search mode's ranking is the chunk ids its result's items cite, in result order, each kept at its first
  citation. It is not padded: when a mode cites fewer than k passages, Recall@k counts every gold passage it
  did not cite as missed (`ModeScore.ranked` reports the mean list length).
Recall follows shared/data/hipporag_musique_train/SOURCE.md: per query the fraction of its distinct gold
passages in the top k, averaged over queries; AR@k = the fraction of queries with every gold passage in it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retrieval.errors import IngestError, ValidationError, excerpt
from retrieval.graph import bm25
from retrieval.graph.ppr import Transition, ppr
from retrieval.graph.runtime import KG, embedding_cache
from retrieval.models import GraphData, SearchParams, SearchResult
from retrieval.search.decompose import entity_mentions
from retrieval.search.local_search import FACT_POOL, PASSAGE_POOL, choose_seeds, memory_graph, personalisation
from retrieval.search.retriever import mention_cosines
from retrieval.stores.base import CHUNKS, ENTITIES, RELATIONS

MODES = ("bm25", "dense", "ppr", "fused", "graph")  # passage rankers: every passage of the corpus ranked
# eval name -> retrieval.search.modes name (see the module docstring)
SEARCH_MODES = {"vector": "vector", "hybrid": "hybrid", "kg": "kg", "graph_tool": "graph",
                "comprehensive": "comprehensive", "dual": "dual", "multidoc": "multidoc"}
EVAL_MODES = (*MODES, *SEARCH_MODES)
MAX_SEARCH_LIMIT = 50  # the search tools' own bound on `limit`
RRF_K = 60


@dataclass(frozen=True)
class BenchmarkQuery:
    id: str
    question: str
    gold: tuple[str, ...]  # distinct gold chunk ids


@dataclass(frozen=True)
class ModeScore:
    mode: str
    recall: dict[int, float]  # k -> mean Recall@k in [0, 1]
    all_recall: dict[int, float]  # k -> AR@k in [0, 1]
    seconds: float
    ranked: float  # mean number of passages ranked per query (search modes: distinct passages cited)


def passage_key(title: str, text: str) -> str:
    """HippoRAG's MuSiQue gold key: title + newline + paragraph text (titles alone are not unique)."""
    return f"{title}\n{text}"


def load_hipporag_queries(root: Path, data: GraphData) -> list[BenchmarkQuery]:
    """The questions file next to the corpus (MuSiQue format), gold passages resolved to chunk ids."""
    files = [p for p in sorted(Path(root).glob("*.json"))
             if not p.name.endswith("_corpus.json") and not p.name.startswith("openie_")]
    if len(files) != 1:
        found = ", ".join(p.name for p in files) or "none"
        raise IngestError(str(root), 0, "path", f"expected one questions JSON besides the corpus, found {found}")
    by_key = {passage_key(c.original_document, c.text): c.id for c in data.chunks}
    try:
        raw = json.loads(files[0].read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise IngestError(str(files[0]), exc.lineno, "json", exc.msg) from exc
    out = []
    for i, q in enumerate(raw):
        at = f"[{i}]"
        try:
            gold = [passage_key(p["title"], p["paragraph_text"]) for p in q["paragraphs"] if p.get("is_supporting")]
            question, qid = str(q["question"]), str(q.get("id", i))
        except (KeyError, TypeError) as exc:
            raise IngestError(str(files[0]), 0, at, f"not a MuSiQue question record ({exc})") from exc
        missing = [g.split("\n", 1)[0] for g in gold if g not in by_key]
        if missing:
            raise IngestError(str(files[0]), 0, f"{at}.paragraphs",
                              f"gold passage not in the corpus: {excerpt(missing[0])}")
        out.append(BenchmarkQuery(qid, question, tuple(dict.fromkeys(by_key[g] for g in gold))))
    return out


def recall_scores(rankings: Sequence[Sequence[str]], golds: Sequence[Sequence[str]], ks: Sequence[int]
                  ) -> tuple[dict[int, float], dict[int, float]]:
    """Mean Recall@k and AR@k over queries (HippoRAG's definition; see the module docstring)."""
    recall, all_recall = {}, {}
    for k in ks:
        per = [len(set(r[:k]) & set(g)) / len(g) for r, g in zip(rankings, golds, strict=True) if g]
        full = [float(set(g) <= set(r[:k])) for r, g in zip(rankings, golds, strict=True) if g]
        recall[k] = float(np.mean(per)) if per else 0.0
        all_recall[k] = float(np.mean(full)) if full else 0.0
    return recall, all_recall


def _order(scores: np.ndarray, ids: Sequence[str], fallback: Sequence[str]) -> list[str]:
    """Ids by score (desc, ties by position), then any `fallback` ids not scored (e.g. isolated passages)."""
    order = np.lexsort((np.arange(len(scores)), -scores))
    ranked = [ids[i] for i in order if scores[i] > 0]
    seen = set(ranked)
    return ranked + [c for c in fallback if c not in seen]


def rrf(*rankings: Sequence[str], k: int = RRF_K) -> list[str]:
    """Reciprocal rank fusion: score(d) = sum over rankings of 1 / (k + rank(d)), rank from 1."""
    score: dict[str, float] = {}
    for ranking in rankings:
        for pos, doc in enumerate(ranking, start=1):
            score[doc] = score.get(doc, 0.0) + 1.0 / (k + pos)
    return sorted(score, key=lambda d: (-score[d], d))


def rank_passages(kg: KG, questions: Sequence[str], modes: Sequence[str] = MODES,
                  params: SearchParams | None = None) -> dict[str, list[list[str]]]:
    """For each mode, each question's passages (chunk ids), best first."""
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise ValidationError(f"unknown mode(s) {', '.join(unknown)}; valid: {', '.join(MODES)}")
    params = params or SearchParams.model_validate({})
    index, embed = kg.index, embedding_cache(kg)
    n_chunks = kg.vectors.count(CHUNKS)
    qvecs = np.asarray(embed.embed(list(questions)), dtype=np.float32)
    out: dict[str, list[list[str]]] = {}
    need_dense = {"dense", "fused", "graph"} & set(modes)
    dense = kg.vectors.search(CHUNKS, qvecs, max(n_chunks, 1), payload=False) if need_dense else []
    dense_ids = [[h.id for h in hits] for hits in dense]
    if "dense" in modes:
        out["dense"] = dense_ids
    if "bm25" in modes:
        out["bm25"] = [[cid for cid, _ in bm25.search(kg.bm25, q, n_chunks)] for q in questions]
    if not {"ppr", "fused", "graph"} & set(modes):
        return out

    mem = memory_graph(index, kg.bm25)
    ent_hits = kg.vectors.search(ENTITIES, qvecs, max(params.max_seed_nodes, 10), payload=False)
    fact_hits = kg.vectors.search(RELATIONS, qvecs, FACT_POOL, payload=False)
    mentions = [entity_mentions(index, q, hits) for q, hits in zip(questions, ent_hits, strict=True)]
    resets = []
    seeds_per_query = []
    for i, ms in enumerate(mentions):
        seeds = choose_seeds(
            index, mem,
            mentions=[(m.idx, float(c)) for m, c in zip(ms, mention_cosines(kg, qvecs[i], [m.id for m in ms]),
                                                          strict=True)],
            fact_hits=fact_hits[i],
            chunk_hits=dense[i][:PASSAGE_POOL] if dense else (),
            entity_hits=ent_hits[i],
            max_seeds=params.max_seed_nodes,
        )
        seeds_per_query.append(seeds)
        resets.append(personalisation(mem, seeds))
    all_chunks = [h.id for h in dense[0]] if dense else list(index.chunk_ids)
    if "graph" in modes:
        probs = ppr(mem.transition, _columns(resets), params.damping)[mem.n_entities :]
        out["graph"] = [_order(probs[:, i], index.chunk_ids, dense_ids[i]) for i in range(len(questions))]
    if {"ppr", "fused"} & set(modes):
        ent = index.cached("entity_transition", lambda: Transition.of(index.und_csr))
        cols = _columns([r[: mem.n_entities] for r in resets], fallback=index.n_nodes)
        passage = np.asarray(index.node_chunk.T @ ppr(ent, cols, params.damping))
        ppr_ids = [_order(passage[:, i], index.chunk_ids, all_chunks) for i in range(len(questions))]
        if "ppr" in modes:
            out["ppr"] = ppr_ids
        if "fused" in modes:
            out["fused"] = [rrf(p, d) for p, d in zip(ppr_ids, dense_ids, strict=True)]
    return {m: out[m] for m in modes}


def _columns(vectors: Sequence[np.ndarray], fallback: int | None = None) -> np.ndarray:
    """Stack personalisation vectors as columns; an all-zero column becomes uniform (nothing to seed)."""
    mat = np.stack(vectors, axis=1) if vectors else np.zeros((fallback or 0, 0))
    empty = mat.sum(axis=0) <= 0
    mat[:, empty] = 1.0
    return mat


def cited_passages(result: SearchResult) -> list[str]:
    """The chunk ids a search result's items cite, in result order, each at its first citation."""
    return list(dict.fromkeys(c for f in result.facts for c in f.chunk_ids))


def rank_by_search(kg: KG, questions: Sequence[str], mode: str, limit: int,
                   params: SearchParams | None = None) -> list[list[str]]:
    """Each question's passages as search mode `mode` (an eval name, see SEARCH_MODES) cites them."""
    from retrieval.search.modes import run_mode

    if mode not in SEARCH_MODES:
        raise ValidationError(f"unknown search mode {excerpt(mode)}; valid: {', '.join(SEARCH_MODES)}")
    kg_params = params.model_copy(update={"max_results": limit}) if params else None
    # the ranking itself is measured; the no-match signal has its own calibration (calibrate-nomatch)
    return [cited_passages(run_mode(kg, SEARCH_MODES[mode], q, limit=limit, params=kg_params, no_match=False))
            for q in questions]


def evaluate(kg: KG, queries: Sequence[BenchmarkQuery], modes: Sequence[str] = MODES,
             ks: Sequence[int] = (2, 5, 10), params: SearchParams | None = None,
             limit: int | None = None) -> list[ModeScore]:
    """Recall@k and AR@k of every mode on `queries`; search modes are asked for `limit` (default max k) results."""
    import time

    unknown = [m for m in modes if m not in EVAL_MODES]
    if unknown:
        raise ValidationError(f"unknown mode(s) {', '.join(unknown)}; valid: {', '.join(EVAL_MODES)}")
    limit = limit or min(max(ks), MAX_SEARCH_LIMIT)
    questions = [q.question for q in queries]
    golds = [q.gold for q in queries]
    out = []
    for mode in modes:
        start = time.perf_counter()
        if mode in SEARCH_MODES:
            rankings = rank_by_search(kg, questions, mode, limit, params)
        else:
            rankings = rank_passages(kg, questions, [mode], params)[mode]
        recall, all_recall = recall_scores(rankings, golds, ks)
        ranked = float(np.mean([len(r) for r in rankings])) if rankings else 0.0
        out.append(ModeScore(mode, recall, all_recall, time.perf_counter() - start, ranked))
    return out
