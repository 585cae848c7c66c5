"""Errors raised by the retrieval package; drivers' errors are wrapped `from exc`."""

from __future__ import annotations


class RetrievalError(Exception):
    """Base class: every error the package raises on purpose."""


class ConfigError(RetrievalError):
    """A setting or a back-end name is invalid."""


class ValidationError(RetrievalError, ValueError):
    """A user-supplied value is out of bounds or malformed."""


class IngestError(RetrievalError):
    """An input file is malformed; the message reads `file:line: field: reason`."""

    def __init__(self, file: str, line: int, field: str, reason: str) -> None:
        self.file, self.line, self.field, self.reason = file, line, field, reason
        super().__init__(f"{file}:{line}: {field}: {reason}")


class StoreError(RetrievalError):
    """A back end failed (connection lost, file missing, disk full)."""


class NotFoundError(RetrievalError, LookupError):
    """A graph, entity or stored item does not exist."""


class AccessDenied(RetrievalError, PermissionError):
    """The signed-in user's roles do not allow an action; the message names the role it needs."""
