"""LLM extraction with Gemini: typed entities and relations per chunk through a JSON schema (ChunkGraph).

Answers are cached per (model, prompt version, prompt) hash in SQLite in the data directory, one committed row
per finished call, so re-ingest and a resumed (killed) ingest repeat no call. Calls run in a bounded thread
pool; rate limits (429), server errors (5xx) and timeouts are retried with exponential back-off and full
jitter (Brooker, "Exponential Backoff And Jitter", AWS Architecture Blog, 2015).
"""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from retrieval.config import Settings
from retrieval.errors import StoreError
from retrieval.ingest import ProgressFn
from retrieval.ingest.extract.base import ChunkGraph, ChunkInput, ExtractionRun
from retrieval.llm import LLMAnswerError, LLMError, gemini_client, gemini_json

PROMPT_VERSION = 1  # bump when SYSTEM or the prompt layout changes: cached answers of another version are not used
SYSTEM = (
    "You build a knowledge graph from one passage of a book. List the entities the passage names (people, "
    "organisations, places, events, works, products, concepts central to the passage) with a short upper-case "
    "type and one sentence on each from the passage. List the relations the passage states between two of "
    "those entities: source and target are entity names exactly as listed, the type is a short upper-case verb "
    "phrase (FOUNDED, BORN_IN, PART_OF), and the description is one sentence, faithful to the passage, that "
    "states the relation. Use only what the passage says."
)
CACHE_FILE = "extract-cache.sqlite"
DEFAULT_ATTEMPTS = 5
DEFAULT_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0
DEFAULT_TIMEOUT_MS = 60_000


def prompt_for(chunk: ChunkInput) -> str:
    head = "\n".join(f"{k}: {v}" for k, v in (("Book", chunk.book), ("Chapter", chunk.chapter)) if v)
    return f"{head}\n\nPassage:\n{chunk.text}" if head else f"Passage:\n{chunk.text}"


def cache_key(model: str, prompt: str) -> str:
    blob = json.dumps([model, PROMPT_VERSION, SYSTEM, prompt], ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


class AnswerCache:
    """Finished answers by cache key (SQLite, WAL; each answer committed as it arrives)."""

    def __init__(self, path: Path) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, timeout=30, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, model TEXT NOT NULL, "
                             "answer TEXT NOT NULL, created REAL NOT NULL)")
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the extraction cache {path}: {exc}") from exc

    def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), 500):
            part = unique[start : start + 500]
            marks = ",".join("?" * len(part))
            rows = self._db.execute(f"SELECT key, answer FROM answers WHERE key IN ({marks})", part)  # noqa: S608
            out.update(dict(rows.fetchall()))
        return out

    def put(self, key: str, model: str, answer: str) -> None:
        try:
            self._db.execute("INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?)", (key, model, answer, time.time()))
        except sqlite3.Error as exc:
            raise StoreError(f"cannot write the extraction cache: {exc}") from exc

    def close(self) -> None:
        self._db.close()


Call = Callable[[str], ChunkGraph]


