"""Gemini through google-genai: one structured-JSON call used by decomposition and reranking."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

from retrieval.config import Settings
from retrieval.errors import RetrievalError

T = TypeVar("T", bound=BaseModel)


class LLMError(RetrievalError):
    """The LLM is not configured, unreachable, rate-limited or answered off-schema.

    `retryable`: a rate limit (429), a server error (5xx) or a timeout, which a later call may not meet.
    """

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False) -> None:
        super().__init__(message)
        self.status, self.retryable = status, retryable


class LLMAnswerError(LLMError):
    """The LLM answered, but not in the schema asked for (malformed JSON or a wrong shape)."""


def _retryable(exc: Exception) -> tuple[int | None, bool]:
    """(HTTP status, worth retrying) of an error raised by the google-genai client."""
    from google.genai import errors

    if isinstance(exc, errors.APIError):
        return exc.code, exc.code in (408, 429) or exc.code >= 500
    # google-genai 3 talks through httpx2 (older releases: httpx): match the transport errors by class name
    names = {cls.__name__ for cls in type(exc).__mro__}
    return None, bool(names & {"TimeoutException", "NetworkError", "TimeoutError", "ConnectionError"})


def gemini_client(settings: Settings, timeout_ms: int = 15_000) -> Any:
    """A google-genai client (no retries of its own; callers decide). Building one costs ~0.1 s: re-use it."""
    from google import genai
    from google.genai import types

    http = types.HttpOptions(
        timeout=timeout_ms,
        base_url=settings.gemini_base_url or None,
        retry_options=types.HttpRetryOptions(attempts=1),
    )
    return genai.Client(api_key=settings.gemini_api_key, http_options=http)


def gemini_json(
    settings: Settings,
    prompt: str,
    schema: type[T],
    *,
    system_instruction: str = "",
    timeout_ms: int = 15_000,
    client: Any = None,
) -> T:
    """Ask Gemini for JSON matching `schema` (response_mime_type + response_schema); parse strictly.

    `client` (from `gemini_client`) is re-used when given; otherwise one is built for this call.
    """
    if not settings.gemini_api_key:
        raise LLMError("Gemini not configured (GEMINI_API_KEY is empty)")
    from google.genai import types

    try:
        client = client or gemini_client(settings, timeout_ms)
        response = client.models.generate_content(
            model=settings.gemini_model,
            contents=prompt,
            config=types.GenerateContentConfig(
                system_instruction=system_instruction or None,
                response_mime_type="application/json",
                response_schema=schema,
                temperature=0.0,
            ),
        )
    except Exception as exc:  # google-genai raises APIError, httpx errors, ...: all mean "no answer"
        status, retry = _retryable(exc)
        raise LLMError(f"Gemini call failed: {type(exc).__name__}: {str(exc)[:200]}", status=status,
                       retryable=retry) from exc
    try:
        return schema.model_validate_json(response.text or "")
    except Exception as exc:  # malformed JSON or wrong shape
        raise LLMAnswerError(f"Gemini answered off-schema: {str(exc)[:200]}") from exc
