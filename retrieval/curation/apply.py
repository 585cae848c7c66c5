"""Applying changesets to an opened graph, in place: apply, undo, redo, crash recovery, catching up with other
processes, and history. `Curator` holds one opened graph and its log (state is real, hence a class).

A changeset runs under the graph's write lock (`KG.rw`): it is compiled against the graph as it is, recorded in
the log as `applying` (fsynced), written to the stores (`curation.write`), recorded as `applied` with the next
generation, and its records patched into the in-memory index (`graph.patch`). A search holds the read lock, so
it sees the graph before or after. A crash between `applying` and `applied` is rolled back on the next open
(the before-states are written again) and reported; the changeset stays in the log and can be redone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from retrieval.curation.access import authorise
from retrieval.curation.compile import GraphView, MergePreview, compile_ops, merge_preview
from retrieval.curation.log import CurationLog, has_log
from retrieval.curation.ops import Change, Changeset, MergeEntities, Op, describe_op, op_targets
from retrieval.curation.views import UNDESCRIBED, KGView
from retrieval.curation.write import Say, Version, Written, graph_changes, write_changes
from retrieval.embedding import Embedder
from retrieval.errors import ConflictError, NotFoundError, RetrievalError, ValidationError
from retrieval.graph import bm25, catalog
from retrieval.graph.communities import CommunityIndex, load_extras
from retrieval.graph.patch import patch_index
from retrieval.graph.runtime import KG, embedding_cache
from retrieval.models import Chunk, Record
from retrieval.stores.base import CHUNKS, updates, vector_updates
from retrieval.stores.vector_cache import CachingEmbedder, caching_embedder

Seen = dict[tuple[str, str], int]  # (kind, id) -> the revision an editor saw (`CurationLog.revision`)


class HistoryEntry(Record):
    """One change of one record: who, when, why, what it was before and after."""

    changeset: int
    action: str
    author: str
    created_at: str
    reason: str = ""
    state: str
    what: str
    before: dict | None = None
    after: dict | None = None
    into: str | None = None


class Curator:
    """Curation of one opened graph version and its log."""

    def __init__(self, kg: KG) -> None:
        self.kg = kg
        self._log: CurationLog | None = None
        self._embedder: Embedder | None = None
        self.recovered: list[str] = []  # what the last recovery did (shown once by the app and the CLI)
        if has_log(kg.settings.data_dir, kg.name):
            kg.generation = self.log.generation()
            self.recover()

    @property
    def log(self) -> CurationLog:
        """The graph's log, created on the first write (a read-only data directory can still be read)."""
        if self._log is None:
            self._log = CurationLog(self.kg.settings.data_dir, self.kg.name)
        return self._log

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
        if isinstance(self._embedder, CachingEmbedder):
            self._embedder.close()

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed through the data directory's vector cache: an undo restores texts the import embedded, and an
        edit's text may be another graph's (0.17 s of a 1.3 s undo on the demo, measured beside other work)."""
        if self._embedder is None:
            settings = self.kg.settings
            self._embedder = caching_embedder(settings.data_dir, settings.vector_cache_mb, embedding_cache(self.kg))
        return self._embedder.embed(texts)

    # --- reading ------------------------------------------------------------------------------

    def view(self) -> GraphView:
        return KGView(self.kg)

    def preview(self, ops: Sequence[Op]) -> tuple[Change, ...]:
        """What `ops` would change, without writing anything."""
        with self.kg.reading():
            return compile_ops(self.view(), ops)

    def merge_preview(self, op: MergeEntities) -> MergePreview:
        with self.kg.reading():
            return merge_preview(self.view(), op)

    def revision(self, kind: str, target: str) -> int:
        """The revision of a record as an editor sees it now (pass it back as `seen` to detect a race)."""
        return self.log.revision(kind, target) if has_log(self.kg.settings.data_dir, self.kg.name) else 0

    def history(self, kind: str, target: str) -> list[HistoryEntry]:
        """Every applied change of one record, oldest first (undone edits included, marked so)."""
        if not has_log(self.kg.settings.data_dir, self.kg.name):
            return []
        out = []
        for cs in self.log.history(kind, target):
            change = next((c for c in cs.changes if (c.kind, c.id) == (kind, target)), None)
            out.append(HistoryEntry(
                changeset=cs.id, action=cs.action, author=cs.author, created_at=cs.created_at, reason=cs.reason,
                state=cs.state,
                what="; ".join(describe_op(op, cs.names()) for op in cs.ops) or f"{cs.action} of #{cs.target}",
                before=change.before if change else None, after=change.after if change else None,
                into=change.into if change else None,
            ))
        return out

    def not_duplicates(self) -> set[tuple[str, str]]:
        """Pairs (sorted ids) analysts marked as not duplicates."""
        return self.log.not_duplicates() if has_log(self.kg.settings.data_dir, self.kg.name) else set()

    def mark_not_duplicates(self, a: str, b: str, *, author: str | None = None) -> None:
        if a == b:
            raise ValidationError("an entity is always itself: pick two different entities")
        for eid in (a, b):
            if eid not in self.kg.index.id_to_idx:
                raise NotFoundError(f"no entity with id {eid!r} in this graph")
        self.log.add_not_duplicates(a, b, authorise(author, "review"))

    # --- drafts: a reviewed batch, pending until applied ------------------------------------------

    def draft(self, author: str | None = None) -> Changeset | None:
        """The author's pending draft (operations collected for one changeset), if any."""
        who = authorise(author, "edit")
        if not has_log(self.kg.settings.data_dir, self.kg.name):
            return None
        return next((d for d in self.log.drafts() if d.author == who), None)

    def add_to_draft(self, op: Op, *, author: str | None = None, reason: str = "") -> Changeset:
        """Add an operation to the author's draft (checked against the graph now, applied later)."""
        who = authorise(author, "edit")
        with self.kg.reading():
            compile_ops(self.view(), [op])
        current = self.draft(who)
        if current is None:
            return self.log.begin(Changeset(graph=self.kg.name, author=who, reason=reason, ops=(op,), state="draft",
                                            version=self.kg.version))
        if op in current.ops:
            return current
        self.log.update_draft(current.id, [*current.ops, op], reason or current.reason)
        return self.log.get(current.id)

    def remove_from_draft(self, op: Op, *, author: str | None = None) -> Changeset | None:
        current = self.draft(author)
        if current is None:
            return None
        ops = [o for o in current.ops if o != op]
        if not ops:
            self.log.discard_draft(current.id)
            return None
        self.log.update_draft(current.id, ops, current.reason)
        return self.log.get(current.id)

    def apply_draft(self, *, author: str | None = None, seen: Seen | None = None) -> Changeset:
        """Apply the author's draft as one changeset (all its operations, or none), then drop the draft."""
        current = self.draft(author)
        if current is None:
            raise NotFoundError("no draft to apply")
        self.log.discard_draft(current.id)  # applied now, so it no longer holds what it names
        try:
            return self.apply(current.ops, author=author, reason=current.reason, seen=seen)
        except RetrievalError:
            self.log.begin(current)  # kept: nothing was written, the analyst can fix the batch
            raise

    def discard_draft(self, *, author: str | None = None) -> None:
        current = self.draft(author)
        if current is not None:
            self.log.discard_draft(current.id)

    # --- writing ------------------------------------------------------------------------------

    def apply(self, ops: Sequence[Op], *, author: str | None = None, reason: str = "",
              seen: Seen | None = None, progress: Say | None = None) -> Changeset:
        """Apply `ops` as one changeset. `seen`: the revisions the editor saw; if another change touched one
        of those records since, ConflictError says who changed it and how, and nothing is written."""
        who = authorise(author, "edit")
        reason = " ".join(reason.split())[:2000]
        with self.kg.rw.writing():
            self._catch_up()
            self._check_seen(seen or {})
            changes = compile_ops(self.view(), ops)
            if not changes:
                raise ValidationError("nothing to change: the graph already says that")
            self._check_drafts(changes)
            updates(self.kg.graph).ready_to_write()  # a graph another process holds: refused, nothing logged
            cs = self.log.begin(Changeset(graph=self.kg.name, author=who, reason=reason, ops=tuple(ops),
                                          changes=changes, version=self.kg.version))
            return self._commit(cs, changes, progress=progress)

    def undo(self, *, author: str | None = None, changeset: int | None = None) -> Changeset:
        """Undo an applied edit (default: the latest one still in force). Refused if a later change touched the
        same records (undo that one first)."""
        who = authorise(author, "undo")
        with self.kg.rw.writing():
            self._catch_up()
            edit = self._pick(changeset, "applied", "undo")
            in_force = self._in_force(edit)
            self._check_current(in_force, "after", edit)
            inverse = tuple(c.inverse() for c in reversed(in_force))
            updates(self.kg.graph).ready_to_write()
            cs = self.log.begin(Changeset(graph=self.kg.name, action="undo", target=edit.id, author=who,
                                          ops=edit.ops, changes=inverse, version=self.kg.version))
            return self._commit(cs, inverse, edit_state=(edit.id, "undone"))

    def redo(self, *, author: str | None = None, changeset: int | None = None) -> Changeset:
        """Apply an undone, rolled-back or skipped edit again (default: the latest undone one). An edit recorded
        on another version (a re-import skipped it) is compiled again from its operations."""
        who = authorise(author, "redo")
        with self.kg.rw.writing():
            self._catch_up()
            edit = self._pick(changeset, ("undone", "rolled_back", "skipped"), "redo")
            if edit.state == "skipped" or edit.version != self.kg.version:
                changes = compile_ops(self.view(), edit.ops)
            else:
                self._check_current(edit.changes, "before", edit)
                changes = edit.changes
            self._check_drafts(changes)
            updates(self.kg.graph).ready_to_write()
            cs = self.log.begin(Changeset(graph=self.kg.name, action="redo", target=edit.id, author=who,
                                          ops=edit.ops, changes=changes, version=self.kg.version))
            return self._commit(cs, changes, edit_state=(edit.id, "applied"))

    def _in_force(self, edit: Changeset) -> tuple[Change, ...]:
        """The records an applied edit changed as it stands: those of its latest redo, if one recompiled it."""
        for cs in self.log.changesets(states=["applied"]):
            if cs.target == edit.id and cs.action in ("redo", "undo"):
                return cs.changes if cs.action == "redo" else edit.changes
        return edit.changes

    def _pick(self, cid: int | None, states: str | tuple[str, ...], verb: str) -> Changeset:
        wanted = (states,) if isinstance(states, str) else states
        if cid is not None:
            edit = self.log.get(cid)
            if edit.action != "edit" or edit.state not in wanted:
                raise ValidationError(f"changeset #{cid} is {edit.action} [{edit.state}]: nothing to {verb}")
            return edit
        if verb == "undo":
            for cs in self.log.changesets(states=["applied"]):
                if cs.action == "edit":
                    return cs
            raise NotFoundError("nothing to undo: no edit of this graph is in force")
        # redo: the edit the latest undo acted on, while it is still undone
        for cs in self.log.changesets(states=["applied"]):
            if cs.action == "undo" and cs.target is not None and self.log.get(cs.target).state == "undone":
                return self.log.get(cs.target)
            if cs.action == "edit":
                break
        raise NotFoundError("nothing to redo")

    def _commit(self, cs: Changeset, changes: tuple[Change, ...],
                edit_state: tuple[int, str] | None = None, progress: Say | None = None) -> Changeset:
        start = time.perf_counter()
        try:
            written = write_changes(replace(self._version(), say=progress), changes)
        except BaseException as exc:
            self._roll_back(cs, changes, exc)
            raise
        generation = self.log.finish(cs.id, "applied", edit_state=edit_state)
        self._install(written, generation)
        written.seconds["total"] = time.perf_counter() - start
        self.last_seconds = written.seconds
        return self.log.get(cs.id)

    def _roll_back(self, cs: Changeset, changes: tuple[Change, ...], exc: BaseException) -> None:
        """Undo whatever part of a failed changeset reached the stores; if even that fails, leave it `applying`
        so that the next open rolls it back."""
        try:
            write_changes(self._version(), tuple(c.inverse() for c in reversed(changes)))
        except RetrievalError as again:
            exc.add_note(f"rolling back changeset #{cs.id} failed too ({again}); it is rolled back when the "
                         "graph is next opened")
            self._forget()
            return
        self.kg.install(self.log.finish(cs.id, "rolled_back"), drop=("index", "bm25", "communities"))

    def _version(self) -> Version:
        kg = self.kg
        return Version(graph=kg.graph, vectors=kg.vectors, dir=kg.handle.dir, embed=self._embed,
                       view=self.view(), chunk_ids=kg.bm25.chunk_ids, extras=kg.communities.extras)

    def _install(self, written: Written, generation: int) -> None:
        """Patch the in-memory state with what was written (an index not built yet is built later, from the
        stores, which hold the change already)."""
        kg = self.kg
        index = None
        drop: list[str] = []
        if "index" in kg.__dict__:
            old = kg.index
            index = patch_index(old, written.graph)
            if written.bm25 is not None:
                index.extras.pop("memory_graph", None)  # passage document frequencies changed
            bare = old.extras.get(UNDESCRIBED)
            if isinstance(bare, set):  # the relations without a description, kept up to date
                bare = (bare - set(written.graph.delete_relations)) - {r.id for r in written.graph.relations
                                                                       if r.description}
                index.extras[UNDESCRIBED] = bare | {r.id for r in written.graph.relations if not r.description}
        communities = CommunityIndex.of(written.extras) if written.extras is not None else None
        manifest = json.loads((kg.handle.dir / catalog.MANIFEST).read_text(encoding="utf-8"))
        kg.handle = replace(kg.handle, manifest=manifest)
        kg.install(generation, index=index, bm25=written.bm25, communities=communities, drop=tuple(drop))

    def _forget(self) -> None:
        """Drop the in-memory state: it is built again from the stores on next use."""
        self.kg.install(self.kg.generation, drop=("index", "bm25", "communities"))

    # --- checks -------------------------------------------------------------------------------

    def _check_seen(self, seen: Seen) -> None:
        for (kind, target), revision in seen.items():
            now = self.log.revision(kind, target)
            if now > revision:
                later = [cs for cs in self.log.history(kind, target) if cs.id > revision]
                who = "; ".join(f"#{cs.id} by {cs.author} at {cs.created_at[:19]}: "
                                f"{'; '.join(describe_op(op) for op in cs.ops) or cs.action}" for cs in later)
                raise ConflictError(f"{kind} {target!r} was changed after you opened it ({who}); nothing was "
                                    "written: look at it again, then apply your edit")

    def _check_drafts(self, changes: Sequence[Change]) -> None:
        """A record a pending draft still uses may not be removed."""
        removed = {(c.kind, c.id) for c in changes if c.after is None and c.kind in ("entity", "relation")}
        if not removed or not has_log(self.kg.settings.data_dir, self.kg.name):
            return
        for draft in self.log.drafts():
            used = removed.intersection(t for op in draft.ops for t in op_targets(op))
            if used:
                kind, target = sorted(used)[0]
                raise ConflictError(f"draft #{draft.id} by {draft.author} still uses {kind} {target!r}: apply or "
                                    "discard that draft first")

    def _current(self, changes: Sequence[Change]) -> dict[tuple[str, str], dict | None]:
        """The stored state of every record `changes` name."""
        by_kind: dict[str, list[str]] = {}
        for c in changes:
            by_kind.setdefault(c.kind, []).append(c.id)
        kg = self.kg
        found: dict[tuple[str, str], dict | None] = {(c.kind, c.id): None for c in changes}
        records: list[Record] = []
        records += kg.graph.get_entities(by_kind.get("entity", []))
        records += kg.graph.get_relations(by_kind.get("relation", []))
        fields = set(Chunk.model_fields)
        records += [Chunk(**{k: v for k, v in r.items() if k in fields})
                    for r in kg.vectors.get(CHUNKS, by_kind.get("chunk", []))] if by_kind.get("chunk") else []
        kinds = {"Entity": "entity", "Relation": "relation", "Chunk": "chunk"}
        for r in records:
            found[(kinds[type(r).__name__], r.id)] = r.model_dump(mode="json")  # type: ignore[attr-defined]
        extras = kg.communities.extras
        for kind, table in (("community", extras.communities), ("claim", extras.claims)):
            wanted = set(by_kind.get(kind, []))
            for rec in table:
                if rec.id in wanted:
                    found[(kind, rec.id)] = rec.model_dump(mode="json")
        return found

    def _check_current(self, changes: Sequence[Change], side: str, edit: Changeset) -> None:
        """Every record must still be as the edit left it (undo) or found it (redo)."""
        now = self._current(changes)
        for c in changes:
            want = c.after if side == "after" else c.before
            if _same(now[(c.kind, c.id)], want, c.kind):
                continue
            later = [cs.id for cs in self.log.history(c.kind, c.id) if cs.id > edit.id]
            hint = f"; undo #{later[-1]} first" if later else ""
            raise ConflictError(f"{c.kind} {c.id!r} changed since changeset #{edit.id}{hint}")

    # --- recovery and other processes --------------------------------------------------------------

    def recover(self) -> list[str]:
        """Roll back changesets a crash left half-written; returns one sentence per changeset (also kept in
        `recovered`)."""
        if not has_log(self.kg.settings.data_dir, self.kg.name):
            return []
        said = []
        with self.kg.rw.writing():
            for cs in self.log.interrupted():
                inverse = tuple(c.inverse() for c in reversed(cs.changes))
                write_changes(self._version(), inverse)
                generation = self.log.finish(cs.id, "rolled_back")
                self.kg.install(generation, drop=("index", "bm25", "communities"))
                said.append(f"changeset #{cs.id} ({cs.summary()}) was interrupted before it finished; the graph "
                            f"{self.kg.name!r} is as it was before it (rolled back). It is kept in the log: "
                            f"`python -m retrieval changes redo {cs.id}` applies it again")
        self.recovered += said
        return said

    def refresh(self) -> bool:
        """Catch up with changes another process made to this graph (a server back end shared with the CLI);
        True if the graph changed. Cheap when nothing did (one small read)."""
        if not has_log(self.kg.settings.data_dir, self.kg.name):
            return False
        if self.log.generation() == self.kg.generation and not self.log.interrupted():
            return False
        with self.kg.rw.writing():
            return self._catch_up()

    def _catch_up(self) -> bool:
        if not has_log(self.kg.settings.data_dir, self.kg.name):
            return False
        if self.log.interrupted():
            self.recover()
        generation = self.log.generation()
        if generation == self.kg.generation:
            return False
        kg = self.kg
        vector_updates(kg.vectors).sync()
        # everything applied since (an edit later undone was applied too: its undo follows it), in order
        newer = sorted((cs for cs in self.log.changesets(states=["applied", "undone"])
                        if cs.generation > kg.generation), key=lambda cs: cs.generation)
        if "index" in kg.__dict__:
            index = kg.index
            try:
                for cs in newer:
                    index = patch_index(index, graph_changes(cs.changes))
            except (KeyError, ValueError):  # the index did not hold what a change assumed: build it again
                kg.install(kg.generation, drop=("index",))
            else:
                kg.install(kg.generation, index=index)
        if any(c.kind == "chunk" for cs in newer for c in cs.changes):
            kg.install(kg.generation, bm25=bm25.load_version(kg.handle.dir))
        if any(c.kind in ("community", "claim") for cs in newer for c in cs.changes):
            kg.install(kg.generation, communities=CommunityIndex.of(load_extras(kg.handle.dir)))
        manifest = json.loads((kg.handle.dir / catalog.MANIFEST).read_text(encoding="utf-8"))
        kg.handle = replace(kg.handle, manifest=manifest)
        kg.install(generation)
        return True


def _same(stored: dict | None, wanted: dict | None, kind: str) -> bool:
    if stored is None or wanted is None:
        return stored is None and wanted is None
    from retrieval.curation.ops import RECORD_TYPES

    model = RECORD_TYPES[kind]
    return model.model_validate(stored) == model.model_validate(wanted)


def open_curator(kg: KG) -> Curator:
    """The curator of an opened graph (rolls back a crashed changeset first, and says so in `recovered`)."""
    return Curator(kg)
