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
    """A field as one terminal-safe line: control characters (newlines, tabs, ANSI escapes) shown as \\x.. escapes."""
    return "".join(f"\\x{ord(c):02x}" if unicodedata.category(c) == "Cc" else c for c in text)