class GeminiExtractor:
    """Gemini through `retrieval.llm.gemini_json`, cached, `workers` calls at a time, retried with back-off."""

    name = "gemini"

    @classmethod
    def build(cls, settings: Settings | None) -> GeminiExtractor | None:
        """With GEMINI_API_KEY only."""
        return cls(settings) if settings is not None and settings.gemini_api_key else None

    def __init__(self, settings: Settings, *, workers: int | None = None, attempts: int = DEFAULT_ATTEMPTS,
                 backoff_s: float = DEFAULT_BACKOFF_S, timeout_ms: int = DEFAULT_TIMEOUT_MS,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.settings = settings
        self.workers = max(1, workers or settings.extract_workers)
        self.attempts, self.backoff_s, self.timeout_ms, self._sleep = attempts, backoff_s, timeout_ms, sleep
        self._rng = random.Random()

    def describe(self) -> str:
        return f"Gemini extractor ({self.settings.gemini_model}, prompt v{PROMPT_VERSION}, {self.workers} at a time)"

    def _call(self, client: Any, prompt: str) -> ChunkGraph:
        for attempt in range(self.attempts):
            try:
                return gemini_json(self.settings, prompt, ChunkGraph, system_instruction=SYSTEM,
                                   timeout_ms=self.timeout_ms, client=client)
            except LLMError as exc:
                if not exc.retryable or attempt + 1 == self.attempts:
                    raise
                self._sleep(self._rng.uniform(0, min(MAX_BACKOFF_S, self.backoff_s * 2**attempt)))
        raise AssertionError("unreachable")  # the loop returns or raises

    def extract(self, chunks: Sequence[ChunkInput], progress: ProgressFn | None = None) -> ExtractionRun:
        model = self.settings.gemini_model
        prompts = [prompt_for(c) for c in chunks]
        keys = [cache_key(model, p) for p in prompts]
        cache = AnswerCache(Path(self.settings.data_dir) / CACHE_FILE)
        start = time.perf_counter()
        try:
            cached = cache.get_many(keys)
            answers: dict[str, ChunkGraph] = {}
            stale = 0
            for key, text in cached.items():
                try:
                    answers[key] = ChunkGraph.model_validate_json(text)
                except ValueError:
                    stale += 1  # written by an older schema: asked again
            todo = list(dict.fromkeys(k for k in keys if k not in answers))
            prompt_of = dict(zip(keys, prompts, strict=True))
            hits = len(chunks) - sum(1 for k in keys if k not in answers)
            failed, malformed = self._run(todo, prompt_of, answers, cache, hits, hits + len(todo), progress)
        finally:
            cache.close()
        graphs = [answers.get(k) for k in keys]
        stats = {"chunks": len(chunks), "cached": hits, "calls": len(todo), "failed": len(failed),
                 "malformed": len(malformed), "seconds": time.perf_counter() - start}
        warnings = []
        if malformed:
            warnings.append(f"extraction: {len(malformed)} chunks got an answer off the schema and add nothing "
                            f"({malformed[0]}); re-run the ingest to ask again")
        if failed:
            warnings.append(f"extraction: {len(failed)} chunks failed after {self.attempts} attempts and add "
                            f"nothing ({failed[0]}); re-run the ingest to retry them (finished chunks are cached)")
        if stale:
            warnings.append(f"extraction: {stale} cached answers no longer matched the schema and were asked again")
        if todo and len(failed) + len(malformed) == len(todo) and not hits:
            raise LLMError(f"Gemini extraction failed for every chunk: {(failed or malformed)[0]}")
        return ExtractionRun(graphs, stats, warnings)

    def _run(self, todo: list[str], prompt_of: dict[str, str], answers: dict[str, ChunkGraph], cache: AnswerCache,
             done: int, total: int, progress: ProgressFn | None) -> tuple[list[str], list[str]]:
        """Ask for every key in `todo`; answers are cached from this (the calling) thread as they arrive."""
        failed: list[str] = []
        malformed: list[str] = []
        model = self.settings.gemini_model
        if progress is not None:
            progress("extracting", done, total)
        client = gemini_client(self.settings, self.timeout_ms) if todo else None  # one, shared by the workers
        pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="extract")
        pending: dict[Future[ChunkGraph], str] = {}
        queue = iter(todo)
        try:
            for key in queue:
                pending[pool.submit(self._call, client, prompt_of[key])] = key
                if len(pending) >= 2 * self.workers:
                    break  # keep the queue short, so a fatal error cancels little
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    key = pending.pop(fut)
                    try:
                        graph = fut.result()
                    except LLMAnswerError as exc:
                        malformed.append(str(exc)[:160])
                    except LLMError as exc:
                        if not exc.retryable:  # a bad key or model: every other call would fail the same way
                            raise
                        failed.append(str(exc)[:160])
                    else:
                        answers[key] = graph
                        cache.put(key, model, graph.model_dump_json())
                    done += 1
                    if progress is not None:
                        progress("extracting", done, total)
                    nxt = next(queue, None)
                    if nxt is not None:
                        pending[pool.submit(self._call, client, prompt_of[nxt])] = nxt
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return failed, malformed
