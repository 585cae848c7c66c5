"""Gemini through google-genai: structured JSON (decomposition, reranking, NL to Cypher) and streamed text (answers)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

from pydantic import BaseModel

from retrieval.config import Settings
from retrieval.errors import RetrievalError

T = TypeVar("T", bound=BaseModel)


class LLMError(RetrievalError):
    """The LLM is not configured, unreachable, rate-limited or answered off-schema."""


def _client(settings: Settings, timeout_ms: int) -> Any:
    if not settings.gemini_api_key:
        raise LLMError("Gemini not configured (GEMINI_API_KEY is empty)")
    from google import genai
    from google.genai import types

    http = types.HttpOptions(
        timeout=timeout_ms,
        base_url=settings.gemini_base_url or None,
        retry_options=types.HttpRetryOptions(attempts=1),
    )
    return genai.Client(api_key=settings.gemini_api_key, http_options=http)


def _failed(exc: Exception, timeout_ms: int) -> LLMError:
    # google-genai raises httpx's or httpx2's TimeoutException, whichever transport it picked
    if any(k.__name__ == "TimeoutException" for k in type(exc).__mro__):
        return LLMError(f"Gemini did not answer within {timeout_ms / 1000:g} s")
    return LLMError(f"Gemini call failed: {type(exc).__name__}: {str(exc)[:200]}")


def gemini_json(
    settings: Settings,
    prompt: str,
    schema: type[T],
    *,
    system_instruction: str = "",
    timeout_ms: int = 15_000,
) -> T:
    """Ask Gemini for JSON matching `schema` (response_mime_type + response_schema); parse strictly."""
    from google.genai import types

    client = _client(settings, timeout_ms)
    try:
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
        raise _failed(exc, timeout_ms) from exc
    try:
        return schema.model_validate_json(response.text or "")
    except Exception as exc:  # malformed JSON or wrong shape
        raise LLMError(f"Gemini answered off-schema: {str(exc)[:200]}") from exc


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
    from google.genai import types

    client = _client(settings, timeout_ms)
    config = types.GenerateContentConfig(system_instruction=system_instruction or None, temperature=temperature)
    got_text = False
    try:
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
    except Exception as exc:  # APIError, httpx errors, a body that is not JSON: all mean "no answer"
        raise _failed(exc, timeout_ms) from exc
    if not got_text:
        raise LLMError("Gemini returned an empty answer")
