"""`audit [--since] [--json]`: the audit log of a team deployment (who did what, when, allowed or refused)."""

from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Annotated

import typer

from retrieval.access.audit import AUDIT_FILE, AuditLog, parse_since
from retrieval.cli.common import DataDirOpt, cli_errors, echo_json, settings_from


def register(app: typer.Typer) -> None:
    @app.command("audit")
    def audit_cmd(
        since: Annotated[str | None, typer.Option("--since", help="From this ISO date/time (UTC) or age: 15m, 24h, "
                                                  "7d")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="A JSON list of entries")] = False,
        data_dir: Path = DataDirOpt,
    ) -> None:
        """Print the audit log, oldest first: time, who, action, outcome, graph, tenant, detail."""
        settings = settings_from(data_dir)
        path = settings.data_dir / AUDIT_FILE
        with cli_errors():
            start = parse_since(since) if since else None
            entries = AuditLog(path).entries(start) if path.is_file() else []
        if as_json:
            echo_json([e.model_dump() for e in entries])
            return
        if not entries:
            typer.echo(f"no audit entries in {path}" + (f" since {start}" if start else ""))
        for e in entries:
            where = " ".join(x for x in (f"graph={e.graph}" if e.graph else "", f"tenant={e.tenant}" if e.tenant
                                         else "") if x)
            typer.echo("\t".join(printable(x) for x in (e.at, e.actor, e.action, e.outcome, where, e.detail)))


def printable(text: str) -> str:
    """A field as one terminal-safe line whose text reads as stored: control characters (newlines, tabs, ANSI
    escapes), format characters (bidi overrides and isolates such as U+202E, zero-width characters), line and
    paragraph separators and unassigned or private code points shown as `\\x..` / `\\u....` escapes, and a backslash
    doubled, so that no entry can drive the terminal, reorder what is shown, or pass for an escape."""
    return "".join(_escape(c) for c in text)


_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def _escape(c: str) -> str:
    if c == "\\":
        return "\\\\"
    if unicodedata.category(c) not in _HIDDEN:
        return c
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"
