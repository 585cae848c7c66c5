"""Search trace: warnings, query decomposition, seeds and destinations, traced paths and stage timings."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from retrieval.graph.traverse import chain, path_steps
from retrieval.models import Entity, EvidenceStrength, SearchResult, SemanticPath, StageTiming
from ui_text import esc, md_code, md_literal, short


def total_ms(result: SearchResult) -> float:
    """The search's own total when it timed one (stage `total`), else the sum of its stages."""
    total = next((t.ms for t in result.timings if t.stage == "total"), None)
    return total if total is not None else sum(t.ms for t in result.timings)


def strength_text(strength: EvidenceStrength | None) -> str:
    """`Evidence strength 0.31 (best relation 0.37, chunk 0.54, entity 0.02) against the threshold 0.50.`"""
    if strength is None:
        return ""
    parts = ", ".join(f"{name} {value:.2f}" for name, value in strength.signals.items())
    text = f"Evidence strength {strength.score:.2f} (best {parts}) against the threshold {strength.threshold:.2f}"
    return text + ("." if strength.applied else " — not applied: calibrated for another embedding model.")


def render_warnings(warnings: Sequence[str]) -> None:
    for w in warnings:
        st.warning(md_literal(w), icon=":material/warning:")


def timings_chart(timings: Sequence[StageTiming]) -> str:
    """Horizontal bars, one per stage, in execution order, as plain HTML (escaped labels, no script): a chart
    library's JavaScript would be fetched and compiled on an analyst's first search."""
    top = max((t.ms for t in timings), default=0.0) or 1.0
    rows = "".join(
        f'<div class="kg-bar"><span class="kg-stage">{esc(short(t.stage, 32))}</span>'
        f'<span class="kg-track"><span style="width:{100 * t.ms / top:.1f}%"></span></span>'
        f'<span class="kg-ms">{t.ms:.1f} ms</span></div>'
        for t in timings
    )
    return f"<style>{_BAR_CSS}</style><div class='kg-bars'>{rows}</div>"


_BAR_CSS = (
    ".kg-bars{font-size:13px;margin:4px 0 8px}.kg-bar{display:flex;align-items:center;gap:8px;height:24px}"
    ".kg-stage{flex:0 0 150px;text-align:right;color:#3d4656;overflow:hidden;white-space:nowrap}"
    ".kg-track{flex:1 1 auto;height:16px}.kg-track span{display:block;height:100%;min-width:1px;"
    "background:#3557c7;border-radius:0 3px 3px 0}.kg-ms{flex:0 0 80px;color:#1d2433}"
)


def path_text(path: SemanticPath) -> str:
    """`A —REL→ B ←REL2— C` as literal Markdown: each arrow the way its relation runs, as the facts show it."""
    nodes = [path.source_node, *path.intermediate_nodes, path.destination_node]
    return md_literal(chain(path_steps(nodes, path.edges)))


def _entity_list(ids: Sequence[str], by_id: dict[str, Entity]) -> str:
    items = []
    for i in ids:
        e = by_id.get(i)
        items.append(f"- {md_literal(e.name)} · _{md_literal(e.type)}_" if e else f"- {md_literal(i)}")
    return "\n".join(items) or "_none_"


def render_trace(result: SearchResult) -> None:
    """Everything the retriever did for this result, top to bottom."""
    render_warnings(result.warnings)
    if result.evidence_strength is not None:
        st.caption(strength_text(result.evidence_strength))
    d = result.decomposition
    if d is not None:
        kind = "relationship query" if d.is_relationship_query else "simple query"
        st.markdown(f"**Decomposition** · `{d.method}` · {kind} · {d.hops} hop{'s' if d.hops != 1 else ''}")
        left, right = st.columns(2)
        with left:
            st.markdown("Local (entity) sub-queries")
            st.markdown("\n".join(f"- {md_literal(q)}" for q in d.local_queries) or "_none_")
        with right:
            st.markdown("Global (relation) sub-queries")
            st.markdown("\n".join(f"- {md_literal(q)}" for q in d.global_queries) or "_none_")
        if d.entity_mentions:
            st.caption("Entity mentions: " + " · ".join(md_literal(m) for m in d.entity_mentions))
    by_id = {n.id: n for n in result.subgraph.nodes}
    left, right = st.columns(2)
    with left:
        st.markdown(f"**Seed entities** ({len(result.seed_ids)})")
        st.markdown(_entity_list(result.seed_ids, by_id))
    with right:
        st.markdown(f"**PPR destinations** ({len(result.destination_ids)})")
        st.markdown(_entity_list(result.destination_ids[:12], by_id))
    if result.paths:
        st.markdown(f"**Traced paths** ({len(result.paths)})")
        lines = [f"- {path_text(p)} · PPR {p.ppr_score:.3f} · semantic {p.path_semantic_score:.3f}"
                 for p in result.paths]
        st.markdown("\n".join(lines[:10]))
        if len(lines) > 10:  # every path the header counts is listed; the rest folded
            with st.expander(f"{len(lines) - 10} more traced paths"):
                st.markdown("\n".join(lines[10:]))
    if result.timings:
        stages = [t for t in result.timings if t.stage != "total"]
        st.markdown(f"**Timings** · {total_ms(result):.0f} ms end to end, {len(stages)} stages "
                    "(local and global run in parallel)")
        st.html(timings_chart(stages))
    st.caption(f"graph version {md_code(result.graph_version or '?')}")
