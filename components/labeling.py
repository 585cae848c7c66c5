"""The Labeling page: query sets (import), TREC-style pools (build, with progress), the blind grading queue with
per-query progress, inter-annotator agreement with adjudication, and qrels export per annotator or adjudicated."""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from functools import partial

import pandas as pd
import streamlit as st

from components import link_params
from components.grader import GradeRow, GradeTarget, Tag, apply_pending, render_grader
from retrieval.access import Permit
from retrieval.errors import NotFoundError, RetrievalError
from retrieval.evaluation.agreement import AgreementReport, agreement
from retrieval.evaluation.consensus import resolve_labels
from retrieval.evaluation.labels import ADJUDICATED, Label, LabelStore
from retrieval.evaluation.pooling import MAX_DEPTH, PoolInfo, build_pool, pool_info, progress, queue, stored_pool
from retrieval.evaluation.querysets import QuerySet, get_query_set, import_queries, list_query_sets, sniff_format
from retrieval.evaluation.trec import QRELS_FILE, QUERIES_FILE, export_qrels
from retrieval.graph.runtime import KG
from retrieval.items import CHUNK_PREFIX
from retrieval.search.modes import MODES
from ui_text import clean, md_code, md_literal, reading, short, slug

RERANKERS = ("none", "graph", "mmr", "cross_encoder", "llm")
QUERY_FILE_TYPES = ["tsv", "txt", "jsonl", "ndjson", "json"]
MAX_QUERY_FILE_MB = 50  # far above any real query set (a query is at most 2,000 characters)


# --- query sets -----------------------------------------------------------------------------------------


def render_query_set_import(labels: Callable[[], LabelStore], key: str = "qs", permit: Permit | None = None, *,
                            max_queries: int | None = None) -> None:
    """Upload `queries.tsv` (query_id<TAB>text) or JSONL ({"id", "query"}) as a named set; validated whole first.
    The label store (`labels` opens it) opens only on Import, so a data directory it cannot open (read-only) leaves
    the page usable. `permit` (team mode: curators) is checked on the server before anything is stored."""
    st.markdown("#### Import a query set for labeling")
    if permit is not None and not permit.allowed:
        st.caption(md_literal(permit.refusal))
        return
    flash = st.session_state.pop(f"{key}-flash", None)
    if flash:
        st.success(flash, icon=":material/check:")
    upload = st.file_uploader("queries.tsv or JSONL", type=QUERY_FILE_TYPES, key=f"{key}-file",
                              max_upload_size=MAX_QUERY_FILE_MB,
                              help="TSV: query_id<TAB>query text per line. JSONL: {\"id\": …, \"query\": …} per line.")
    cols = st.columns([3, 1.2], vertical_alignment="bottom")
    stem = upload.name.rsplit(".", 1)[0] if upload is not None else ""
    name = cols[0].text_input("Set name", value=stem, key=f"{key}-name-{stem}", max_chars=100)
    replace = cols[1].checkbox("Replace", key=f"{key}-replace", help="Replace a set of this name (drops its pools)")
    if not st.button("Import query set", disabled=upload is None or not name.strip(), key=f"{key}-go",
                     icon=":material/upload:"):
        return
    assert upload is not None
    try:
        if permit is not None:
            permit.check(f"query set {name}")
        text = upload.getvalue().decode("utf-8-sig")
        store = labels()
        found = import_queries(store, text, name, replace=replace, fmt=sniff_format(text, upload.name),
                               max_queries=max_queries)
    except UnicodeDecodeError:
        st.error(f"{md_literal(upload.name)} is not UTF-8 text.", icon=":material/error:")
        return
    except RetrievalError as exc:
        st.error(md_literal(exc), icon=":material/error:")
        return
    if permit is not None:
        permit.record(f"query set {found.name}: {len(found.queries)} queries")
    st.session_state[f"{key}-flash"] = f"Imported query set **{md_literal(found.name)}**: {len(found.queries)} queries."
    st.rerun()  # the set pickers above list the new set


