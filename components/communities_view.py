"""Communities page widgets: the list by level and rank, one community's report beside its subgraph, and the
communities and claims of one entity (`?entity=ID`). Every choice is a URL parameter; a bad one is named."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from components import link_params
from components.graph_view import GraphMarks, Legend, render_graph
from retrieval.graph.communities import CommunityIndex, claim_text
from retrieval.graph.runtime import KG
from retrieval.models import Claim, Community, Entity, Subgraph
from ui_records import LiveGraph
from ui_text import clean, md_code, md_literal, short

ALL = "all"
PARAMS = (link_params.Param("level", ALL),)  # the page's bound widget (its valid levels are the graph's own)
MAX_DRAWN = 150  # members drawn (the most connected inside the community first)
MAX_EDGES = 2000  # relations fetched for the drawing
LEGEND = Legend(focus="● orange: the entity you came from")


def level_picker(index: CommunityIndex) -> int | None:
    """`?level=` bound selectbox: all levels or one; a level the graph does not have is named in a warning."""
    options = [ALL, *map(str, index.levels)]
    raw = st.query_params.get("level")
    if raw is not None and raw not in options:  # read before the widget is drawn: drawing it drops the bad value
        link_params.render([link_params.note("level", f"{md_code(f'level={raw}')} in the link is not a level of "
                                                      f"this graph ({', '.join(options[1:]) or 'none'}): all levels "
                                                      "are listed.", ALL)])
    value = st.selectbox("Level", options, key="level", bind="query-params",
                         help="0 = the top of the hierarchy; higher levels split a community into smaller ones")
    return None if value in (None, ALL) else int(value)


def frame(rows: list[Community]) -> pd.DataFrame:
    """The list's rows; the rank column only where the communities have one (computed ones have no LLM rank)."""
    ranked = any(c.rank is not None for c in rows)
    columns = ["id", "level", "title", *(["rank"] if ranked else []), "entities", "relations", "parent", "source"]
    return pd.DataFrame(
        [{"id": c.id, "level": c.level, "title": clean(short(c.title, 120)), "rank": c.rank, "entities": c.size,
          "relations": len(c.relation_ids), "parent": c.parent or "", "source": c.source} for c in rows],
        columns=columns,
    )


def community_list(index: CommunityIndex, level: int | None) -> Community | None:
    """The communities by level and rank; the picked row (or `?community=`) is opened and named in the URL."""
    rows = index.ranked(level)
    wanted = st.query_params.get("community")
    if wanted is not None and wanted not in index.by_id:
        link_params.render([link_params.note("community", f"{md_code(f'community={wanted}')} in the link names no "
                                                          "community of this graph.", None)])
        st.query_params.pop("community")
        wanted = None
    at = [i for i, c in enumerate(rows) if c.id == wanted]
    event = st.dataframe(
        frame(rows), hide_index=True, on_select="rerun", selection_mode="single-row",
        key=f"c-list-{level}-{wanted}", selection_default={"selection": {"rows": at}} if at else None,
        height=min(38 + 35 * len(rows), 320),
        column_config={"id": st.column_config.TextColumn(width=50), "level": st.column_config.NumberColumn(width=50),
                       "title": st.column_config.TextColumn(width=420),
                       "rank": st.column_config.NumberColumn(format="%.1f", width=60,
                                                             help="GraphRAG's LLM-rated importance (0-10)")},
    )
    picked = list(event.selection.rows) if hasattr(event, "selection") else []
    if picked and picked[0] < len(rows):
        st.query_params["community"] = rows[picked[0]].id
        return rows[picked[0]]
    if wanted is not None and not at:  # named in the URL but filtered out by the level: still open it
        return index.by_id[wanted]
    st.query_params.pop("community", None)
    return None


def _names(kg: KG, ids: list[str]) -> dict[str, str]:
    return {e.id: e.name for e in kg.graph.get_entities(ids, chunks=False)} if ids else {}


def render_claims(claims: list[Claim], names: dict[str, str]) -> None:
    if not claims:
        return
    st.markdown(f"**Claims** ({len(claims)})")
    for claim in claims:
        st.markdown("- " + md_literal(claim_text(claim, names)))


