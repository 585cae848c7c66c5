"""Gemini through google-genai: one structured-JSON call used by decomposition and reranking."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel

from retrieval.config import Settings
from retrieval.errors import RetrievalError

T = TypeVar("T", bound=BaseModel)


class LLMError(RetrievalError):
    """The LLM is not configured, unreachable, rate-limited or answered off-schema."""


def gemini_json(
    settings: Settings,
    prompt: str,
    schema: type[T],
    *,
    system_instruction: str = "",
    timeout_ms: int = 15_000,
) -> T:
    """Ask Gemini for JSON matching `schema` (response_mime_type + response_schema); parse strictly."""
    if not settings.gemini_api_key:
        raise LLMError("Gemini not configured (GEMINI_API_KEY is empty)")
    from google import genai
    from google.genai import types

    http = types.HttpOptions(
        timeout=timeout_ms,
        base_url=settings.gemini_base_url or None,
        retry_options=types.HttpRetryOptions(attempts=1),
    )
    try:
        client = genai.Client(api_key=settings.gemini_api_key, http_options=http)
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
        raise LLMError(f"Gemini call failed: {type(exc).__name__}: {str(exc)[:200]}") from exc
    try:
        return schema.model_validate_json(response.text or "")
    except Exception as exc:  # malformed JSON or wrong shape
        raise LLMError(f"Gemini answered off-schema: {str(exc)[:200]}") from exc
