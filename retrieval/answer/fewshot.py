"""Seed 004's FewShotManager: worked examples (question, answer, optional Cypher) stored per graph name.

They live in `DATA_DIR/fewshot/NAME.json`, beside the versions rather than inside one, so a re-ingest of the
same graph name keeps them; each change is a locked read-modify-write and an atomic rename. Examples are chosen
for a question by embedding similarity.
"""

from __future__ import annotations

import fcntl
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from pydantic import ValidationError as PydanticValidationError

from retrieval.embedding import EmbeddingCache
from retrieval.errors import NotFoundError, StoreError, ValidationError
from retrieval.graph.catalog import check_name, write_json_atomic
from retrieval.models import FewShotExample

MAX_EXAMPLES = 100
LIMITS = {"question": 500, "answer": 4000, "cypher": 4000}
MIN_SIMILARITY = 0.3  # an example less similar than this to the question teaches nothing about it


def check_example(question: str, answer: str, cypher: str = "") -> tuple[str, str, str]:
    """Trimmed fields, or ValidationError: a question and an answer are required, each within its limit."""
    fields = {"question": question, "answer": answer, "cypher": cypher}
    out = {}
    for name, value in fields.items():
        if not isinstance(value, str):
            raise ValidationError(f"few-shot {name} must be text")
        text = value.strip()
        if "\x00" in text:
            raise ValidationError(f"few-shot {name} contains a NUL character")
        if name != "cypher" and not text:
            raise ValidationError(f"few-shot {name} must not be empty")
        if len(text) > LIMITS[name]:
            raise ValidationError(f"few-shot {name} is {len(text)} characters; the limit is {LIMITS[name]}")
        out[name] = text
    return out["question"], out["answer"], out["cypher"]


class FewShotManager:
    """The examples of one graph name. State is a file, hence a class (as the seed names it)."""

    def __init__(self, data_dir: Path, graph: str) -> None:
        self.graph = check_name(graph)
        self.path = Path(data_dir) / "fewshot" / f"{graph}.json"

    def examples(self) -> list[FewShotExample]:
        """The stored examples, oldest first (none yet: an empty list)."""
        if not self.path.is_file():
            return []
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
            return [FewShotExample.model_validate(row) for row in raw["examples"]]
        except (OSError, ValueError, KeyError, TypeError, PydanticValidationError) as exc:
            raise StoreError(f"few-shot examples in {self.path} cannot be read: {str(exc)[:200]}") from exc

    @contextmanager
    def _editing(self) -> Iterator[list[FewShotExample]]:
        """The examples under an exclusive lock; what the block leaves in the list is written atomically."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock = (self.path.parent / ".lock").open("a")
        except OSError as exc:
            raise StoreError(f"cannot write few-shot examples to {self.path.parent}: {exc.strerror or exc}") from exc
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            examples = self.examples()
            yield examples
            try:
                write_json_atomic(self.path, {"graph": self.graph,
                                              "examples": [e.model_dump() for e in examples]})
            except OSError as exc:
                raise StoreError(f"cannot write few-shot examples to {self.path}: {exc.strerror or exc}") from exc

    def add(self, question: str, answer: str, cypher: str = "") -> FewShotExample:
        q, a, c = check_example(question, answer, cypher)
        with self._editing() as examples:
            if len(examples) >= MAX_EXAMPLES:
                raise ValidationError(f"graph {self.graph!r} already has {MAX_EXAMPLES} few-shot examples")
            example = FewShotExample(id=uuid.uuid4().hex[:12], question=q, answer=a, cypher=c)
            examples.append(example)
        return example

    def update(self, example_id: str, question: str, answer: str, cypher: str = "") -> FewShotExample:
        q, a, c = check_example(question, answer, cypher)
        with self._editing() as examples:
            at = self._index(examples, example_id)
            examples[at] = FewShotExample(id=example_id, question=q, answer=a, cypher=c)
        return examples[at]

    def delete(self, example_id: str) -> None:
        with self._editing() as examples:
            del examples[self._index(examples, example_id)]

    def _index(self, examples: list[FewShotExample], example_id: str) -> int:
        for i, e in enumerate(examples):
            if e.id == example_id:
                return i
        raise NotFoundError(f"no few-shot example {example_id!r} for graph {self.graph!r}")

    def select(self, question: str, vectors: EmbeddingCache, k: int = 2, *, with_cypher: bool = False,
               min_similarity: float = MIN_SIMILARITY) -> list[tuple[FewShotExample, float]]:
        """The `k` examples whose questions are closest to `question` (cosine), best first, above the floor."""
        pool = [e for e in self.examples() if e.cypher or not with_cypher]
        if not pool:
            return []
        sims = vectors.embed([e.question for e in pool]) @ vectors.embed([question])[0]
        order = np.argsort(-sims, kind="stable")[:k]
        return [(pool[int(i)], float(sims[i])) for i in order if sims[i] >= min_similarity]
