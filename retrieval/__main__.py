"""CLI: `python -m retrieval COMMAND`. Each area registers its commands from its own module."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False)

# Modules exposing `register(app)`; each adds its commands.
COMMAND_MODULES = (
    "retrieval.cli.data",  # ingest, demo, stats, graphs, use, delete
    "retrieval.cli.scale",  # synth (bench --scale later)
    "retrieval.cli.labels",  # labels queries/pool/progress/import/agreement/adjudicate/export, eval-labels
    "retrieval.cli.paths",  # paths A B
    "retrieval.cli.memory",  # memory list|search|get|traverse|store|delete
    "retrieval.cli.search",  # search, eval, bench
    "retrieval.cli.answer",  # answer, cypher, calibrate-nomatch
    "retrieval.cli.communities",  # communities [--level N] [--entity ID]
    "retrieval.cli.curation",  # edit ..., duplicates, not-duplicates, history, changes ..., add/remove documents
    "retrieval.cli.audit",  # audit [--since] [--json]
)


def main() -> None:
    from retrieval.cli.common import one_line_logs

    one_line_logs()
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(app)
    app()


if __name__ == "__main__":
    main()