def render_unattached(index: CommunityIndex) -> None:
    """Claims whose subject is no entity of the graph (the ingest warning says they are listed here)."""
    loose = index.unattached_claims
    if loose:
        with st.expander(f"Claims without an entity ({len(loose)})", icon=":material/help:"):
            st.caption("Their subject names no entity of this graph; they are kept as the import gave them.")
            render_claims(loose, {})


def render_entity(kg: KG, index: CommunityIndex) -> str | None:
    """`?entity=ID`: that entity's communities (links that open them) and its claims; returns the id shown."""
    eid = st.query_params.get("entity")
    if eid is None:
        return None
    found: list[Entity] = kg.graph.get_entities([eid], chunks=False)
    if not found:
        link_params.render([link_params.note("entity", f"{md_code(f'entity={short(eid, 80)}')} in the link names "
                                                       "no entity of this graph.", None)])
        return None
    entity = found[0]
    mine = sorted(index.of_entity(eid), key=lambda c: (c.level, c.id))
    with st.container(border=True):
        st.markdown(f"**{md_literal(entity.name)}** ({md_literal(entity.type)}) is in {len(mine)} "
                    f"communit{'y' if len(mine) == 1 else 'ies'}")
        for c in mine:
            st.page_link("pages/communities.py", label=f"Level {c.level} · {md_literal(short(c.title, 90))}",
                         icon=":material/groups:", query_params={"graph": kg.name, "entity": eid, "community": c.id})
        claims = index.claims_by_entity.get(eid, [])
        render_claims(claims, _names(kg, [eid, *(c.object_id for c in claims if c.object_id)]))
    return eid


def community_subgraph(kg: KG, community: Community) -> Subgraph:
    """Members and the relations between them; past MAX_DRAWN members, the most connected inside it."""
    members = list(community.entity_ids)
    relations = kg.graph.get_relations(list(community.relation_ids[:MAX_EDGES]))
    if len(members) > MAX_DRAWN:
        degree: dict[str, int] = {}
        for r in relations:
            for end in (r.source_id, r.target_id):
                degree[end] = degree.get(end, 0) + 1
        members = sorted(members, key=lambda e: -degree.get(e, 0))[:MAX_DRAWN]
    keep = set(members)
    nodes = kg.graph.get_entities(members, chunks=False)
    edges = [r for r in relations if r.source_id in keep and r.target_id in keep]
    return Subgraph(nodes=tuple(nodes), edges=tuple(edges), total_nodes=community.size,
                    truncated=len(members) < community.size)


def render_report(kg: KG, index: CommunityIndex, c: Community) -> None:
    """Title, level/rank/size, summary, the rank's explanation, findings and the claims of its members."""
    st.markdown(f"#### {md_literal(c.title)}")
    facts = [f"level {c.level}", f"{c.size} entities", f"{len(c.relation_ids)} relations"]
    if c.rank is not None:
        facts.insert(1, f"rank {c.rank:.1f}")
    if c.parent is not None:
        facts.append(f"inside community {c.parent}")
    if c.children:
        facts.append(f"{len(c.children)} sub-communities")
    st.caption(" · ".join(md_literal(f) for f in facts) + (" · computed (Leiden), no LLM report"
                                                         if c.source == "computed" else " · GraphRAG report"))
    if c.summary:
        st.markdown(md_literal(c.summary))
    if c.rank_explanation:
        st.caption(md_literal(c.rank_explanation))
    for f in c.findings:
        with st.expander(md_literal(short(f.summary, 160)) or "Finding", icon=":material/lightbulb:"):
            st.markdown(md_literal(f.explanation))
    claims = index.claims_of(c.entity_ids)
    ids = sorted({x for cl in claims for x in (cl.subject_id, cl.object_id) if x})
    render_claims(claims, _names(kg, ids))


def render_community(live: LiveGraph, index: CommunityIndex, c: Community, focus: str | None) -> None:
    """The report beside the community's subgraph (drawn live on the opened graph)."""
    left, right = st.columns([9, 11], gap="medium")
    with left:
        render_report(live.kg, index, c)
    with right:
        sub = community_subgraph(live.kg, c)
        render_graph(sub, GraphMarks.of(focus_nodes=[focus] if focus else []), max_nodes=MAX_DRAWN, height=560,
                     legend=LEGEND, live=live, key="kg-communities", stem=f"community-{c.id}", quiet_labels=True)
