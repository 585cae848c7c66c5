"""Rerank Inspector rendering: query form, what-if knobs, bump chart, grading list and table, metrics with
intervals and a paired test, qrels files."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from components import link_params
from components.annotator import current_annotator
from components.facts import fact_line, fact_text, where_of
from components.grader import GradeRow, GradeTarget, Tag, apply_pending, render_grader
from components.search_form import render_examples
from retrieval.access import Permit
from retrieval.errors import RetrievalError
from retrieval.evaluation.consensus import current_labels
from retrieval.evaluation.evaluate import EvalReport
from retrieval.evaluation.inspect import POOL_KINDS, Inspection, Pool, PoolKind, pool_kind_of
from retrieval.evaluation.labels import Label, LabelStore, make_label
from retrieval.evaluation.trec import QRELS_FILE, QUERIES_FILE, export_qrels, export_run, parse_qrels, parse_queries
from ui_text import clean, md_code, md_literal, short

POOL_HELP = {
    "facts": "KG retriever facts (PPR + traced paths), retrieved with rerank = none",
    "chunks": "Document chunks from hybrid BM25 + vector search, with both parts kept",
    "entities": "Entities by vector similarity, with PPR seeded on the hits",
}
PARAMS = (  # the page's bound widgets (components/link_params.py)
    link_params.Param("q", ""),
    link_params.choice("pool", list(POOL_KINDS), "facts", "a candidate pool", "the facts pool is inspected"),
    link_params.number("n", 5, 50, 30, integer=True, what="the pool holds 30 candidates"),
    link_params.number("alpha", 0.0, 1.0, 0.7, what="graph α uses 0.7"),
    link_params.number("lambda", 0.0, 1.0, 0.7, what="MMR λ uses 0.7"),
    link_params.number("tw", 0.0, 1.0, 0.3, what="text_weight uses 0.3"),
    link_params.number("k", 1, 50, 10, integer=True, what="the cutoff k uses 10"),
)
P = {p.key: p for p in PARAMS}
RERANKER_LABELS = {"none": "none", "graph": "graph α/β", "mmr": "MMR λ", "cross_encoder": "cross-enc.", "llm": "LLM"}
# Scores shown in the grid, in reading order, with their column titles.
SCORE_COLUMNS = {
    "similarity": "similarity",
    "ppr": "PPR",
    "path_semantic": "path sem.",
    "pagerank": "PageRank",
    "graph_alpha_term": "α·sim",
    "graph_beta_term": "β·PR",
    "graph_score": "graph score",
    "ce_score": "CE score",
    "mmr_score": "MMR score",
    "bm25": "BM25",
    "bm25_norm": "BM25 norm",
    "vector": "vector",
    "vector_norm": "vector norm",
    "hybrid": "hybrid",
}
CHART_HEIGHT = 380  # fixed, like the metrics panel beside it, so labeling never shifts the grid below
PANEL_HEIGHT = CHART_HEIGHT + 150
GRADE_COLORS = {"unlabelled": "#b7bfcc", "0": "#e07b67", "1": "#f0c05a", "2": "#7fb86a", "3": "#2f7d4a"}


@dataclass(frozen=True)
class InspectRequest:
    query: str
    kind: PoolKind
    size: int


@dataclass(frozen=True)
class WhatIf:
    alpha: float
    lambda_: float
    text_weight: float
    k: int


def take_carried_query() -> None:
    """The query Search's "Inspect the reranking" link carries as `?inspect=` (Search's own `q` is its bound
    box, which leaving Search clears from the URL) becomes this page's query."""
    carried = st.query_params.get("inspect")
    if carried is not None:
        del st.query_params["inspect"]
        st.session_state["q"] = carried[:2000]


