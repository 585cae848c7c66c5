"""Grounded answers (seed 004 AnswerSynthesizer, `use_enhancements`): numbered evidence, an answer that cites it.

The evidence is the search result's facts, then the chunks they cite, numbered [1]..[N]. With a Gemini key the
answer is streamed from Gemini, told to use only the evidence and to end every sentence with its [n]; without
one (or when Gemini refuses, breaks off, times out or answers nothing) the answer is extractive: the evidence
sentences closest to the question, each with its number, and a warning says why. Every answer then goes through
the citation check: numbers outside 1..N are listed, sentences citing nothing are counted and marked.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retrieval.answer.fewshot import FewShotManager
from retrieval.config import Settings
from retrieval.graph.runtime import KG, embedding_cache
from retrieval.llm import LLMError, gemini_stream
from retrieval.models import (
    Answer,
    AnswerSentence,
    Enhancements,
    Evidence,
    FewShotExample,
    SearchResult,
    VerbalizedFact,
)
from retrieval.search.retriever import Trace, check_query
from retrieval.search.verbalize import NOTHING, source_line, weak_matches_text
from retrieval.stores.base import CHUNKS

MAX_CHUNKS = 6  # chunks added after the facts
CHUNK_CHARS = 1200  # of each chunk's text in the prompt and the evidence list
EXTRACT_SENTENCES = 3
MAX_CANDIDATES = 80  # sentences embedded for an extractive answer (about 10 ms each here)
SAME_SENTENCE = 0.9  # cosine above which a second sentence repeats the first
FEW_SHOT = 2
NO_KEY = "Gemini is not configured (no GEMINI_API_KEY): extractive answer shown"

SYSTEM = (
    "You answer an analyst's question from numbered evidence retrieved from a knowledge graph: facts (relations "
    "between entities) and the source passages they come from.\n"
    "- Use only what the evidence states. Do not add outside knowledge.\n"
    "- End every sentence with the numbers of the evidence it rests on, in square brackets: [2] or [1][4].\n"
    "- If the evidence does not answer the question, say so in one sentence and cite nothing.\n"
    "- Write plain prose: at most six sentences, no headings, no lists, no Markdown."
)
MULTI_DOC = ("- The evidence is grouped by book. Where several books bear on the question, combine them and say "
             "which book says what.")

_CITES = re.compile(r"\[(\d+(?:\s*[,;]\s*\d+)*)\]")
_LEADING_CITES = re.compile(r"^(?:\s*\[\d+(?:\s*[,;]\s*\d+)*\])+")
_BOUNDARY = re.compile(r"(?<=[.!?])\s+|\n+")
# a boundary after these is not the end of a sentence ("e.g. price", "E. Jerome McCarthy")
_ABBREVIATION = re.compile(r"(?:\b(?:e\.g|i\.e|etc|vs|cf|Dr|Mr|Mrs|Ms|St|No|Fig)|\b[A-Z])\.$")


# --- citations --------------------------------------------------------------------------------


def split_sentences(text: str) -> list[str]:
    """Sentences of `text`; citation marks written after a sentence's full stop stay with that sentence."""
    out: list[str] = []
    for part in _BOUNDARY.split(text.strip()):
        lead = _LEADING_CITES.match(part)
        if lead and out:
            out[-1] = f"{out[-1]} {lead.group(0).strip()}"
            part = part[lead.end():]
        part = part.strip()
        if not part:
            continue
        if out and _ABBREVIATION.search(out[-1]):
            out[-1] = f"{out[-1]} {part}"
        else:
            out.append(part)
    return out


def check_citations(text: str, n_evidence: int) -> tuple[AnswerSentence, ...]:
    """Each sentence with the evidence numbers it cites (valid: 1..n_evidence) and those that cite nothing."""
    sentences = []
    for sentence in split_sentences(text):
        numbers = [int(n) for group in _CITES.findall(sentence) for n in re.split(r"\s*[,;]\s*", group)]
        valid = tuple(dict.fromkeys(n for n in numbers if 1 <= n <= n_evidence))
        invalid = tuple(dict.fromkeys(n for n in numbers if not 1 <= n <= n_evidence))
        bare = " ".join(_CITES.sub("", sentence).split())
        bare = re.sub(r"\s+([.,;:!?])", r"\1", bare)
        sentences.append(AnswerSentence(text=bare, citations=valid, invalid=invalid))
    return tuple(sentences)


