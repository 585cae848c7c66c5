"""Shared CLI helpers: settings from env + flags, one-line errors with a non-zero exit."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError as PydanticValidationError

from retrieval.config import Settings
from retrieval.errors import RetrievalError

DataDirOpt = typer.Option(None, "--data-dir", help="Data directory (default $KG_DATA_DIR or ./data/kg)")


def settings_from(data_dir: Path | None = None, **overrides: Any) -> Settings:
    """Settings from the environment, with CLI flags (non-None) overriding."""
    return Settings.from_env(data_dir=data_dir, **overrides)


class _OneLineFormatter(logging.Formatter):
    """`level: logger: message: exception` on one line, without the traceback."""

    def format(self, record: logging.LogRecord) -> str:
        text = f"{record.levelname.lower()}: {record.name}: {record.getMessage()}"
        if record.exc_info and record.exc_info[1] is not None:
            text += f": {record.exc_info[1]}"
        return " ".join(text.split())


def one_line_logs() -> None:
    """Library log records as single lines on stderr: Milvus Lite logs a full traceback for a database it cannot
    open (locked, read-only) just before the store raises its own clear error, and a CLI prints no tracebacks."""
    handler = logging.StreamHandler()
    handler.setLevel(logging.WARNING)  # as Python's last-resort handler: libraries that set DEBUG stay quiet
    handler.setFormatter(_OneLineFormatter())
    logging.basicConfig(level=logging.WARNING, handlers=[handler])


@contextmanager
def cli_errors() -> Iterator[None]:
    """Turn expected errors into `error: message` on stderr and exit code 2."""
    try:
        yield
    except RetrievalError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "value"
        typer.echo(f"error: {loc}: {first['msg']}", err=True)
        raise typer.Exit(2) from exc


def echo_json(obj: Any) -> None:
    """Print JSON (pydantic models and dataclasses via their dict form)."""
    def default(o: Any) -> Any:
        if hasattr(o, "model_dump"):
            return o.model_dump(mode="json")
        if isinstance(o, Path):
            return str(o)
        raise TypeError(f"not JSON serialisable: {type(o).__name__}")
    sys.stdout.write(json.dumps(obj, default=default, ensure_ascii=False, indent=1) + "\n")


Command = Callable[..., Any]