def inspector_form(questions: Sequence[str]) -> InspectRequest:
    """Query, pool kind and pool size; each is a URL parameter, so Search can link here with `?q=`."""
    link_params.render([link_params.check(P[key]) for key in ("pool", "n")])
    cols = st.columns([6, 2.2, 1.1], vertical_alignment="bottom")
    query = cols[0].text_input(
        "Query", key="q", bind="query-params", placeholder="A question to inspect; press Enter",
        icon=":material/search:", max_chars=2000,
    )
    kind = cols[1].segmented_control(
        "Candidate pool", POOL_KINDS, key="pool", bind="query-params", default="facts", required=True,
        help="\n\n".join(f"**{k}**: {v}" for k, v in POOL_HELP.items()),
    )
    size = cols[2].number_input("Pool size", 5, 50, 30, 5, key="n", bind="query-params",
                                help="Candidates retrieved once, then re-ranked by every reranker")
    text = (query or "").strip()
    if not text:
        st.caption("Type a question, or open one from **Search** (its results link here with the same query).")
        if questions:
            render_examples(questions)
    return InspectRequest(text, kind or "facts", int(size))


def what_if(kind: PoolKind) -> WhatIf:
    """Sliders that re-rank the already retrieved pool (α + β = 1, so β follows α)."""
    link_params.render([link_params.check(P[key]) for key in ("alpha", "lambda", "tw", "k")])
    cols = st.columns([1.3, 1, 1, 0.7], gap="medium")
    alpha = cols[0].slider(
        "Graph α (similarity weight)", 0.0, 1.0, 0.7, 0.05, key="alpha", bind="query-params",
        help="graph_score = α·similarity + β·PageRank_norm, with β = 1 − α",
    )
    cols[0].caption(f"β (PageRank weight) = 1 − α = **{1 - alpha:.2f}**")
    lam = cols[1].slider("MMR λ (relevance vs. diversity)", 0.0, 1.0, 0.7, 0.05, key="lambda",
                         bind="query-params", help="λ·relevance − (1−λ)·max similarity to the facts already picked")
    tw = cols[2].slider(
        "text_weight (BM25 share)", 0.0, 1.0, 0.3, 0.05, key="tw", bind="query-params", disabled=kind != "chunks",
        help="Chunks pool only: hybrid = text_weight·BM25_norm + (1 − text_weight)·vector_norm, re-fused in place",
    )
    k = cols[3].number_input("Cutoff k", 1, 50, 10, key="k", bind="query-params", help="nDCG@k, P@k, Recall@k")
    return WhatIf(float(alpha), float(lam), float(tw), int(k))


def trace_line(retrievals: int, reranks: int, pool: Pool, inspection: Inspection) -> str:
    """The trace the analyst (and the browser test) reads: retrievals stay put while re-ranks grow."""
    timing = " · ".join(f"{RERANKER_LABELS.get(n, n)} {ms:.0f} ms" for n, ms in inspection.ms.items())
    return (
        f"retrievals: {retrievals} · re-ranks: {reranks} · pool: {len(pool.candidates)} {pool.kind} · "
        f"pool retrieved in {pool.ms:.0f} ms, then cached · re-rank {timing}"
    )


def render_notes(notes: Sequence[str], inspection: Inspection, pool: Pool) -> None:
    """What this configuration leaves out (rerankers it cannot run) said once, in one box; warnings only for what
    changed this pool or an order (a retrieval or a reranker that degraded)."""
    if notes:
        st.info("  \n".join(md_literal(n) for n in notes), icon=":material/info:")
    lines = [*pool.warnings]
    lines += [f"{RERANKER_LABELS.get(n, n)}: {w}" for n, ws in inspection.warnings.items() for w in ws]
    for line in lines:
        st.warning(md_literal(line), icon=":material/warning:")


def _grade_name(label: Label | None) -> str:
    return str(label.grade) if label is not None else "unlabelled"