# --- evidence ---------------------------------------------------------------------------------


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def number_evidence(facts: Sequence[VerbalizedFact], chunks: dict[str, dict[str, Any]],
                    extra: Sequence[VerbalizedFact] = ()) -> list[Evidence]:
    """[1..F] the facts, then up to MAX_CHUNKS chunks: `extra` document facts first (multi-doc), then the chunks
    the facts cite, in order of first citation. `chunks`: DocumentChunks rows by id."""
    out = [
        Evidence(n=i, kind="chunk" if f.type == "document" else "fact", id=f.id, text=_clip(f.text, CHUNK_CHARS),
                 source=source_line(f.sources), book=f.sources[0].original_document if f.sources else "")
        for i, f in enumerate(facts, start=1)
    ]
    present = {c for f in facts if f.type == "document" for c in f.chunk_ids}  # a tool mode's chunk facts
    wanted = [c for f in extra for c in f.chunk_ids] + [c for f in facts for c in f.chunk_ids]
    for cid in dict.fromkeys(c for c in wanted if c not in present and c in chunks):
        if len(out) - len(facts) >= MAX_CHUNKS:
            break
        row = chunks[cid]
        book, chapter = str(row.get("original_document") or ""), str(row.get("chapter") or "")
        where = " — ".join(x for x in (book, chapter) if x) or str(row.get("source") or cid)
        out.append(Evidence(n=len(out) + 1, kind="chunk", id=cid, text=_clip(str(row.get("text", "")), CHUNK_CHARS),
                            source=where, book=book))
    return out


def build_prompt(query: str, evidence: Sequence[Evidence], examples: Sequence[FewShotExample] = (),
                 *, by_book: bool = False) -> str:
    """The user prompt: optional few-shot examples, the question, the numbered evidence (by book if asked)."""
    lines: list[str] = []
    if examples:
        lines.append("Examples of good answers to other questions on this graph (style only, not evidence):")
        for example in examples:
            lines += [f"Q: {example.question}", f"A: {example.answer}", ""]
    lines += [f"Question: {query}", "", "Evidence:"]
    groups: dict[str, list[Evidence]] = {}
    for e in evidence:
        groups.setdefault(e.book if by_book else "", []).append(e)
    for book, items in groups.items():
        if by_book:
            lines.append(f"Book: {book or '(no book)'}")
        for e in items:
            kind = "fact" if e.kind == "fact" else "passage"
            lines.append(f"[{e.n}] ({kind}{', ' + e.source if e.source else ''}) {e.text}")
    return "\n".join(lines)


# --- extractive answer -------------------------------------------------------------------------


def _candidates(evidence: Sequence[Evidence], facts: Sequence[VerbalizedFact],
                descriptions: dict[str, str]) -> list[tuple[str, int]]:
    """(sentence, evidence number): a fact's relation descriptions (its own sentences), a chunk's sentences."""
    by_id = {f.id: f for f in facts}
    out: dict[str, int] = {}
    for e in evidence:
        fact = by_id.get(e.id)
        if fact is not None and fact.type != "document":
            texts = [descriptions[r] for r in fact.relation_ids if descriptions.get(r)] or [e.text]
        else:
            texts = split_sentences(e.text)
        for text in texts:
            out.setdefault(_clip(text, 400), e.n)
    return list(out.items())[:MAX_CANDIDATES]


def extractive(query: str, evidence: Sequence[Evidence], facts: Sequence[VerbalizedFact],
               descriptions: dict[str, str], embed: Callable[[Sequence[str]], np.ndarray]) -> str:
    """The evidence sentences closest to `query` (MiniLM cosine), without near repeats, each ending with [n]."""
    pool = _candidates(evidence, facts, descriptions)
    if not pool:
        return ""
    vecs = embed([s for s, _ in pool])
    sims = vecs @ embed([query])[0]
    chosen: list[int] = []
    for i in np.argsort(-sims, kind="stable"):
        if all(float(vecs[i] @ vecs[j]) < SAME_SENTENCE for j in chosen):
            chosen.append(int(i))
        if len(chosen) == EXTRACT_SENTENCES:
            break
    parts = []
    for i in chosen:
        sentence, n = pool[i]
        sentence = sentence.rstrip()
        stop = "" if sentence.endswith((".", "!", "?", "…")) else "."
        parts.append(f"{sentence}{stop} [{n}]")
    return " ".join(parts)