def choose_set(store: LabelStore) -> QuerySet | None:
    """The query set to work on (a URL parameter, so a reload keeps it)."""
    sets = {qs.name: n for qs, n in list_query_sets(store)}
    if not sets:
        return None
    raw = st.query_params.get("set")
    if raw is not None and raw not in sets:  # read before the widget is drawn: drawing it drops the bad value
        link_params.render([link_params.note("set", f"{md_code(f'set={raw}')} in the link names no query set here "
                                                    f"({', '.join(sets)}): {next(iter(sets))} is open.",
                                             next(iter(sets)))])
    name = st.selectbox("Query set", list(sets), key="set", bind="query-params",
                        format_func=lambda n: f"{n} · {sets[n]} queries")
    return get_query_set(store, name) if name else None


def current_pool(store: LabelStore, qset: QuerySet, version: str) -> PoolInfo | None:
    try:
        return pool_info(store, qset.name, version)
    except NotFoundError:
        return None


def render_pool(kg: KG, store: LabelStore, qset: QuerySet, unavailable: Mapping[str, str] | None = None,
                permit: Permit | None = None) -> None:
    """The set's pool on this graph version, and the form that (re)builds it: depth, modes, rerankers. A reranker
    in `unavailable` (name -> why) cannot run here: it is not pre-selected, and its option says so. `permit` (team
    mode's curators) is checked on the server before a pool is built."""
    unavailable = unavailable or {}
    info = current_pool(store, qset, kg.version)
    if info is None:
        st.info(f"**{md_literal(qset.name)}** has no pool on graph version {md_code(kg.version)} yet.",
                icon=":material/info:")
    else:
        st.markdown(f"Pool: **{info.items} items** over {info.queries} queries at depth {info.depth} · built "
                    f"{md_literal(info.created_at)} · systems: {md_literal(', '.join(info.systems))}")
        for w in info.warnings:
            st.caption(f":orange[{md_literal(w)}]")
    if permit is not None and not permit.allowed:
        st.caption(md_literal(permit.refusal))
        return
    cols = st.columns([1, 3, 2], vertical_alignment="bottom")
    depth = cols[0].number_input("Depth", 1, MAX_DEPTH, 10, key="pool-depth", help="Each system's top k per query")
    modes = cols[1].multiselect("Search modes", MODES, default=list(MODES), key="pool-modes")
    rerankers = cols[2].multiselect(
        "Rerankers (facts pool of 50)", RERANKERS, default=[r for r in RERANKERS[:4] if r not in unavailable],
        key="pool-rerankers", format_func=lambda r: f"{r} (cannot run here)" if r in unavailable else r,
        help="  \n".join([f"{r}: {md_literal(why)}" for r, why in unavailable.items()]
                         or ["Every reranker can run here"]))
    if st.button("Pool" if info is None else "Pool again", type="primary", key="pool-go", icon=":material/layers:",
                 disabled=not (modes or rerankers)):
        bar = st.progress(0.0, text="Pooling…")
        n = len(qset.queries)
        try:
            if permit is not None:
                permit.check(f"pool of {qset.name}")
            built = build_pool(store, kg, qset, int(depth), modes, rerankers,
                               progress=lambda i: bar.progress(i / n, text=f"Pooled {i} of {n} queries"))
        except RetrievalError as exc:
            st.error(f"Pooling failed: {md_literal(exc)}", icon=":material/error:")
            return
        bar.progress(1.0, text=f"Pooled {built.items} items over {built.queries} queries")
        st.rerun()  # the queue and progress read the new pool


# --- the queue ------------------------------------------------------------------------------------------


def queue_rows(store: LabelStore, qset: QuerySet, target: GradeTarget, reveal: bool) -> tuple[list[GradeRow], int]:
    """The annotator's queue as rows (query headers, blind unless `reveal`) and where they resume."""
    items = queue(store, qset.name, target.annotator or "", graph_version=target.graph_version, reveal=reveal)
    rows = []
    for n, it in enumerate(items):
        first = n == 0 or items[n - 1].query_id != it.query_id
        src = it.sources[0] if it.sources else None
        where = " › ".join(x for x in (src.original_document, src.chapter) if x) if src else ""
        systems = sorted((it.systems or {}).items(), key=lambda kv: (kv[1], kv[0]))
        rows.append(GradeRow(
            key=f"{it.query_id}|{it.item_id}", query=it.query, item_id=it.item_id,
            text=reading(it.text) if it.item_id.startswith(CHUNK_PREFIX) else it.text,
            rank=str(it.position + 1), head=f"{it.query_id} · {it.query}" if first else "", tags=(Tag(it.kind),),
            meta=where, scores=tuple((name, f"#{rank}") for name, rank in systems),
        ))
    start = next((n for n, it in enumerate(items) if it.grade is None), max(len(items) - 1, 0))
    return rows, start