def bump_frame(inspection: Inspection, labels: Mapping[str, Label], k: int) -> pd.DataFrame:
    """One row per (candidate, reranker) for the candidates in any reranker's top k."""
    ranks = inspection.ranks()
    pool_rank = {c.id: i for i, c in enumerate(inspection.candidates, start=1)}
    texts = {c.id: clean(fact_line(c)) for c in inspection.candidates}
    shown = [c.id for c in inspection.candidates if any(r.get(c.id, 10**9) <= k for r in ranks.values())]
    rows = [
        {"reranker": RERANKER_LABELS.get(name, name), "rank": by_id[cid], "candidate": f"#{pool_rank[cid]}",
         "text": short(texts[cid], 90), "grade": _grade_name(labels.get(cid))}
        for name, by_id in ranks.items()
        for cid in shown if cid in by_id
    ]
    return pd.DataFrame(rows, columns=["reranker", "rank", "candidate", "text", "grade"])


def bump_chart(frame: pd.DataFrame, order: Sequence[str], k: int) -> alt.LayerChart:
    """x = reranker, y = rank (1 on top), one line per candidate, coloured by its grade; dashed line at k."""
    x = alt.X("reranker:N", sort=list(order), title=None, axis=alt.Axis(labelAngle=0, labelFontSize=12, orient="top"))
    y = alt.Y("rank:Q", scale=alt.Scale(reverse=True, domainMin=1, nice=False, zero=False), title="rank")
    color = alt.Color("grade:N", scale=alt.Scale(domain=list(GRADE_COLORS), range=list(GRADE_COLORS.values())),
                      legend=alt.Legend(title="grade", orient="bottom", direction="horizontal"))
    tooltip = ["candidate", "text", "reranker", "rank", "grade"]
    base = alt.Chart(frame)
    lines = base.mark_line(strokeWidth=2.2, opacity=0.8).encode(x=x, y=y, color=color, detail="candidate:N")
    dots = base.mark_circle(size=70, opacity=1).encode(x=x, y=y, color=color, tooltip=tooltip)
    first = frame[frame["reranker"] == order[0]] if len(order) else frame.iloc[:0]
    names = alt.Chart(first).mark_text(align="right", dx=-9, fontSize=11, color="#4a5468").encode(
        x=x, y=y, text="candidate:N", tooltip=tooltip
    )
    cut = alt.Chart(pd.DataFrame({"rank": [k + 0.5]})).mark_rule(strokeDash=[4, 4], color="#8a93a6").encode(y="rank:Q")
    return (cut + lines + dots + names).properties(height=CHART_HEIGHT)


def order_line(inspection: Inspection, n: int = 5) -> str:
    """`top 5 · none #1 #2 … · graph α/β #6 #1 …`: each reranker's head, by retrieval position."""
    pool_rank = {c.id: i for i, c in enumerate(inspection.candidates, start=1)}
    heads = [
        f"{RERANKER_LABELS.get(name, name)} " + " ".join(f"#{pool_rank[cid]}" for cid in order[:n] if cid in pool_rank)
        for name, order in inspection.orders.items()
    ]
    return f"top {n} · " + " · ".join(heads)


def render_bump(inspection: Inspection, labels: Mapping[str, Label], k: int) -> None:
    st.markdown(f"**Rank movement** · candidates in any reranker's top {k}, by retrieval position #")
    frame = bump_frame(inspection, labels, k)
    if frame.empty:
        st.info("No candidates to chart.")
        return
    order = [RERANKER_LABELS.get(n, n) for n in inspection.orders]
    st.altair_chart(bump_chart(frame, order, k), width="stretch")
    st.caption(order_line(inspection), help="Each reranker's first five candidates, by their retrieval position #")


