"""Curation commands: `edit ...` (one per operation), `duplicates`, `not-duplicates`, `history`, `changes ...`
(list, show, undo, redo, export, import), `add-documents`, `remove-document`. Each prints what it changed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from retrieval.cli.common import DataDirOpt, cli_errors, echo_json, settings_from
from retrieval.config import Settings
from retrieval.curation.apply import Curator
from retrieval.curation.ops import (
    AddAlias,
    AddRelation,
    Changeset,
    DeleteEntity,
    DeleteRelation,
    MergeEntities,
    Op,
    RemoveAlias,
    RenameEntity,
    ReverseRelation,
    SetEntityDescription,
    SetEntityType,
    SetRelationDescription,
    SetRelationType,
    SetRelationWeight,
    change_lines,
)
from retrieval.errors import NotFoundError, ValidationError

GraphOpt = typer.Option(None, "--graph", help="Graph name (default: the active graph)")
AuthorOpt = typer.Option(None, "--author", help="Who makes the change (default: the local user)")
ReasonOpt = typer.Option("", "--reason", help="Why (kept in the log)")
JsonOpt = typer.Option(False, "--json", help="Print JSON")


@contextmanager
def curator_for(data_dir: Path | None, graph: str | None, settings: Settings | None = None) -> Iterator[Curator]:
    """The curator of the graph, its stores closed afterwards; a crash it recovered from is said on stderr.

    The whole command is this process's turn on the graph (its write lock, held before any store is opened):
    curators in other processes wait for it, at most KG_LOCK_WAIT_S, instead of failing on Kuzu's file lock."""
    from retrieval.graph.runtime import open_kg

    settings = settings or settings_from(data_dir, graph_name=graph)
    kg = open_kg(settings, settings.graph_name or None)
    with kg.rw.writing():
        try:
            curator = Curator(kg)
            for line in curator.recovered:
                typer.echo(f"recovered: {line}", err=True)
            yield curator
            curator.close()
        finally:
            kg.close()


def entity_id(curator: Curator, ref: str) -> str:
    """An entity given by id or by exact name (case-insensitive); ambiguous names list the ids to pick from."""
    kg = curator.kg
    if ref in kg.index.id_to_idx:
        return ref
    found = kg.graph.find_entities(ref, limit=20)
    exact = [e for e in found if e.name.strip().casefold() == ref.strip().casefold()] or found
    if not exact:
        raise NotFoundError(f"no entity with id or name {ref!r}")
    if len(exact) > 1:
        ids = ", ".join(f"{e.id!r} ({e.name})" for e in exact[:10])
        raise ValidationError(f"{len(exact)} entities are called {ref!r}: give one id: {ids}")
    return exact[0].id


def _print(cs: Changeset, as_json: bool, curator: Curator | None = None) -> None:
    if as_json:
        echo_json(cs)
        return
    typer.echo(cs.summary())
    names: dict[str, str] = {}
    if curator is not None:
        a = curator.kg.index.arrays
        ends = {i for c in cs.changes if c.kind == "relation" for rec in (c.before, c.after) if rec
                for i in (rec["source_id"], rec["target_id"])}
        names = {i: a.node_names[curator.kg.index.id_to_idx[i]] for i in ends if i in curator.kg.index.id_to_idx}
    for line in change_lines(cs.changes, names=names):
        typer.echo(f"  {line}")


def _apply(data_dir: Path | None, graph: str | None, author: str | None, reason: str, as_json: bool,
           build: Callable[[Curator], list[Op]]) -> None:
    with cli_errors(), curator_for(data_dir, graph) as curator:
        cs = curator.apply(build(curator), author=author, reason=reason)
        _print(cs, as_json, curator)


EntityArg = Annotated[str, typer.Argument(help="Entity id or exact name")]
RelationArg = Annotated[str, typer.Argument(help="Relation id")]
ValueArg = Annotated[str, typer.Argument(help="The new value")]


