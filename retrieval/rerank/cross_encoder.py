"""Cross-encoder reranker (seed 004): sentence-transformers CrossEncoder, visible passthrough if absent."""

from __future__ import annotations

import os
import re
import socket
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from retrieval.config import DEFAULT_CROSS_ENCODER, Settings
from retrieval.models import VerbalizedFact
from retrieval.rerank.base import RerankContext, RerankOutput, check_top_k, with_scores

_TRUE = {"1", "true", "yes", "on"}
_URL = re.compile(r"\S*https?://\S+")
HUB_PROBE_TIMEOUT_S = 3.0
KEEP_ORDER = "results keep their order."


def hub_offline() -> bool:
    """True when HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE ask for no network (read at load time)."""
    return any(os.environ.get(v, "").strip().lower() in _TRUE for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def hub_reachable(timeout: float = HUB_PROBE_TIMEOUT_S) -> bool:
    """Whether a TCP connection to the hub (HF_ENDPOINT, default huggingface.co:443) opens within `timeout`.

    Without this, an offline machine that did not set HF_HUB_OFFLINE waits about a minute while the hub client
    retries each file five times. Behind a proxy the direct connection says nothing, so True is assumed.
    """
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True
    url = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "", port), timeout=timeout):
            return True
    except OSError:
        return False


def is_path(model: str) -> bool:
    """A local path (existing, or written as one); else a hub id (org/name or a bare name)."""
    return Path(model).expanduser().exists() or model.startswith(("/", ".", "~")) or model.count("/") > 1


def offline_miss(model: str) -> str:
    """Why an offline load of `model` must fail, found without importing torch ('' when it may load):
    a path that does not exist, or a hub id with nothing in the local Hugging Face cache."""
    if Path(model).expanduser().exists():
        return ""
    if is_path(model):
        return "there is no such file or directory"
    from huggingface_hub import try_to_load_from_cache

    if isinstance(try_to_load_from_cache(model, "config.json"), str):
        return ""
    return "it is not in the local Hugging Face cache"


def unavailable(model: str, why: str, *, offline: bool) -> str:
    """The one plain sentence every surface shows for a cross-encoder that cannot load."""
    state = "is not available offline" if offline else "could not be loaded"
    return f"Cross-encoder {model} {state}: {why}; {KEEP_ORDER}"


def load_failure(exc: BaseException) -> str:
    """A load error as a short clause: the known causes in words, else the error's first line without URLs."""
    text = " ".join(str(exc).split())
    low = text.lower()
    if "couldn't connect" in low or "connection" in low or "max retries" in low or "name resolution" in low:
        return "the Hugging Face hub could not be reached and the model is not in the local cache"
    if "is not a valid model identifier" in low or "repository not found" in low or "404" in low:
        return "the Hugging Face hub has no model by that name"
    first = _URL.sub("", str(exc).splitlines()[0] if str(exc) else "").strip(" .:;") or "no detail"
    return f"{first[:160]} ({type(exc).__name__})"


class CrossEncoderReranker:
    """Scores (query, fact) pairs with a CrossEncoder and adds `ce_score`.

    The model (a hub name or a local path) loads lazily on first use. If it cannot load, the
    reranker is a passthrough: input order, no `ce_score`, no truncation, and one plain sentence as the warning
    (`unavailable`: "Cross-encoder M is not available offline: ...; results keep their order."); `.available`
    and `.reason` tell the UI.
    """

    name = "cross_encoder"

    @classmethod
    def build(cls, ctx: RerankContext) -> CrossEncoderReranker:
        """Lazy: the model loads on first use and may turn out a passthrough."""
        return cls.from_settings(ctx.settings)

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
                local = is_path(self.model_name)
                if not offline and self.local_files_only is None and not local and not hub_reachable():
                    offline = True  # no hub: the cache or nothing, said now rather than after a minute of retries
                miss = offline_miss(self.model_name) if offline or local else ""
                if miss:  # say so at once: importing sentence-transformers (torch) alone takes seconds
                    self._reason = unavailable(self.model_name, miss, offline=offline and not local)
                else:
                    try:
                        from sentence_transformers import CrossEncoder

                        self._model = CrossEncoder(
                            self.model_name, device="cpu", local_files_only=offline, max_length=self.max_length
                        )
                    except Exception as exc:  # no hub access, bad weights: all mean "unavailable", said plainly
                        self._reason = unavailable(self.model_name, load_failure(exc), offline=offline and not local)
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
            return RerankOutput(list(candidates), [self._reason])
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
