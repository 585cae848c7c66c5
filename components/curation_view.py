"""The Curation page's parts: duplicate candidates with their evidence and a merged preview (merge one, add to a
reviewed batch, or mark "not duplicates"), the change log with undo and redo, one record's history, and what a
crash recovery or the last re-import did. Everything is done through the page's `Curation` callables."""

from __future__ import annotations

import json
from collections.abc import Callable

import pandas as pd
import streamlit as st

from retrieval.curation.duplicates import Candidate
from retrieval.curation.ops import MergeEntities, change_lines, count_changes
from retrieval.errors import RetrievalError
from ui_records import Curation, EntityCatalog
from ui_text import md_code, md_literal, short

SHOWN = 25


def _say(what: Callable[[], object], done: str) -> None:
    """Run one curation call: its outcome (or the reason it was refused) is shown on the next run."""
    try:
        result = what()
    except RetrievalError as exc:
        st.session_state["curation-notice"] = ("error", str(exc))
    else:
        summary = getattr(result, "summary", None)
        st.session_state["curation-notice"] = ("ok", summary() if callable(summary) else done)
    st.rerun()


def render_notices(cur: Curation) -> None:
    """A crash rolled back on open, the last re-import's replay, and the outcome of the last action."""
    for line in cur.recovered():
        st.warning(md_literal(line), icon=":material/restore:")
    notice = st.session_state.pop("curation-notice", None)
    if notice:
        (st.error if notice[0] == "error" else st.success)(md_literal(notice[1]))
    version, lines = cur.replay()
    if lines:
        with st.expander(f"Last re-import (version {version}): {sum(ln.status == 'applied' for ln in lines)} "
                         f"applied, {sum(ln.status == 'skipped' for ln in lines)} skipped", icon=":material/sync:"):
            st.dataframe(pd.DataFrame([{"changeset": f"#{ln.changeset}", "status": ln.status, "reason": ln.reason}
                                       for ln in lines]), hide_index=True)


def _evidence(c: Candidate) -> str:
    """One Markdown line per signal: its value and what it rests on (data shown literally)."""
    return "  \n".join(f"**{md_literal(e.signal)}** {e.value:.2f} · {md_literal(e.detail)}" for e in c.evidence)


def render_duplicates(cur: Curation) -> None:
    """Ranked candidates; each opens its evidence and the merged entity with the conflicts to resolve."""
    found = cur.duplicates(SHOWN * 2)
    batch = cur.batch()
    queued = {op.entity_ids: op for op in batch.ops if isinstance(op, MergeEntities)} if batch else {}
    if batch and batch.ops:
        st.info(f"Reviewed batch: {len(batch.ops)} merge(s) waiting. Apply them as one changeset, or discard.",
                icon=":material/playlist_add_check:")
        a, b = st.columns(2)
        if a.button("Apply the batch", type="primary", key="batch-apply") and cur.apply_batch is not None:
            _say(cur.apply_batch, "applied")
        if b.button("Discard the batch", key="batch-discard"):
            _say(cur.discard_batch, "batch discarded")
    if not found:
        st.info("No likely duplicates (pairs marked not duplicates are left out).")
        return
    st.caption(f"{len(found)} candidate pairs, likeliest first: names (RapidFuzz), descriptions (stored vectors), "
               "shared related entities and shared sources.")
    for n, c in enumerate(found[:SHOWN]):
        label = f"{c.score:.2f} · {short(c.keep_name, 60)} ← {short(c.other_name, 60)}"
        with st.expander(md_literal(label), expanded=n == 0):
            st.markdown(_evidence(c))
            # keyed by the pair, not its place: a pair above that leaves the list must not reset this form (nor
            # lose a click made on it while the page reruns)
            _merge_form(cur, c, queued.get((c.keep, c.other)), key=f"dup-{json.dumps([c.keep, c.other])}")