def _edit_commands(edit: typer.Typer) -> None:
    @edit.command("rename")
    def rename_cmd(entity: EntityArg, name: ValueArg, graph: str = GraphOpt, author: str = AuthorOpt,
                   reason: str = ReasonOpt, as_json: bool = JsonOpt, data_dir: Path = DataDirOpt) -> None:
        """Rename an entity (a name another entity has is refused: merge them instead)."""
        _apply(data_dir, graph, author, reason, as_json, lambda c: [RenameEntity(entity_id=entity_id(c, entity),
                                                                                 name=name)])

    @edit.command("type")
    def type_cmd(entity: EntityArg, etype: ValueArg, graph: str = GraphOpt, author: str = AuthorOpt,
                 reason: str = ReasonOpt, as_json: bool = JsonOpt, data_dir: Path = DataDirOpt) -> None:
        """Change an entity's type."""
        _apply(data_dir, graph, author, reason, as_json, lambda c: [SetEntityType(entity_id=entity_id(c, entity),
                                                                                  type=etype)])

    @edit.command("describe")
    def describe_cmd(entity: EntityArg, description: ValueArg, graph: str = GraphOpt, author: str = AuthorOpt,
                     reason: str = ReasonOpt, as_json: bool = JsonOpt, data_dir: Path = DataDirOpt) -> None:
        """Replace an entity's description."""
        _apply(data_dir, graph, author, reason, as_json, lambda c: [SetEntityDescription(
            entity_id=entity_id(c, entity), description=description)])

    @edit.command("alias-add")
    def alias_add_cmd(entity: EntityArg, alias: ValueArg, graph: str = GraphOpt, author: str = AuthorOpt,
                      reason: str = ReasonOpt, as_json: bool = JsonOpt, data_dir: Path = DataDirOpt) -> None:
        """Add an alias to an entity."""
        _apply(data_dir, graph, author, reason, as_json, lambda c: [AddAlias(entity_id=entity_id(c, entity),
                                                                             alias=alias)])

    @edit.command("alias-remove")
    def alias_remove_cmd(entity: EntityArg, alias: ValueArg, graph: str = GraphOpt, author: str = AuthorOpt,
                         reason: str = ReasonOpt, as_json: bool = JsonOpt, data_dir: Path = DataDirOpt) -> None:
        """Remove an alias of an entity."""
        _apply(data_dir, graph, author, reason, as_json, lambda c: [RemoveAlias(entity_id=entity_id(c, entity),
                                                                                alias=alias)])

    @edit.command("delete")
    def delete_cmd(entity: EntityArg, graph: str = GraphOpt, author: str = AuthorOpt, reason: str = ReasonOpt,
                   as_json: bool = JsonOpt, data_dir: Path = DataDirOpt) -> None:
        """Delete an entity and its relations."""
        _apply(data_dir, graph, author, reason, as_json, lambda c: [DeleteEntity(entity_id=entity_id(c, entity))])

    @edit.command("relation-type")
    def relation_type_cmd(relation: RelationArg, relation_type: ValueArg, graph: str = GraphOpt,
                          author: str = AuthorOpt, reason: str = ReasonOpt, as_json: bool = JsonOpt,
                          data_dir: Path = DataDirOpt) -> None:
        """Change a relation's type."""
        _apply(data_dir, graph, author, reason, as_json,
               lambda c: [SetRelationType(relation_id=relation, relation_type=relation_type)])

    @edit.command("relation-describe")
    def relation_describe_cmd(relation: RelationArg, description: ValueArg, graph: str = GraphOpt,
                              author: str = AuthorOpt, reason: str = ReasonOpt, as_json: bool = JsonOpt,
                              data_dir: Path = DataDirOpt) -> None:
        """Replace a relation's description."""
        _apply(data_dir, graph, author, reason, as_json,
               lambda c: [SetRelationDescription(relation_id=relation, description=description)])

    @edit.command("relation-weight")
    def relation_weight_cmd(relation: RelationArg, weight: ValueArg, graph: str = GraphOpt, author: str = AuthorOpt,
                            reason: str = ReasonOpt, as_json: bool = JsonOpt, data_dir: Path = DataDirOpt) -> None:
        """Change a relation's weight."""
        _apply(data_dir, graph, author, reason, as_json,
               lambda c: [SetRelationWeight(relation_id=relation, weight=_number(weight))])

    @edit.command("reverse")
    def reverse_cmd(relation: RelationArg, graph: str = GraphOpt, author: str = AuthorOpt, reason: str = ReasonOpt,
                    as_json: bool = JsonOpt, data_dir: Path = DataDirOpt) -> None:
        """Reverse a relation's direction."""
        _apply(data_dir, graph, author, reason, as_json, lambda c: [ReverseRelation(relation_id=relation)])

    @edit.command("relation-delete")
    def relation_delete_cmd(relation: RelationArg, graph: str = GraphOpt, author: str = AuthorOpt,
                            reason: str = ReasonOpt, as_json: bool = JsonOpt, data_dir: Path = DataDirOpt) -> None:
        """Delete a relation."""
        _apply(data_dir, graph, author, reason, as_json, lambda c: [DeleteRelation(relation_id=relation)])

    @edit.command("relate")
    def relate_cmd(
        source: Annotated[str, typer.Argument(help="Source entity id or exact name")],
        target: Annotated[str, typer.Argument(help="Target entity id or exact name")],
        relation_type: Annotated[str, typer.Argument(help="Relation type")],
        description: str = typer.Option("", "--description", help="One sentence"),
        weight: float = typer.Option(1.0, "--weight"),
        chunk: str = typer.Option("", "--chunk", help="The id of the chunk that states it"),
        graph: str = GraphOpt, author: str = AuthorOpt, reason: str = ReasonOpt, as_json: bool = JsonOpt,
        data_dir: Path = DataDirOpt,
    ) -> None:
        """Add a relation between two entities."""
        _apply(data_dir, graph, author, reason, as_json, lambda c: [AddRelation(
            source_id=entity_id(c, source), target_id=entity_id(c, target), relation_type=relation_type,
            description=description, weight=weight, source_chunk=chunk)])

    @edit.command("merge")
    def merge_cmd(
        entities: Annotated[list[str], typer.Argument(help="Two or more entity ids or names; the first is kept")],
        name: str = typer.Option(None, "--name", help="The merged entity's name (default: the first's)"),
        etype: str = typer.Option(None, "--type", help="Its type (default: the first's, unless unknown)"),
        description: str = typer.Option(None, "--description", help="Its description (default: all kept)"),
        preview: bool = typer.Option(False, "--preview", help="Show the merged entity and the conflicts only"),
        graph: str = GraphOpt, author: str = AuthorOpt, reason: str = ReasonOpt, as_json: bool = JsonOpt,
        data_dir: Path = DataDirOpt,
    ) -> None:
        """Merge entities into the first: relations re-pointed (parallel ones combined), aliases, sources,
        claims and communities united."""
        with cli_errors(), curator_for(data_dir, graph) as curator:
            op = MergeEntities(entity_ids=tuple(entity_id(curator, e) for e in entities), name=name, type=etype,
                               description=description)
            if preview:
                p = curator.merge_preview(op)
                if as_json:
                    echo_json(p)
                    return
                typer.echo(f"merged: {p.entity.name!r} [{p.entity.type}] aliases {list(p.entity.aliases)}")
                for field, values in p.conflicts.items():
                    typer.echo(f"conflict {field}: " + " | ".join(repr(v[:80]) for v in values))
                typer.echo(f"{p.relations_repointed} relations re-pointed, {len(p.combined)} parallel relations "
                           f"combined, {len(p.self_loops)} self-loops removed, {p.communities} communities and "
                           f"{p.claims} claims updated")
                return
            _print(curator.apply([op], author=author, reason=reason), as_json, curator)


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError as exc:
        raise ValidationError(f"weight must be a number, got {text!r}") from exc