def inspector_frame(inspection: Inspection, labels: Mapping[str, Label], *, none_rank: bool = False) -> pd.DataFrame:
    """The pool as listed (retrieval order): grade and note (editable), rank and movement per reranker, every
    score. `none_rank` adds the "none" rank, which differs from the listing when text_weight re-fuses chunks."""
    ranks = inspection.ranks()
    present = {key for c in inspection.candidates for key in c.scores}
    rows = []
    for i, c in enumerate(inspection.candidates, start=1):
        label = labels.get(c.id)
        row: dict[str, Any] = {
            "#": i, "candidate": clean(fact_line(c)), "grade": label.grade if label else None,
            "note": label.note if label else "",
        }
        for name, by_id in ranks.items():
            if name == "none" and not none_rank:
                continue
            r = by_id.get(c.id)
            row[f"rank:{name}"] = r
            if name != "none":
                row[f"move:{name}"] = (ranks["none"].get(c.id, i) - r) if r is not None and "none" in ranks else None
        row.update({key: c.scores.get(key) for key in SCORE_COLUMNS if key in present})
        row["type"] = c.type
        row["id"] = clean(c.id)
        rows.append(row)
    frame = pd.DataFrame(rows)
    # Fixed dtypes: the editor's identity follows the schema, so a first grade (None -> int) must not
    # turn the column into another type and remount the grid (which loses the analyst's place).
    types = {c: "Int64" for c in frame.columns if c in ("#", "grade") or c.startswith(("rank:", "move:"))}
    types |= {c: "float64" for c in frame.columns if c in SCORE_COLUMNS}
    types |= {c: "string" for c in ("candidate", "note", "type", "id") if c in frame.columns}
    return frame.astype(types)


def _column_config(frame: pd.DataFrame) -> dict[str, Any]:
    config: dict[str, Any] = {
        "#": st.column_config.NumberColumn("#", width=40, pinned=True, help="Retrieval order (no rerank)"),
        "candidate": st.column_config.TextColumn("candidate", width=380, pinned=True, help="Widen or hover to read"),
        "grade": st.column_config.NumberColumn(
            "grade", format="%d", width=60, pinned=True,
            help="Relevance 0–3, as graded in the list above (yours, else the resolved grade)",
        ),
        "note": st.column_config.TextColumn("note", width=150, help="Optional note, saved with the grade"),
        "type": st.column_config.TextColumn("type", width=70),
        "id": st.column_config.TextColumn("item id", width=160),
    }
    for col in frame.columns:
        if col.startswith("rank:"):
            name = col.split(":", 1)[1]
            config[col] = st.column_config.NumberColumn(RERANKER_LABELS.get(name, name), format="%d", width=70,
                                                        help=f"Rank under {name}")
        elif col.startswith("move:"):
            name = col.split(":", 1)[1]
            config[col] = st.column_config.NumberColumn("Δ", format="%+d", width=44,
                                                        help=f"Places moved up (+) or down (−) under {name}")
        elif col in SCORE_COLUMNS:
            config[col] = st.column_config.NumberColumn(SCORE_COLUMNS[col], format="%.3f", width=78)
    return config


@dataclass(frozen=True)
class LabelTarget:
    """What one grid edits: a query's labels on one graph version."""

    store: LabelStore
    query: str
    graph_version: str
    ids: tuple[str, ...]
    base: dict[str, tuple[int | None, str]]  # item id -> stored (grade, note)

    @classmethod
    def of(cls, store: LabelStore, inspection: Inspection, labels: Mapping[str, Label], version: str) -> LabelTarget:
        """The grid's rows (as listed) and the labels stored for them when the grid was drawn."""
        return cls(store, inspection.query, version, tuple(c.id for c in inspection.candidates),
                   {i: (lb.grade, lb.note) for i, lb in labels.items()})


@dataclass(frozen=True)
class LabelChanges:
    """What one grid edit asks of the store."""

    put: list[Label]
    delete: list[str]
    problems: list[str]