def _merge_form(cur: Curation, c: Candidate, queued: MergeEntities | None, key: str) -> None:
    try:
        p = cur.preview(MergeEntities(entity_ids=(c.keep, c.other)))
    except RetrievalError as exc:
        st.error(md_literal(exc))
        return
    st.markdown(f"**Merged entity:** {md_literal(p.entity.name)} · {md_literal(p.entity.type)} · aliases "
                f"{md_literal(', '.join(p.entity.aliases) or 'none')}")
    names = list(p.conflicts.get("name", (p.entity.name,)))
    name = st.selectbox("Name", names, key=f"{key}-name")
    types = list(p.conflicts.get("type", (p.entity.type,)))
    etype = st.selectbox("Type", types, index=types.index(p.entity.type) if p.entity.type in types else 0,
                         key=f"{key}-type") if len(types) > 1 else types[0]
    description = st.text_area("Description (the differing descriptions are all kept; edit to choose)",
                               p.entity.description, key=f"{key}-desc", height=120)
    st.caption(md_literal(f"{p.relations_repointed} relations re-pointed, {len(p.combined)} parallel relations "
                          f"combined, {len(p.self_loops)} relations between them removed, {p.communities} "
                          f"communities and {p.claims} claims updated"))
    op = MergeEntities(entity_ids=(c.keep, c.other), name=name, type=etype, description=description)
    a, b, d = st.columns(3)
    if a.button("Merge", type="primary", key=f"{key}-merge"):
        _say(lambda: cur.apply([op], {}, "merged from the duplicates view"), "merged")
    if queued is not None:
        if b.button("Remove from batch", key=f"{key}-unqueue") and cur.remove_from_batch is not None:
            remove = cur.remove_from_batch
            _say(lambda: remove(queued), "removed from the batch")
    elif b.button("Add to batch", key=f"{key}-queue") and cur.add_to_batch is not None:
        add = cur.add_to_batch
        _say(lambda: add(op), "added to the batch")
    if d.button("Not duplicates", key=f"{key}-not"):
        _say(lambda: cur.not_duplicates(c.keep, c.other), "remembered: not duplicates")


def render_log(cur: Curation) -> None:
    """The graph's changesets, newest first, with undo of the latest edit and redo of the latest undone one."""
    rows = cur.changesets(100)
    a, b, _ = st.columns([1, 1, 3])
    if a.button("Undo last edit", icon=":material/undo:", key="log-undo", disabled=not rows):
        _say(lambda: cur.undo(None), "undone")
    if b.button("Redo", icon=":material/redo:", key="log-redo", disabled=not rows):
        _say(lambda: cur.redo(None), "redone")
    if not rows:
        st.info("No change yet: edit from the graph view's details panel, or merge duplicates here.")
        return
    frame = pd.DataFrame([{"#": cs.id, "when": cs.created_at[:19].replace("T", " "), "who": cs.author,
                           "state": cs.state, "what": cs.summary().split(": ", 1)[-1] if cs.ops else cs.action,
                           "changed": count_changes(cs.changes), "why": cs.reason} for cs in rows])
    st.dataframe(frame, hide_index=True)
    pick = st.selectbox("Changeset", [cs.id for cs in rows], format_func=lambda i: f"#{i}", key="log-pick")
    chosen = next((cs for cs in rows if cs.id == pick), None)
    if chosen is not None:
        st.markdown(md_literal(chosen.summary()))
        st.code("\n".join(change_lines(chosen.changes)) or "(nothing)", language=None)
        c1, c2 = st.columns(2)
        undoable = chosen.action == "edit" and chosen.state == "applied"
        if undoable and c1.button(f"Undo #{chosen.id}", key="log-undo-one"):
            _say(lambda: cur.undo(chosen.id), "undone")
        if chosen.action == "edit" and chosen.state in ("undone", "rolled_back", "skipped") and \
                c2.button(f"Redo #{chosen.id}", key="log-redo-one"):
            _say(lambda: cur.redo(chosen.id), "redone")


def render_history(cur: Curation, catalog: EntityCatalog) -> None:
    """Who changed one entity (or relation), when, and from what."""
    kind = st.segmented_control("Record", ["entity", "relation"], default="entity", key="hist-kind") or "entity"
    if kind == "entity":
        target = st.selectbox("Entity", catalog.options, format_func=catalog.label, index=None, key="hist-entity",
                              placeholder="Pick an entity (or type its id below)")
        typed = st.text_input("Entity id (a deleted or merged entity too)", key="hist-entity-id")
        target = typed.strip() or target
    else:
        target = st.text_input("Relation id", key="hist-relation").strip() or None
    if not target:
        return
    rows = cur.history(kind, target)
    if not rows:
        st.info(f"No change of {kind} {md_code(target)}.")
        return
    for h in reversed(rows):
        st.markdown(f"**#{h.changeset}** · {md_literal(h.created_at[:19].replace('T', ' '))} · "
                    f"{md_literal(h.author)} · {md_literal(h.state)} — {md_literal(h.what)}"
                    + (f" — {md_literal(h.reason)}" if h.reason else ""))
        if h.before and h.after:
            diffs = [f"{k}: {short(h.before.get(k), 120)!r} → {short(v, 120)!r}" for k, v in h.after.items()
                     if h.before.get(k) != v]
            st.code("\n".join(diffs), language=None)
        else:
            st.caption("removed" + (f" (into {md_literal(h.into)})" if h.into else "") if h.after is None
                       else "added")