def _changes_commands(changes: typer.Typer) -> None:
    @changes.command("list")
    def list_cmd(limit: int = typer.Option(50, "--limit"), graph: str = GraphOpt, as_json: bool = JsonOpt,
                 data_dir: Path = DataDirOpt) -> None:
        """The graph's changesets, newest first (and what the last re-import did with them)."""
        with cli_errors(), curator_for(data_dir, graph) as curator:
            rows = curator.log.changesets(limit=limit)
            version, replay = curator.log.last_replay()
            if as_json:
                echo_json({"changesets": rows, "replay": {"version": version, "lines": replay}})
                return
            for cs in rows:
                typer.echo(cs.summary() + (f" — {cs.reason}" if cs.reason else ""))
            if replay:
                typer.echo(f"last re-import (version {version}):")
                for ln in replay:
                    typer.echo(f"  #{ln.changeset} {ln.status}" + (f": {ln.reason}" if ln.reason else ""))

    @changes.command("show")
    def show_cmd(changeset: int, graph: str = GraphOpt, as_json: bool = JsonOpt, data_dir: Path = DataDirOpt) -> None:
        """One changeset: who, when, why, and every record before and after."""
        with cli_errors(), curator_for(data_dir, graph) as curator:
            _print(curator.log.get(changeset), as_json, curator)

    @changes.command("undo")
    def undo_cmd(changeset: Annotated[int | None, typer.Argument(help="Default: the latest edit in force")] = None,
                 graph: str = GraphOpt, author: str = AuthorOpt, as_json: bool = JsonOpt,
                 data_dir: Path = DataDirOpt) -> None:
        """Undo an edit (refused if a later change touched the same records)."""
        with cli_errors(), curator_for(data_dir, graph) as curator:
            _print(curator.undo(author=author, changeset=changeset), as_json, curator)

    @changes.command("redo")
    def redo_cmd(changeset: Annotated[int | None, typer.Argument(help="Default: the latest undone edit")] = None,
                 graph: str = GraphOpt, author: str = AuthorOpt, as_json: bool = JsonOpt,
                 data_dir: Path = DataDirOpt) -> None:
        """Apply an undone, rolled-back or skipped edit again."""
        with cli_errors(), curator_for(data_dir, graph) as curator:
            _print(curator.redo(author=author, changeset=changeset), as_json, curator)

    @changes.command("export")
    def export_cmd(out: Path, graph: str = GraphOpt, data_dir: Path = DataDirOpt) -> None:
        """Write the whole log as JSONL (one changeset per line)."""
        from retrieval.curation.exchange import export_log

        with cli_errors(), curator_for(data_dir, graph) as curator:
            n = export_log(curator.log, out)
        typer.echo(f"wrote {n} changesets to {out}")

    @changes.command("import")
    def import_cmd(file: Path, graph: str = GraphOpt, author: str = AuthorOpt, as_json: bool = JsonOpt,
                   data_dir: Path = DataDirOpt) -> None:
        """Apply the edits in force of an exported log, in order; each is applied or skipped with the reason, and
        recorded under --author (else the OS user), the file's author kept in its reason. The whole file is checked
        first: a malformed line, an operation an edit would refuse or a file over the limits applies nothing."""
        from retrieval.curation.exchange import check_log, import_log, read_log

        with cli_errors():
            check_log(file)  # streamed, before the graph is opened
        lines = []
        with cli_errors(), curator_for(data_dir, graph) as curator:
            for ln in import_log(curator, read_log(file), author=author, source=file.name):
                lines.append(ln)
                if not as_json:
                    typer.echo(f"#{ln.changeset} {ln.status}: {ln.reason}")
        if as_json:
            echo_json(lines)
            return
        typer.echo(f"{sum(ln.status == 'applied' for ln in lines)} applied, "
                   f"{sum(ln.status == 'skipped' for ln in lines)} skipped")