def label_changes(
    edited: Mapping[int | str, Mapping[str, Any]],
    done: Mapping[int, Mapping[str, Any]],
    target: LabelTarget,
    annotator: str,
) -> LabelChanges:
    """The rows whose edit differs from the last one saved: labels to write, items to unlabel, problems.

    Only rows touched since the last save are written, so a stale grid never overwrites a label that
    another session changed meanwhile.
    """
    put: list[Label] = []
    delete: list[str] = []
    problems: list[str] = []
    for raw_row, delta in edited.items():
        row = int(raw_row)
        if done.get(row) == delta or not 0 <= row < len(target.ids):
            continue
        item = target.ids[row]
        stored_grade, stored_note = target.base.get(item, (None, ""))
        grade = delta.get("grade", stored_grade)
        note = str(delta.get("note", stored_note) or "")
        if grade is None or pd.isna(grade):
            if stored_grade is not None:
                delete.append(item)
            elif note:
                problems.append(f"row {row + 1}: a note is saved with a grade; give the row a grade 0–3")
            continue
        try:
            put.append(make_label(target.query, item, int(grade), graph_version=target.graph_version,
                                  note=note, annotator=annotator))
        except (RetrievalError, ValueError) as exc:
            problems.append(f"row {row + 1}: {exc}")
    return LabelChanges(put, delete, problems)


def _save_edits(key: str, target: LabelTarget) -> None:
    """on_change of the grid (runs before the script, so every table of this run sees the new labels)."""
    edited = st.session_state[key].get("edited_rows", {})
    annotator = current_annotator()
    if annotator is None:
        st.session_state["rerank-flash"] = "Notes not saved: the annotator name in the sidebar is not valid."
        return
    changes = label_changes(edited, st.session_state.get(f"{key}:done", {}), target, annotator)
    try:
        if changes.put:
            target.store.put_labels(changes.put)
        for item in changes.delete:
            target.store.delete_label(target.query, item, target.graph_version, annotator=annotator)
    except RetrievalError as exc:
        st.session_state["rerank-flash"] = f"Labels not saved: {exc}"
        return
    st.session_state[f"{key}:done"] = {int(r): dict(d) for r, d in edited.items()}
    if changes.problems:
        st.session_state["rerank-flash"] = "; ".join(changes.problems)
    saved = len(changes.put) + len(changes.delete)
    if saved:
        st.session_state["rerank-toast"] = f"Saved {saved} label{'s' if saved > 1 else ''}"


def candidate_rows(inspection: Inspection, none_rank: bool = False) -> list[GradeRow]:
    """The pool as listed (retrieval order) for the grading list: each reranker's rank with its movement, then
    every score (the same figures the table below holds)."""
    ranks = inspection.ranks()
    rows = []
    for i, c in enumerate(inspection.candidates, start=1):
        chips: list[tuple[str, str]] = []
        for name, by_id in ranks.items():
            r = by_id.get(c.id)
            if r is None or (name == "none" and not none_rank):
                continue
            move = ranks["none"].get(c.id, i) - r if name != "none" and "none" in ranks else 0
            chips.append((RERANKER_LABELS.get(name, name), f"#{r}" + (f" {'▲' if move > 0 else '▼'}{abs(move)}"
                                                                       if move else "")))
        chips += [(SCORE_COLUMNS[k], f"{c.scores[k]:.3f}") for k in SCORE_COLUMNS if k in c.scores]
        rows.append(GradeRow(key=c.id, query=inspection.query, item_id=c.id, text=fact_text(c), rank=f"#{i}",
                             tags=(Tag(c.type),), meta=where_of(c), scores=tuple(chips)))
    return rows


def apply_grades(inspection: Inspection, grader: GradeTarget, key: str) -> None:
    """Store grades the list has not had acknowledged yet, before the metrics above it read the labels."""
    apply_pending(candidate_rows(inspection), f"grade-grid-{key}", grader)