def progress_frame(store: LabelStore, qset: QuerySet, target: GradeTarget) -> tuple[pd.DataFrame, int, int]:
    prog = progress(store, qset.name, target.annotator or "", graph_version=target.graph_version)
    frame = pd.DataFrame([{"query id": clean(q.query_id), "query": clean(short(q.query, 90)), "labeled": q.labeled,
                           "pooled": q.pooled} for q in prog.queries])
    return frame, prog.labeled, prog.pooled


def render_queue(store: LabelStore, qset: QuerySet, target: GradeTarget) -> None:
    """Progress (overall and per query), then the queue query by query, resuming at the first ungraded item."""
    if current_pool(store, qset, target.graph_version) is None:
        st.info("Pool this set first (tab **Query sets and pools**).", icon=":material/info:")
        return
    reveal = st.toggle("Reveal systems and ranks", key="reveal",
                       help="Off while grading, so which system found an item cannot bias its grade")
    key = f"queue-{slug(qset.name, 40, 'set')}-{target.graph_version}-{target.annotator}"
    rows, start = queue_rows(store, qset, target, reveal)
    apply_pending(rows, key, target)  # before the progress bar reads the labels
    frame, labeled, pooled = progress_frame(store, qset, target)
    who = md_literal(target.annotator) if target.annotator else "anonymous"
    st.progress(labeled / pooled if pooled else 0.0,
                text=f"**{labeled} of {pooled}** pooled items graded by {who} · {len(frame)} queries")
    with st.expander("Progress per query", icon=":material/checklist:"):
        st.dataframe(frame, hide_index=True, key="queue-progress", column_config={
            "labeled": st.column_config.ProgressColumn("labeled", format="%d", min_value=0,
                                                       max_value=int(frame["pooled"].max() or 1)),
        })
    render_grader(rows, key=key, target=target, start=start, height=620, own_only=True)


# --- agreement and adjudication ------------------------------------------------------------------------


def set_labels(store: LabelStore, qset: QuerySet, version: str) -> list[Label]:
    texts = set(qset.texts().values())
    return [lb for lb in store.all_labels(version) if lb.query_text in texts]


def agreement_report(store: LabelStore, qset: QuerySet, version: str) -> AgreementReport:
    try:
        _, items = stored_pool(store, qset.name, version)
    except NotFoundError:
        items = []
    texts = {(it.query, it.item_id): it.text for it in items}
    return agreement(set_labels(store, qset, version), version, texts=texts,
                     query_ids={q.text: q.query_id for q in qset.queries})


def pairs_frame(report: AgreementReport) -> pd.DataFrame:
    return pd.DataFrame([{"annotators": f"{clean(p.a)} · {clean(p.b)}", "items": p.items, "agreement": p.observed,
                          "Cohen's κ": p.kappa, "κ quadratic": p.weighted_kappa} for p in report.pairs])


def disagreement_rows(report: AgreementReport) -> list[GradeRow]:
    """Each disagreement as a row: the item, every annotator's grade, and what the adjudication rule gives."""
    return [GradeRow(
        key=f"{d.query_id}|{d.item_id}", query=d.query, item_id=d.item_id, text=d.text or d.item_id,
        head=f"{d.query_id} · {d.query}" if n == 0 or report.disagreements[n - 1].query != d.query else "",
        tags=(Tag("tie: unresolved", "orange") if d.resolved is None else Tag(f"rule gives {d.resolved}", "green"),),
        meta=d.item_id, scores=tuple((name, str(g)) for name, g in sorted(d.grades.items())),
    ) for n, d in enumerate(report.disagreements)]


