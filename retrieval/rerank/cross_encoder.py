"""Cross-encoder reranker (seed 004): sentence-transformers CrossEncoder, visible passthrough if absent."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.config import DEFAULT_CROSS_ENCODER, Settings
from retrieval.models import VerbalizedFact
from retrieval.rerank.base import RerankOutput, check_top_k, with_scores

_TRUE = {"1", "true", "yes", "on"}


def hub_offline() -> bool:
    """True when HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE ask for no network (read at load time)."""
    return any(os.environ.get(v, "").strip().lower() in _TRUE for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def offline_miss(model: str) -> str:
    """Why an offline load of `model` must fail, found without importing torch ('' when it may load):
    a path that does not exist, or a hub id with nothing in the local Hugging Face cache."""
    if Path(model).expanduser().exists():
        return ""
    if model.startswith(("/", ".", "~")) or model.count("/") > 1:  # a path; else a hub id (org/name or name)
        return f"no such file or directory: {model}"
    from huggingface_hub import try_to_load_from_cache

    if isinstance(try_to_load_from_cache(model, "config.json"), str):
        return ""
    return "not in the local Hugging Face cache, and the hub is offline (HF_HUB_OFFLINE)"


class CrossEncoderReranker:
    """Scores (query, fact) pairs with a CrossEncoder and adds `ce_score`.

    The model (a hub name or a local path) loads lazily on first use. If it cannot load, the
    reranker is a passthrough: input order, no `ce_score`, no truncation, and a warning
    `cross-encoder unavailable: <reason>`; `.available` and `.reason` tell the UI.
    """

    name = "cross_encoder"

    def __init__(
        self,
        model: str = DEFAULT_CROSS_ENCODER,
        *,
        local_files_only: bool | None = None,
        batch_size: int = 32,
        max_length: int = 512,
    ) -> None:
        self.model_name = model
        self.local_files_only = local_files_only
        self.batch_size = batch_size
        self.max_length = max_length
        self._model: Any = None
        self._reason = ""
        self._loaded = False
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> CrossEncoderReranker:
        return cls(settings.cross_encoder_model)

    def _load(self) -> Any:
        with self._lock:
            if not self._loaded:
                offline = hub_offline() if self.local_files_only is None else self.local_files_only
                miss = offline_miss(self.model_name) if offline else ""
                try:
                    if miss:  # say so at once: importing sentence-transformers (torch) alone takes seconds
                        raise OSError(miss)
                    from sentence_transformers import CrossEncoder

                    self._model = CrossEncoder(
                        self.model_name, device="cpu", local_files_only=offline, max_length=self.max_length
                    )
                except Exception as exc:  # missing path, no hub access, bad weights: all mean "unavailable"
                    self._reason = f"{self.model_name!r}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                self._loaded = True
            return self._model

    @property
    def available(self) -> bool:
        """Loads the model if needed; False means rerank() is a passthrough (see `.reason`)."""
        return self._load() is not None

    @property
    def reason(self) -> str:
        """Why the model is unavailable ('' when it loaded or was not tried yet)."""
        return self._reason

    def rerank(self, query: str, candidates: Sequence[VerbalizedFact], top_k: int) -> RerankOutput:
        check_top_k(top_k)
        model = self._load()
        if model is None:
            return RerankOutput(list(candidates), [f"cross-encoder unavailable: {self._reason}"])
        if not candidates:
            return RerankOutput([], [])
        scores = np.asarray(
            model.predict(
                [(query, c.text) for c in candidates],
                batch_size=self.batch_size,
                show_progress_bar=False,
                convert_to_numpy=True,
            ),
            dtype=np.float64,
        ).reshape(len(candidates), -1)[:, 0]
        order = [int(i) for i in np.argsort(-scores, kind="stable")[:top_k]]
        return RerankOutput([with_scores(candidates[i], {"ce_score": scores[i]}) for i in order], [])