def render_candidates(
    inspection: Inspection, grader: GradeTarget, labels: Mapping[str, Label], key: str, *, none_rank: bool = False,
) -> None:
    """The candidates as a grading list (keys or buttons; each grade stored at once), then the same pool as a
    sortable table of every rank and score, where notes can be added to your graded rows."""
    own = {i: lb for i, lb in labels.items() if lb.annotator == grader.annotator}
    table = LabelTarget.of(grader.store, inspection, own, grader.graph_version)
    flash = st.session_state.pop("rerank-flash", None)
    if flash:
        st.error(md_literal(flash), icon=":material/error:")
    toast = st.session_state.pop("rerank-toast", None)
    if toast:
        st.toast(toast, icon=":material/check:")
    graded = sum(1 for c in inspection.candidates if c.id in labels)
    st.markdown(f"**Candidates** · {graded} of {len(inspection.candidates)} graded · "
                "# is the retrieval position; each reranker's rank (▲▼ places moved), then every score")
    render_grader(candidate_rows(inspection, none_rank), key=f"grade-{key}", target=grader, height=640)
    with st.expander("Table: every rank and score (sortable); notes on graded candidates", icon=":material/table:"):
        frame = inspector_frame(inspection, labels, none_rank=none_rank)
        st.data_editor(
            frame,
            key=key,
            hide_index=True,
            column_config=_column_config(frame),
            disabled=[c for c in frame.columns if c != "note"],
            on_change=_save_edits,
            args=(key, table),
            height=min(38 + 35 * len(frame), 640),
            row_height=35,
        )


def _name(measure: str) -> str:
    return "MRR" if measure == "RR" else measure


