"""Scale commands: `synth` writes a synthetic power-law KG bundle."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from retrieval.cli.common import cli_errors, echo_json


def synth(
    out: Annotated[Path, typer.Option("--out", help="Directory to write the bundle into")],
    entities: Annotated[int, typer.Option("--entities", min=2, help="Number of entities")] = 10_000,
    relations: Annotated[int, typer.Option("--relations", min=1, help="Number of relations")] = 100_000,
    chunks: Annotated[int, typer.Option("--chunks", min=1, help="Number of chunks")] = 10_000,
    seed: Annotated[int, typer.Option("--seed", help="Random seed (same seed, same files)")] = 0,
    books: Annotated[int | None, typer.Option("--books", min=1, help="Books (default chunks/500, 3..200)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON")] = False,
) -> None:
    """Write a power-law knowledge graph (typed entities, 50 relation types, books/chapters) as a native bundle."""
    from bench.synth import write_synth_bundle

    with cli_errors():
        summary = write_synth_bundle(
            out, entities=entities, relations=relations, chunks=chunks, seed=seed, books=books
        )
    if as_json:
        echo_json({**summary.__dict__, "out": str(summary.out)})
        return
    typer.echo(
        f"wrote {summary.out}: {summary.entities} entities, {summary.relations} relations, "
        f"{summary.chunks} chunks, {summary.books} books, {summary.chapters} chapters "
        f"(seed {summary.seed}) in {summary.seconds:.1f} s"
    )


def register(app: typer.Typer) -> None:
    app.command("synth")(synth)
