"""Errors raised by the retrieval package; drivers' errors are wrapped `from exc`."""

from __future__ import annotations

QUOTE_CHARS = 200  # at most this much of a bad value is quoted in a message
MAX_MESSAGE_CHARS = 2_000  # no message is longer (a value quoted whole by mistake cannot flood a log or a page)
MAX_FIELD_CHARS = 200  # the field part of `file:line: field: reason` (it may hold a name taken from the input)


def excerpt(value: object, limit: int = QUOTE_CHARS) -> str:
    """`value` quoted for a message (repr), cut to its first `limit` characters with the full length noted."""
    if not isinstance(value, str):
        return _cut(repr(value), limit)
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}… ({len(value):,} characters)"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


class RetrievalError(Exception):
    """Base class: every error the package raises on purpose. A message past MAX_MESSAGE_CHARS is cut."""

    def __init__(self, *args: object) -> None:
        if args and isinstance(args[0], str):
            args = (_cut(args[0], MAX_MESSAGE_CHARS), *args[1:])
        super().__init__(*args)


class ConfigError(RetrievalError):
    """A setting or a back-end name is invalid."""


class ValidationError(RetrievalError, ValueError):
    """A user-supplied value is out of bounds or malformed."""


class IngestError(RetrievalError):
    """An input file is malformed; the message reads `file:line: field: reason`."""

    def __init__(self, file: str, line: int, field: str, reason: str) -> None:
        field, reason = _cut(field, MAX_FIELD_CHARS), _cut(reason, MAX_MESSAGE_CHARS // 2)
        self.file, self.line, self.field, self.reason = file, line, field, reason
        super().__init__(f"{file}:{line}: {field}: {reason}")


class StoreError(RetrievalError):
    """A back end failed (connection lost, file missing, disk full)."""


class NotFoundError(RetrievalError, LookupError):
    """A graph, entity or stored item does not exist."""


class ConflictError(RetrievalError):
    """A change was made against a state that has changed since (another analyst's edit, a draft in use)."""


class AccessDenied(RetrievalError, PermissionError):
    """The signed-in user's roles do not allow an action (the message names the role it needs), or a curation
    author who may not make a change."""