def metrics_frames(report: EvalReport) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(means: reranker x measure, lift: reranker x measure as the difference from "none")."""
    means = pd.DataFrame(
        [{"reranker": RERANKER_LABELS.get(m.reranker, m.reranker), **{_name(k): m.values[k] for k in report.measures}}
         for m in report.means]
    )
    lift: dict[str, dict[str, Any]] = {}
    for lf in report.lift:
        lift.setdefault(lf.reranker, {"reranker": RERANKER_LABELS.get(lf.reranker, lf.reranker)})[
            _name(lf.measure)
        ] = lf.delta
    return means, pd.DataFrame(list(lift.values()))


def headline(report: EvalReport) -> str:
    """`nDCG@k: none 0.61 · graph 0.70 (+0.09) …`: the one number an analyst reads first."""
    measure = report.measures[0]
    base = next((m.values[measure] for m in report.means if m.reranker == report.baseline), None)
    parts = []
    for m in report.means:
        value = m.values[measure]
        delta = f" ({value - base:+.3f})" if base is not None and m.reranker != report.baseline else ""
        parts.append(f"{RERANKER_LABELS.get(m.reranker, m.reranker)} {value:.3f}{delta}")
    return f"{measure}: " + " · ".join(parts)


def _number_config(frame: pd.DataFrame, fmt: str, help: str | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {"reranker": st.column_config.TextColumn("reranker", width=96)}
    for col in frame.columns[1:]:
        config[col] = st.column_config.NumberColumn(col, format=fmt, width=80, help=help)
    return config


def intervals_frame(report: EvalReport) -> pd.DataFrame:
    """Per system: its still-unjudged top-k items, and the 95% bootstrap interval over queries of each mean."""
    rows = []
    for sys in report.systems:
        row: dict[str, Any] = {"reranker": RERANKER_LABELS.get(sys.system, sys.system)}
        row |= {f"unjudged@{k}": f"{n} of {sys.ranked[k]}" for k, n in sys.unjudged.items()}
        row |= {_name(m): f"[{e.ci_low:.3f}, {e.ci_high:.3f}]" for m, e in sys.metrics.items()}
        rows.append(row)
    return pd.DataFrame(rows)


def render_metrics(report: EvalReport, title: str, key: str, empty: str) -> None:
    """Mean metrics per reranker with their bootstrap intervals and unjudged counts, then the lift of each over
    "none" (trec_eval measures via ir-measures)."""
    n = max((m.n_queries for m in report.means), default=0)
    st.markdown(f"**{title}** · {n} scored quer{'y' if n == 1 else 'ies'}")
    if n == 0:
        st.info(empty, icon=":material/info:")
        return
    means, lift = metrics_frames(report)
    st.caption(headline(report))
    st.dataframe(means, hide_index=True, column_config=_number_config(means, "%.3f"), key=key)
    st.caption(f"Unjudged: top-k items nobody has graded yet · 95% bootstrap interval of each mean over queries "
               f"(B={report.bootstrap})" + (" (one query: no spread to resample)" if n == 1 else ""))
    st.dataframe(intervals_frame(report), hide_index=True, key=f"{key}-ci")
    if not lift.empty:
        st.caption("Lift over no rerank (difference of means)")
        st.dataframe(lift, hide_index=True, key=f"{key}-lift",
                     column_config=_number_config(lift, "%+.3f", "reranker mean − none mean"))


def compare_choice(names: Sequence[str]) -> tuple[str, str] | None:
    """Two rerankers to test against each other (default: graph vs none)."""
    if len(names) < 2:
        return None
    cols = st.columns(2)
    a = cols[0].selectbox("Compare", names, index=names.index("graph") if "graph" in names else 1, key="cmp-a",
                          format_func=lambda n: RERANKER_LABELS.get(n, n))
    b = cols[1].selectbox("against", names, index=0, key="cmp-b", format_func=lambda n: RERANKER_LABELS.get(n, n))
    return (a, b) if a != b else None


def comparison_frame(report: EvalReport) -> pd.DataFrame:
    return pd.DataFrame([
        {"measure": _name(c.measure), "A": c.mean_a, "B": c.mean_b, "A − B": c.delta,
         "95% CI of A − B": f"[{c.ci_low:+.3f}, {c.ci_high:+.3f}]", "p": c.p_value,
         "p < 0.05": "yes" if c.p_value < 0.05 else "no"}
        for c in report.comparisons
    ])


def render_comparison(report: EvalReport) -> None:
    """The paired test of the two chosen rerankers, per measure."""
    if not report.comparisons:
        st.caption("Choose two different rerankers to test them against each other.")
        return
    first = report.comparisons[0]
    a, b = (RERANKER_LABELS.get(x, x) for x in (first.a, first.b))
    st.caption(f"A = {md_literal(a)}, B = {md_literal(b)}: {first.test} over {first.n_queries} scored "
               f"quer{'y' if first.n_queries == 1 else 'ies'}")
    st.dataframe(comparison_frame(report), hide_index=True, key="m-compare", column_config={
        c: st.column_config.NumberColumn(c, format="%+.3f" if c == "A − B" else "%.3f") for c in ("A", "B", "A − B")
    } | {"p": st.column_config.NumberColumn("p", format="%.4f", help="two-sided paired randomization test")})


def render_per_query(report: EvalReport, measure: str) -> None:
    """One row per labelled query, one column per reranker, for one measure."""
    for skipped in report.skipped_queries:
        st.caption(f"Not scored (no grade ≥ 1): {md_literal(short(skipped, 120))}")
    if not report.per_query:
        return
    rows: dict[str, dict[str, Any]] = {}
    for scores in report.per_query:
        row = rows.setdefault(scores.query, {"query": clean(scores.query)})
        row[RERANKER_LABELS.get(scores.reranker, scores.reranker)] = scores.values.get(measure)
    frame = pd.DataFrame(list(rows.values()))
    cols = {c: st.column_config.NumberColumn(c, format="%.3f", width=86) for c in frame.columns if c != "query"}
    st.caption(f"{measure} per query")
    st.dataframe(frame, hide_index=True, column_config={"query": st.column_config.TextColumn("query", width=420),
                                                         **cols})


def render_all_queries(report: EvalReport, k: int) -> None:
    """Means, intervals and lift over every labelled query of this pool (left); the paired test of the chosen
    rerankers and nDCG@k per query (right)."""
    means, per_query = st.columns([2, 3], gap="large")
    with means:
        render_metrics(report, "Mean over labelled queries", "m-all", "No query of this pool is graded yet.")
    with per_query:
        if any(m.n_queries for m in report.means):
            render_comparison(report)
        render_per_query(report, f"nDCG@{k}")


def labels_of_kind(labels: Sequence[Label], kind: PoolKind) -> list[Label]:
    return [lb for lb in labels if pool_kind_of(lb.item_id) == kind]


def runs_zip(runs: Mapping[str, Mapping[str, Sequence[str]]]) -> bytes:
    """A zip of TREC run files, one per reranker (`run.<name>.txt`)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, ranking in runs.items():
            text = io.StringIO()
            export_run(ranking, text, name)
            zf.writestr(f"run.{name}.txt", text.getvalue())
    return buf.getvalue()