# --- orchestration -----------------------------------------------------------------------------


@dataclass
class _Trace(Trace):
    notes: dict[str, str] = field(default_factory=dict)  # use_enhancements switch -> what it did


def _moved(before: Sequence[VerbalizedFact], after: Sequence[VerbalizedFact]) -> int:
    return sum(1 for a, b in zip(before, after, strict=False) if a.id != b.id)


def _rerank(kg: KG, settings: Settings, query: str, facts: list[VerbalizedFact], enh: Enhancements,
            trace: _Trace, cross_encoder: Any) -> list[VerbalizedFact]:
    from retrieval.rerank import CrossEncoderReranker, GraphReranker

    if not facts:
        return facts
    if enh.graph_rerank:
        with trace.stage("graph rerank"):
            reranker = kg.index.cached("answer_graph_reranker", lambda: GraphReranker(kg, embedding_cache(kg)))
            out = reranker.rerank(query, facts, len(facts))
        trace.warnings.extend(out.warnings)
        trace.notes["graph_rerank"] = (f"on: α·similarity + β·PageRank over {len(facts)} facts, "
                                       f"{_moved(facts, out.candidates)} moved")
        facts = out.candidates
    if enh.cross_encoder:
        with trace.stage("cross-encoder"):
            scorer = cross_encoder or kg.index.cached("answer_cross_encoder",  # loaded once per graph version
                                                      lambda: CrossEncoderReranker.from_settings(settings))
            out = scorer.rerank(query, facts, len(facts))
        trace.warnings.extend(out.warnings)
        moved = _moved(facts, out.candidates)
        trace.notes["cross_encoder"] = (f"on: {moved} of {len(facts)} facts moved" if not out.warnings
                                        else "on, but unavailable: facts kept in order (see warnings)")
        facts = out.candidates
    return facts


def _few_shot(kg: KG, settings: Settings, query: str, trace: _Trace) -> list[FewShotExample]:
    manager = FewShotManager(settings.data_dir, kg.name)
    with trace.stage("few-shot"):
        picked = manager.select(query, embedding_cache(kg), FEW_SHOT)
    if not picked:
        stored = len(manager.examples())
        trace.notes["few_shot"] = (f"on: none of the {stored} stored examples is close enough" if stored
                                   else f"on: no examples stored for graph {kg.name!r} (Data page)")
        return []
    trace.notes["few_shot"] = "on: " + ", ".join(f"{e.question[:60]!r} ({s:.2f})" for e, s in picked)
    return [e for e, _ in picked]


def _multi_doc(kg: KG, query: str, trace: _Trace) -> list[VerbalizedFact]:
    from retrieval.search.multidoc import multidoc_search

    with trace.stage("multi-doc"):
        found = multidoc_search(kg, query, num_docs=3, max_sections=2)
    chunks = [f for f in found.facts if f.type == "document"]
    books = len(found.groups)
    trace.notes["multi_doc"] = (f"on: {books} book{'s' * (books != 1)}, {len(chunks)} passage{'s' * (len(chunks) != 1)}"
                                " added, grouped by book")
    return chunks


def _generate(settings: Settings, query: str, evidence: Sequence[Evidence], examples: Sequence[FewShotExample],
              enh: Enhancements, trace: _Trace, on_text: Callable[[str], None] | None, timeout_ms: int) -> str:
    """Gemini's answer streamed through `on_text`; '' (and a warning saying why) when it refuses, breaks off,
    times out or answers nothing."""
    prompt = build_prompt(query, evidence, examples, by_book=enh.multi_doc)
    system = f"{SYSTEM}\n{MULTI_DOC}" if enh.multi_doc else SYSTEM
    text = ""
    try:
        with trace.stage("generate"):
            for piece in gemini_stream(settings, prompt, system_instruction=system, timeout_ms=timeout_ms):
                text += piece
                if on_text:
                    on_text(text)
    except LLMError as exc:
        trace.warnings.append(f"{exc}: extractive answer shown instead")
        if examples:
            trace.notes["few_shot"] += " — not used: the answer fell back to extractive"
        return ""
    return text


