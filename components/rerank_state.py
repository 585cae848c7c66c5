"""Rerank Inspector state: the cached retrieval (counted), rerankers per graph version, the label store."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import streamlit as st

import app_state
from retrieval.config import Settings
from retrieval.evaluation.evaluate import EvalReport, evaluate, rerank_runs
from retrieval.evaluation.inspect import Inspection, Memo, Pool, PoolKind, candidate_pool, pool_order
from retrieval.evaluation.labels import Label
from retrieval.graph.runtime import KG
from retrieval.rerank import GraphReranker, MMRReranker, Reranker, build_rerankers
from retrieval.search.retriever import kg_fact_vectors

RERANKER_ORDER = ("none", "graph", "mmr", "cross_encoder", "llm")


@dataclass
class RetrievalCounter:
    """How many retrievals actually ran per (graph, version, query, kind, size), server-wide."""

    counts: Counter[tuple[str, ...]] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def bump(self, key: tuple[str, ...]) -> None:
        with self.lock:
            self.counts[key] += 1

    def get(self, key: tuple[str, ...]) -> int:
        with self.lock:
            return self.counts[key]


@st.cache_resource(show_spinner=False)
def retrieval_counter() -> RetrievalCounter:
    return RetrievalCounter()


def retrievals(kg: KG, query: str, kind: str, size: int) -> int:
    """How many times the pool of this (graph version, query, kind, size) was actually retrieved."""
    return retrieval_counter().get((kg.name, kg.version, query, kind, str(size)))


@st.cache_data(max_entries=256, show_spinner=False)
def _pool(_kg: KG, graph: str, version: str, query: str, kind: PoolKind, size: int) -> Pool:
    retrieval_counter().bump((graph, version, query, kind, str(size)))  # runs only on a cache miss
    return candidate_pool(_kg, query, kind, size)


def pool(kg: KG, query: str, kind: PoolKind, size: int) -> Pool:
    """The candidate pool, retrieved once per (graph version, query, kind, size) and then cached."""
    return _pool(kg, kg.name, kg.version, query, kind, size)


def evaluate_labelled(
    kg: KG, inspection: Inspection, labels: Sequence[Label], rerankers: Mapping[str, Reranker],
    kind: PoolKind, size: int, text_weight: float, k: int, compare: tuple[str, str] | None = None,
) -> tuple[EvalReport, dict[str, dict[str, list[str]]]]:
    """Every labelled query's pool (cached: retrieved once each) ranked under the same rerankers and knobs, scored
    with bootstrap intervals, unjudged counts and (with `compare`) the paired test of two rerankers."""
    queries = sorted({lb.query_text for lb in labels})
    if not queries:
        return evaluate(labels, inspection.runs(), (k,), compare=compare), inspection.runs()
    runs = rerank_runs(queries, lambda q: pool_order(pool(kg, q, kind, size), text_weight), rerankers, size)
    return evaluate(labels, runs.runs, (k,), compare=compare), runs.runs


@st.cache_resource(max_entries=4, show_spinner=False)
def _base_rerankers(_cfg: Settings, _kg: KG, graph: str, version: str) -> dict[str, Reranker]:
    found = build_rerankers(_cfg, _kg.embedder, _kg, kg_fact_vectors(_kg))
    found.pop("cross_encoder", None)  # the app-wide probe (loaded in the background) is used instead
    if "llm" in found:
        found["llm"] = Memo(found["llm"])
    return found


@st.cache_resource(show_spinner=False)
def _cross_encoder(model: str, _reranker: Reranker) -> Memo:
    return Memo(_reranker)


@dataclass(frozen=True)
class RerankerSet:
    """The rerankers to compare at the current what-if knobs, and why any of them is left out."""

    rerankers: dict[str, Reranker]
    notes: list[str]


def rerankers(cfg: Settings, kg: KG, alpha: float, lambda_: float) -> RerankerSet:
    """none, graph(α, 1−α), mmr(λ), the cross-encoder when loaded and the LLM with a Gemini key."""
    base = _base_rerankers(cfg, kg, kg.name, kg.version)
    graph = base["graph"]
    mmr = base["mmr"]
    assert isinstance(graph, GraphReranker) and isinstance(mmr, MMRReranker)
    found: dict[str, Reranker] = {
        "none": base["none"],
        "graph": graph.with_weights(alpha, round(1.0 - alpha, 6)),
        "mmr": mmr.with_lambda(lambda_),
    }
    notes: list[str] = []
    ce = app_state.cross_encoder_status(cfg)
    if ce.state == "live":
        found["cross_encoder"] = _cross_encoder(cfg.cross_encoder_model, app_state.cross_encoder(cfg))  # type: ignore[arg-type]
    elif ce.state == "loading":
        notes.append(f"Cross-encoder {cfg.cross_encoder_model} is still loading: no ce_score yet (rerun shortly).")
    else:
        notes.append(f"{ce.detail} It is left out of the ranks and metrics (no ce_score).")
    if "llm" in base:
        found["llm"] = base["llm"]
    else:
        notes.append("LLM rank off: GEMINI_API_KEY is not set, so the Gemini diversity reranker does not run.")
    return RerankerSet({k: found[k] for k in RERANKER_ORDER if k in found}, notes)