def qrels_files(labels: Sequence[Label]) -> tuple[str, str]:
    qrels, queries = io.StringIO(), io.StringIO()
    export_qrels(current_labels(labels), qrels, queries)
    return qrels.getvalue(), queries.getvalue()


def render_exchange(store: LabelStore, graph_version: str, runs: Mapping[str, Mapping[str, Sequence[str]]],
                    permit: Permit | None = None) -> None:
    """Download qrels + queries.tsv and the runs; import qrels (validated whole before anything is written; `permit`,
    team mode's curators, checked on the server first)."""
    labels = store.all_labels(graph_version)
    qrels, queries = qrels_files(labels)
    st.caption(f"{len(labels)} labels on graph version {md_code(graph_version)} · TREC files for trec_eval, "
               "ir-measures or ranx")
    row = st.container(horizontal=True, vertical_alignment="center")
    row.download_button("qrels.txt", qrels.encode("utf-8"), file_name=QRELS_FILE, mime="text/plain",
                        icon=":material/download:", disabled=not labels, help="query_id 0 item_id grade")
    row.download_button("queries.tsv", queries.encode("utf-8"), file_name=QUERIES_FILE, mime="text/plain",
                        icon=":material/download:", disabled=not labels, help="query_id<TAB>query text")
    row.download_button("runs.zip", runs_zip(runs), file_name="runs.zip", mime="application/zip",
                        icon=":material/download:", disabled=not runs, help="One TREC run file per reranker")
    if permit is not None and not permit.allowed:
        row.caption(md_literal(permit.refusal))
        return
    with row.popover("Import qrels", icon=":material/upload:"):
        qfile = st.file_uploader("qrels (query_id 0 item_id grade)", type=["txt", "qrels"], key="imp-qrels")
        tfile = st.file_uploader("queries.tsv (query_id<TAB>text)", type=["tsv", "txt"], key="imp-queries")
        if st.button("Import", disabled=qfile is None or tfile is None, key="imp-go", icon=":material/upload:"):
            assert qfile is not None and tfile is not None
            try:
                if permit is not None:
                    permit.check(f"qrels {qfile.name}")
                texts = parse_queries(tfile.getvalue().decode("utf-8-sig"), tfile.name)
                rows = parse_qrels(qfile.getvalue().decode("utf-8-sig"), qfile.name, texts)
                annotator = current_annotator() or "import"
                n = store.put_labels([make_label(q, item, g, graph_version=graph_version, annotator=annotator)
                                      for q, item, g in rows])
            except (RetrievalError, UnicodeDecodeError) as exc:
                st.error(md_literal(exc), icon=":material/error:")
            else:
                if permit is not None:
                    permit.record(f"qrels {qfile.name}: {n} labels")
                st.session_state["rerank-toast"] = f"Imported {n} labels"
                st.rerun()  # every table above reads the store again
