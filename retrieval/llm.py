"""Gemini through google-genai: structured JSON (decomposition, reranking, NL to Cypher) and streamed text (answers)."""

from __future__ import annotations

from collections.abc import Iterator
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


# Finish reasons that mean the model withheld (part of) its answer.
REFUSALS = frozenset({"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "LANGUAGE", "OTHER"})


def _reason(value: object) -> str:
    return str(getattr(value, "value", value) or "")


def gemini_stream(
    settings: Settings,
    prompt: str,
    *,
    system_instruction: str = "",
    timeout_ms: int = 30_000,
    temperature: float = 0.2,
) -> Iterator[str]:
    """Stream Gemini's text (generate_content_stream); LLMError when it refuses, breaks off or times out.

    A blocked prompt or a refusal finish reason raises even after text was streamed: the caller must not keep
    a partial answer. An answer with no text at all raises too.
    """
    if not settings.gemini_api_key:
        raise LLMError("Gemini not configured (GEMINI_API_KEY is empty)")
    from google.genai import types

    config = types.GenerateContentConfig(system_instruction=system_instruction or None, temperature=temperature)
    got_text = False
    try:
        client = gemini_client(settings, timeout_ms)
        for chunk in client.models.generate_content_stream(model=settings.gemini_model, contents=prompt,
                                                           config=config):
            feedback = chunk.prompt_feedback
            if feedback is not None and feedback.block_reason:
                raise LLMError(f"Gemini refused the prompt (blocked: {_reason(feedback.block_reason)})")
            candidate = chunk.candidates[0] if chunk.candidates else None
            parts = candidate.content.parts if candidate and candidate.content and candidate.content.parts else []
            text = "".join(p.text for p in parts if p.text and not p.thought)
            if text:
                got_text = True
                yield text
            finish = _reason(candidate.finish_reason) if candidate else ""
            if finish in REFUSALS:
                raise LLMError(f"Gemini stopped the answer (finish reason {finish})")
    except LLMError:
        raise
    except Exception as exc:  # APIError, transport errors, a body that is not JSON: all mean "no answer"
        status, retry = _retryable(exc)
        if retry and status is None and "Timeout" in type(exc).__name__:
            raise LLMError(f"Gemini did not answer within {timeout_ms / 1000:g} s", retryable=True) from exc
        raise LLMError(f"Gemini call failed: {type(exc).__name__}: {str(exc)[:200]}", status=status,
                       retryable=retry) from exc
    if not got_text:
        raise LLMError("Gemini returned an empty answer")
