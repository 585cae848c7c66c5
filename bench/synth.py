"""Synthetic power-law knowledge graphs written as native bundles, for scale runs and benchmarks.

Degrees follow a Chung-Lu model with Zipf weights (Chung & Lu 2002, "Connected components in random graphs
with given expected degree sequences"): relation endpoints are drawn with probability proportional to
rank^-s. The expected degree sequence is then a power law with exponent 1 + 1/s, the same shape that
preferential attachment (Barabasi & Albert 1999) produces, but vectorised and deterministic for a seed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson

from retrieval.errors import ValidationError

ENTITY_TYPES = (
    "concept", "technique", "metric", "person", "organisation",
    "product", "market", "channel", "event", "place",
)
_TYPE_WEIGHTS = np.array([20, 15, 10, 12, 10, 10, 8, 6, 5, 4], dtype=np.float64)

RELATION_TYPES = (
    "INFLUENCES", "PART_OF", "MEASURED_BY", "CONTRASTS_WITH", "ENABLES", "DEPENDS_ON", "CAUSES", "PREVENTS",
    "SUPPORTS", "COMPETES_WITH", "OWNS", "FOUNDED", "EMPLOYS", "LOCATED_IN", "TARGETS", "SERVES",
    "REPLACES", "EXTENDS", "USES", "PRODUCES", "FUNDS", "REGULATES", "ACQUIRED", "PARTNERS_WITH",
    "ADVISES", "AUTHORED", "CRITICISES", "PRECEDES", "FOLLOWS", "SIMILAR_TO", "DERIVED_FROM", "IMPROVES",
    "REDUCES", "INCREASES", "SEGMENTS", "PRICES", "DISTRIBUTES", "PROMOTES", "TESTS", "PREDICTS",
    "EXPLAINS", "REQUIRES", "LIMITS", "AMPLIFIES", "SIGNALS", "MEDIATES", "BENCHMARKS", "LICENSES",
    "HOSTS", "ORGANISES",
)
assert len(RELATION_TYPES) == 50

_ADJECTIVES = (
    "Adaptive", "Amber", "Bold", "Brisk", "Central", "Civic", "Clear", "Coastal", "Crimson", "Dynamic",
    "Early", "Eastern", "Elastic", "Federal", "Fluent", "Global", "Golden", "Grand", "Harbor", "Hidden",
    "Iron", "Jade", "Keen", "Lateral", "Linear", "Lunar", "Modular", "Nimble", "Northern", "Open",
    "Pacific", "Prime", "Quiet", "Rapid", "Royal", "Scarlet", "Silver", "Solar", "Southern", "Steady",
    "Strategic", "Summit", "Swift", "Tidal", "Urban", "Vivid", "Western", "Wild", "Young", "Zenith",
)
_NOUNS = (
    "Pricing", "Brand", "Channel", "Signal", "Market", "Funnel", "Cohort", "Loyalty", "Margin", "Demand",
    "Supply", "Network", "Segment", "Retention", "Campaign", "Audience", "Catalog", "Bundle", "Forecast",
    "Index", "Ledger", "Venture", "Studio", "Labs", "Works", "Partners", "Group", "Holdings", "Institute",
    "Council", "Forum", "Exchange", "Harbor", "Valley", "Ridge", "Point", "Bridge", "Gate", "Field", "Grove",
    "Method", "Model", "Metric", "Ratio", "Score", "Curve", "Effect", "Theory", "Framework", "Protocol",
    "Engine", "Platform", "Service", "Program", "Initiative", "Summit", "Report", "Review", "Survey", "Trial",
    "Elasticity", "Penetration", "Skimming", "Anchoring", "Framing", "Scarcity", "Reciprocity", "Awareness",
    "Consideration", "Conversion", "Advocacy", "Churn", "Lifetime", "Acquisition", "Attribution", "Reach",
    "Frequency", "Recall", "Equity", "Positioning", "Differentiation", "Innovation", "Diffusion", "Adoption",
    "Saturation", "Velocity", "Momentum", "Leverage", "Synergy", "Insight", "Analytics", "Experiment",
    "Sampling", "Sentiment", "Persona", "Journey", "Touchpoint", "Inventory", "Logistics", "Sourcing",
)
_SUFFIXES = (
    "Alpha", "Beta", "Gamma", "Delta", "Sigma", "Omega", "North", "South", "East", "West", "One", "Two",
    "Plus", "Pro", "Max", "Core", "Edge", "Hub", "Lab", "Line", "Loop", "Mark", "Path", "Peak", "Port",
    "Quest", "Rise", "Shift", "Span", "Star", "Stone", "Stream", "Trail", "Vault", "Vista", "Wave", "Works",
    "Zone", "Axis", "Arc",
)
_CONTEXTS = (
    "in mature markets", "during a downturn", "for price-sensitive buyers", "across online channels",
    "in the first year", "for new customers", "in regulated industries", "at launch", "over the long term",
    "in competitive categories", "for premium segments", "in emerging economies", "within loyal cohorts",
    "under tight budgets", "after a rebrand", "in subscription businesses", "for business buyers",
    "in retail stores", "during peak season", "in small firms", "when demand is elastic",
    "when supply is scarce", "for younger audiences", "in global campaigns", "through word of mouth",
    "in field experiments", "according to survey data", "in most case studies", "in the short run",
    "under uncertainty",
)
_TYPE_PHRASES = {
    "concept": "a concept used to reason about markets",
    "technique": "a technique practitioners apply to campaigns",
    "metric": "a metric that tracks performance over time",
    "person": "a person who writes and advises on strategy",
    "organisation": "an organisation active in several markets",
    "product": "a product sold through several channels",
    "market": "a market with distinct customer segments",
    "channel": "a channel that carries messages to buyers",
    "event": "an event that shaped industry practice",
    "place": "a place where firms and buyers meet",
}
_BOOK_WORDS = ("Principles", "Strategy", "Growth", "Markets", "Signals", "Customers", "Brands", "Pricing",
               "Channels", "Metrics", "Networks", "Change")


@dataclass(frozen=True)
class SynthSummary:
    """What `write_synth_bundle` wrote."""

    out: Path
    entities: int
    relations: int
    chunks: int
    books: int
    chapters: int
    seed: int
    seconds: float


def _zipf_weights(n: int, s: float, rng: np.random.Generator) -> np.ndarray:
    """Zipf weights rank^-s over a random permutation of 0..n-1 (so hubs are not the low ids)."""
    w = np.arange(1, n + 1, dtype=np.float64) ** -s
    w /= w.sum()
    return w[rng.permutation(n)]


def _sample(weights: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """Categorical draws by inverse CDF (rng.choice with p= is slower and no more exact)."""
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    return np.minimum(np.searchsorted(cdf, rng.random(size), side="right"), len(weights) - 1)


def entity_names(n: int, rng: np.random.Generator) -> list[str]:
    """Unique three-word names (adjective noun suffix), with a number once the word grid runs out."""
    grid = len(_ADJECTIVES) * len(_NOUNS) * len(_SUFFIXES)
    codes = rng.permutation(grid)[: min(n, grid)] if n <= grid else rng.permutation(grid)
    names = []
    code_list = codes.tolist()
    for i in range(n):
        c = code_list[i % grid]
        a, rest = divmod(c, len(_NOUNS) * len(_SUFFIXES))
        b, s = divmod(rest, len(_SUFFIXES))
        base = f"{_ADJECTIVES[a]} {_NOUNS[b]} {_SUFFIXES[s]}"
        names.append(base if i < grid else f"{base} {i // grid + 1}")
    return names


def _jsonl(fh: IO[bytes], obj: dict[str, Any]) -> None:
    fh.write(orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE))


def _chunk_layout(chunks: int, books: int) -> Iterator[tuple[int, int, int]]:
    """(book index, chapter index within the book, position within the book) for each chunk, in order."""
    per_book = [chunks // books + (1 if b < chunks % books else 0) for b in range(books)]
    for b, n in enumerate(per_book):
        chapters = max(1, min(20, n // 8 or 1))
        for pos in range(n):
            yield b, pos * chapters // n, pos


def write_synth_bundle(
    out: Path,
    *,
    entities: int,
    relations: int,
    chunks: int,
    seed: int = 0,
    zipf_s: float = 0.7,
    books: int | None = None,
) -> SynthSummary:
    """Write a power-law KG bundle (documents/chunks/entities/relations .jsonl) into `out`, streamed.

    Every entity is the source of at least one relation when relations >= entities; relation i lives in
    chunk i*chunks//relations, and that chunk's text is the descriptions of its relations.
    """
    if entities < 2 or relations < 1 or chunks < 1:
        raise ValidationError("synth needs entities >= 2, relations >= 1 and chunks >= 1")
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    n_books = books or max(3, min(200, chunks // 500))
    n_books = min(n_books, chunks)

    names = entity_names(entities, rng)
    etypes = _sample(_TYPE_WEIGHTS / _TYPE_WEIGHTS.sum(), entities, rng)
    weights = _zipf_weights(entities, zipf_s, rng)
    src = _sample(weights, relations, rng)
    head = min(entities, relations)
    src[:head] = rng.permutation(entities)[:head]
    dst = _sample(_zipf_weights(entities, zipf_s, rng), relations, rng)
    loops = src == dst
    dst[loops] = (dst[loops] + 1 + rng.integers(0, entities - 1, int(loops.sum()))) % entities
    rtypes = _sample(np.arange(1, 51, dtype=np.float64) ** -1.0, relations, rng)
    contexts = rng.integers(0, len(_CONTEXTS), relations)
    rweights = np.round(0.5 + 0.5 * rng.random(relations), 3)
    temporal = rng.random(relations) < 0.05
    years = rng.integers(1990, 2024, relations)
    alias_mask = rng.random(entities) < 0.1

    book_titles = [
        f"{_BOOK_WORDS[b % len(_BOOK_WORDS)]} of {_NOUNS[(b * 7) % len(_NOUNS)]}, Volume {b + 1}"
        for b in range(n_books)
    ]
    authors = [f"{_ADJECTIVES[(b * 3) % len(_ADJECTIVES)]} {_SUFFIXES[(b * 5) % len(_SUFFIXES)]}"
               for b in range(n_books)]
    with open(out / "documents.jsonl", "wb") as fh:
        for title, author in zip(book_titles, authors, strict=True):
            _jsonl(fh, {"title": title, "author": author, "description": f"A synthetic book: {title}."})

    with open(out / "entities.jsonl", "wb") as fh:
        for i, (name, t, alias) in enumerate(zip(names, etypes.tolist(), alias_mask.tolist(), strict=True)):
            etype = ENTITY_TYPES[t]
            row: dict[str, Any] = {
                "id": f"e{i}", "name": name, "type": etype,
                "description": f"{name} is {_TYPE_PHRASES[etype]}.",
            }
            if alias:
                row["aliases"] = ["".join(w[0] for w in name.split()) + f"-{i:x}"]
            _jsonl(fh, row)

    chapters_seen: set[tuple[int, int]] = set()
    layout = _chunk_layout(chunks, n_books)
    with open(out / "relations.jsonl", "wb") as rfh, open(out / "chunks.jsonl", "wb") as cfh:
        sentences: list[str] = []
        chunk = 0

        def flush_chunk(j: int) -> None:
            b, ch, pos = next(layout)
            chapters_seen.add((b, ch))
            text = " ".join(sentences) or f"A passage of {book_titles[b]}, chapter {ch + 1}."
            _jsonl(cfh, {
                "id": f"c{j}", "text": text, "original_document": book_titles[b],
                "chapter": f"Chapter {ch + 1}", "author": authors[b], "position": pos,
            })
            sentences.clear()

        verbs = [r.lower().replace("_", " ") for r in RELATION_TYPES]
        # Plain lists: indexing numpy scalars one at a time is the slow part of a 1M-row loop.
        rows = zip(src.tolist(), dst.tolist(), rtypes.tolist(), contexts.tolist(), rweights.tolist(),
                   temporal.tolist(), years.tolist(), strict=True)
        for i, (s, t, r, c, w, tmp, year) in enumerate(rows):
            j = i * chunks // relations
            while chunk < j:
                flush_chunk(chunk)
                chunk += 1
            desc = f"{names[s]} {verbs[r]} {names[t]} {_CONTEXTS[c]}."
            sentences.append(desc)
            rel: dict[str, Any] = {
                "id": f"r{i}", "source_id": f"e{s}", "target_id": f"e{t}", "relation_type": RELATION_TYPES[r],
                "description": desc, "weight": w, "source_chunks": [f"c{j}"],
            }
            if tmp:
                rel["valid_at"] = f"{year}-01-01"
            _jsonl(rfh, rel)
        while chunk < chunks:
            flush_chunk(chunk)
            chunk += 1

    return SynthSummary(
        out=out, entities=entities, relations=relations, chunks=chunks, books=n_books,
        chapters=len(chapters_seen), seed=seed, seconds=time.perf_counter() - t0,
    )