def answer_question(
    kg: KG,
    query: str,
    *,
    result: SearchResult | None = None,
    settings: Settings | None = None,
    enhancements: Enhancements | None = None,
    on_text: Callable[[str], None] | None = None,
    cross_encoder: Any = None,
    timeout_ms: int = 30_000,
) -> Answer:
    """Answer `query` from `result` (default: a KG search with the no-match signal) with [n] citations.

    `on_text(text so far)` is called as Gemini streams. `cross_encoder`: a shared CrossEncoderReranker.
    """
    from retrieval.search.nomatch import gate
    from retrieval.search.retriever import search

    settings = settings or kg.settings
    enh = enhancements or Enhancements()
    trace = _Trace()
    query = check_query(query)
    if result is None:
        with trace.stage("search"):
            result = gate(search(kg, query, settings=settings))
    if result.no_match:
        return Answer(query=query, kind="no_match", answer=NOTHING, weak_matches=result.weak_matches,
                      evidence_strength=result.evidence_strength, timings=tuple(trace.timings),
                      warnings=result.warnings, graph_version=kg.version)
    trace.notes = {name: "off" for name in Enhancements.model_fields}
    facts = _rerank(kg, settings, query, list(result.facts), enh, trace, cross_encoder)
    extra = _multi_doc(kg, query, trace) if enh.multi_doc else []
    with trace.stage("evidence"):
        wanted = list(dict.fromkeys(c for f in [*extra, *facts] for c in f.chunk_ids))
        chunks = {str(r["id"]): r for r in kg.vectors.get(CHUNKS, wanted)} if wanted else {}
        evidence = number_evidence(facts, chunks, extra)
    examples: list[FewShotExample] = []
    generated = ""
    if settings.gemini_enabled and evidence:
        examples = _few_shot(kg, settings, query, trace) if enh.few_shot else []
        generated = _generate(settings, query, evidence, examples, enh, trace, on_text, timeout_ms)
    elif not settings.gemini_enabled:
        trace.warnings.append(NO_KEY)
        if enh.few_shot:
            trace.notes["few_shot"] = "on, not used: an extractive answer has no prompt"
    text = generated
    if not generated:
        descriptions = {r.id: r.description for r in result.subgraph.edges}
        with trace.stage("extract"):
            text = extractive(query, evidence, facts, descriptions, embedding_cache(kg).embed)
    sentences = check_citations(text, len(evidence))
    cited = sorted({n for s in sentences for n in s.citations})
    invalid = tuple(dict.fromkeys(n for s in sentences for n in s.invalid))
    uncited = sum(1 for s in sentences if not s.cited)
    if invalid:
        trace.warnings.append(f"the answer cites {', '.join(f'[{n}]' for n in invalid)}, which no evidence has")
    if uncited:
        trace.warnings.append(f"{uncited} of {len(sentences)} sentences cite no evidence (marked)")
    return Answer(
        query=query, kind="generated" if generated else "extractive", answer=text,
        citations=tuple(evidence[n - 1] for n in cited), sentences=sentences, evidence=tuple(evidence),
        uncited=uncited, invalid_citations=invalid, enhancements=trace.notes,
        examples=tuple(e.question for e in examples) if generated else (), evidence_strength=result.evidence_strength,
        model=settings.gemini_model if generated else "", timings=tuple(trace.timings),
        warnings=tuple(dict.fromkeys([*result.warnings, *trace.warnings])), graph_version=kg.version,
    )


def to_markdown(answer: Answer) -> str:
    """The answer for an agent: the text, its kind, then the numbered citations (weak matches for no match)."""
    if answer.kind == "no_match":
        return weak_matches_text(answer.weak_matches, answer.evidence_strength) + "\n"
    label = "Answer" if answer.kind == "generated" else "Extractive answer (evidence sentences, not generated)"
    lines = [f"## {label}", "", " ".join(answer.answer.split()), ""]
    if answer.citations:
        lines.append("### Citations")
        for e in answer.citations:
            where = f" — _{e.source}_" if e.source else ""
            lines.append(f"[{e.n}] ({e.kind}) {_clip(e.text, 300)}{where}")
    lines += [f"warning: {w}" for w in answer.warnings]
    return "\n".join(lines) + "\n"