def register(app: typer.Typer) -> None:
    edit = typer.Typer(no_args_is_help=True, help="Change the graph in place (each change is logged, undoable)")
    changes = typer.Typer(no_args_is_help=True, help="The curation log: list, show, undo, redo, export, import")
    _edit_commands(edit)
    _changes_commands(changes)
    app.add_typer(edit, name="edit")
    app.add_typer(changes, name="changes")

    @app.command("duplicates")
    def duplicates_cmd(limit: int = typer.Option(20, "--limit"), min_score: float = typer.Option(0.35, "--min-score"),
                       graph: str = GraphOpt, as_json: bool = JsonOpt, data_dir: Path = DataDirOpt) -> None:
        """Likely duplicate entities, ranked, each with its evidence (pairs marked not duplicates left out)."""
        from retrieval.curation.duplicates import find_duplicates

        with cli_errors(), curator_for(data_dir, graph) as curator:
            found = find_duplicates(curator.kg, limit=limit, min_score=min_score,
                                    not_duplicates=curator.not_duplicates())
        if as_json:
            echo_json(found)
            return
        for c in found:
            typer.echo(f"{c.score:.2f}  {c.keep_name!r} <- {c.other_name!r}   (edit merge {c.keep} {c.other})")
            for ev in c.evidence:
                typer.echo(f"        {ev.signal:<12} {ev.value:.2f}  {ev.detail}")
        if not found:
            typer.echo("no likely duplicates")

    @app.command("not-duplicates")
    def not_duplicates_cmd(a: str, b: str, graph: str = GraphOpt, author: str = AuthorOpt,
                           data_dir: Path = DataDirOpt) -> None:
        """Remember that two entities are not duplicates (they are no longer proposed)."""
        with cli_errors(), curator_for(data_dir, graph) as curator:
            curator.mark_not_duplicates(entity_id(curator, a), entity_id(curator, b), author=author)
        typer.echo(f"not duplicates: {a!r} and {b!r}")

    @app.command("history")
    def history_cmd(target: Annotated[str, typer.Argument(help="Entity id or name (or a relation id with "
                                                                 "--relation)")],
                    relation: bool = typer.Option(False, "--relation", help="TARGET is a relation id"),
                    graph: str = GraphOpt, as_json: bool = JsonOpt, data_dir: Path = DataDirOpt) -> None:
        """Who changed an entity or relation, when, and from what."""
        with cli_errors(), curator_for(data_dir, graph) as curator:
            kind = "relation" if relation else "entity"
            try:
                key = target if relation else entity_id(curator, target)
            except NotFoundError:
                key = target  # deleted or merged away: its id is still in the log
            rows = curator.history(kind, key)
        if as_json:
            echo_json(rows)
            return
        if not rows:
            typer.echo(f"no changes of {kind} {target!r}")
        for h in rows:
            typer.echo(f"#{h.changeset} {h.created_at[:19]} {h.author} [{h.state}] {h.what}"
                       + (f" — {h.reason}" if h.reason else ""))
            if h.before and h.after:
                diffs = [f"{k}: {h.before.get(k)!r} → {v!r}" for k, v in h.after.items() if h.before.get(k) != v]
                for d in diffs:
                    typer.echo(f"    {d[:200]}")
            elif h.after is None:
                typer.echo("    removed" + (f" (into {h.into!r})" if h.into else ""))
            else:
                typer.echo("    added")

    @app.command("add-documents")
    def add_documents_cmd(folder: Path, graph: str = GraphOpt, author: str = AuthorOpt, as_json: bool = JsonOpt,
                          progress: bool = typer.Option(True, "--progress/--no-progress"),
                          data_dir: Path = DataDirOpt) -> None:
        """Add the documents of FOLDER (.txt/.md/.pdf/.epub) to a built graph: only their chunks are extracted
        and embedded."""
        from retrieval.cli.data import StageBars
        from retrieval.ingest.update import add_documents

        bars = StageBars() if progress and not as_json else None
        with cli_errors(), curator_for(data_dir, graph) as curator:
            try:
                cs, warnings = add_documents(curator, folder, author=author, progress=bars)
            finally:
                if bars is not None:
                    bars.close()
            _print(cs, as_json, curator)
        for w in warnings:
            typer.echo(f"warning: {w}", err=True)

    @app.command("remove-document")
    def remove_document_cmd(document: Annotated[str, typer.Argument(help="The book title or source file")],
                            graph: str = GraphOpt, author: str = AuthorOpt, as_json: bool = JsonOpt,
                            data_dir: Path = DataDirOpt) -> None:
        """Remove a document: its chunks, and the entities and relations no other chunk supports."""
        from retrieval.ingest.update import remove_document

        with cli_errors(), curator_for(data_dir, graph) as curator:
            _print(remove_document(curator, document, author=author), as_json, curator)