def render_agreement(store: LabelStore, qset: QuerySet, version: str, permit: Permit | None = None) -> None:
    """Kappa per pair, Krippendorff's alpha over all, and each disagreement with an adjudication control (`permit`:
    team mode's admins; each decision is checked on the server, logged, and noted with who made it)."""
    key = f"adjudicate-{slug(qset.name, 40, 'set')}-{version}"
    target = GradeTarget(store, version, ADJUDICATED)
    if permit is not None and not permit.gate.identity.local:
        target = GradeTarget(store, version, ADJUDICATED if permit.allowed else None, problem=permit.refusal,
                             check=partial(adjudicated, permit), note=f"by {permit.gate.identity.key}")
    report = agreement_report(store, qset, version)
    if apply_pending(disagreement_rows(report), key, target):  # a decision just given changes what the rule gives
        report = agreement_report(store, qset, version)
    cols = st.columns(3)
    cols[0].metric("Annotators", len(report.annotators), border=True,
                   help=", ".join(report.annotators) or None)
    cols[1].metric("Items graded by two or more", report.items, border=True)
    alpha = report.alpha_ordinal
    cols[2].metric("Krippendorff's α (ordinal)", "undefined" if alpha is None else f"{alpha:.3f}", border=True,
                   help="All annotators at once; takes items not everyone graded")
    for note in report.notes:
        st.caption(md_literal(note))
    if report.pairs:
        fmt = {c: st.column_config.NumberColumn(c, format="%.3f") for c in ("agreement", "Cohen's κ", "κ quadratic")}
        st.dataframe(pairs_frame(report), hide_index=True, key="agree-pairs", column_config=fmt)
    st.markdown(f"**{len(report.disagreements)} disagreements** · grade one to record the adjudicated grade "
                f"(annotator {md_code(ADJUDICATED)}), which `eval-labels` and the export then use")
    render_grader(disagreement_rows(report), key=key, target=target, own_only=True, empty="No disagreements.")


def adjudicated(permit: Permit) -> None:
    """The server's check of one batch of decisions, logged when allowed (a refusal is logged by the check)."""
    permit.check()
    permit.record()


# --- export ---------------------------------------------------------------------------------------------


def qrels_text(labels: Sequence[Label], qset: QuerySet, include_ties: bool) -> tuple[str, str, int]:
    """(qrels, queries.tsv, label count) with the set's query ids, one grade per (query, item)."""
    chosen = resolve_labels(labels, include_ties=include_ties)[0] if include_ties else list(labels)
    qrels, queries = io.StringIO(), io.StringIO()
    n = export_qrels(chosen, qrels, queries, ids={q.text: q.query_id for q in qset.queries})
    return qrels.getvalue(), queries.getvalue(), n


def render_export(store: LabelStore, qset: QuerySet, version: str, only: str | None = None) -> None:
    """Download qrels + queries.tsv of one annotator, or adjudicated (the rule: decision, else consensus); `only`
    (team mode, not an admin): the signed-in annotator's own grades are the only single annotator offered."""
    labels = set_labels(store, qset, version)
    names = sorted({lb.annotator for lb in labels if lb.annotator != ADJUDICATED and only in (None, lb.annotator)})
    who = st.selectbox("Whose grades", ["(adjudicated)", *names], key="export-who",
                       format_func=lambda n: n or "(anonymous)",
                       help="adjudicated: the adjudication, else the only annotator's grade, else the median")
    ties = st.checkbox("Score even splits at the lower grade", key="export-ties", disabled=who != "(adjudicated)",
                       help="Otherwise an unadjudicated tie (e.g. 1 vs 3) is left out")
    chosen = labels if who == "(adjudicated)" else [lb for lb in labels if lb.annotator == who]
    qrels, queries, n = qrels_text(chosen, qset, ties and who == "(adjudicated)")
    stem = slug(f"{qset.name}-{who}", 60, "labels")
    st.caption(f"{n} judgements over {queries.count(chr(10))} queries on graph version {md_code(version)}")
    row = st.container(horizontal=True)
    row.download_button("qrels.txt", qrels.encode("utf-8"), file_name=f"{stem}.{QRELS_FILE}", mime="text/plain",
                        icon=":material/download:", disabled=not n, key="export-qrels")
    row.download_button("queries.tsv", queries.encode("utf-8"), file_name=f"{stem}.{QUERIES_FILE}",
                        mime="text/plain", icon=":material/download:", disabled=not n, key="export-queries")
    st.caption("Metrics with 95% bootstrap intervals and a paired test: the **Rerank Inspector**, or "
               + md_code("python -m retrieval eval-labels --k 5,10 --compare graph,vector"))
