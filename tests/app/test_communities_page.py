"""AppTest: the Communities page on the demo graph (computed communities) and on the shared GraphRAG index (reports,
findings, claims); URL parameters bind, bad ones are named in a warning."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from retrieval.graph import catalog
from retrieval.graph.communities import CommunityIndex, load_extras
from tests.app.conftest import APP
from tests.app.graphs import graph_payloads

pytestmark = pytest.mark.integration
PAGE = "pages/communities.py"


def open_page(**query: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_computed_communities_list_open_and_name_bad_links(app_env: Path) -> None:
    index = CommunityIndex.of(load_extras(catalog.resolve(app_env, "demo").dir))
    first = index.ranked(0)[0]
    at = open_page(graph="demo", community=first.id, level="0")
    frame = at.dataframe[0].value
    assert set(frame["level"]) == {0} and list(frame["entities"]) == sorted(frame["entities"], reverse=True)
    assert "rank" not in frame.columns, "item 10: a computed community's rank reads None"
    assert any(c.value.endswith("computed (Leiden), no LLM report") for c in at.caption)
    assert any(m.value.startswith("Computed community \\(Leiden") for m in at.markdown)
    drawn = graph_payloads(at)
    assert drawn and drawn[0]["key"] == "kg-communities", "the community's subgraph is not drawn"
    assert drawn[0]["features"]["expand"], "the community graph is live: click for details, double-click to expand"
    member = first.entity_ids[0]
    at = open_page(graph="demo", entity=member, level="7", community="nope")
    warnings = " ".join(w.value for w in at.warning)
    assert "`level=7` in the link is not a level of this graph (0, 1)" in warnings
    assert "`community=nope` in the link names no community of this graph" in warnings
    links = [link.proto for link in at.get("page_link")]
    assert any(link.query_string.endswith(f"community={first.id}") for link in links)
    at = open_page(graph="demo", entity="no-such-entity")
    assert "names no entity of this graph" in " ".join(w.value for w in at.warning)


def test_graphrag_report_findings_and_claims(dulce_data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KG_DATA_DIR", str(dulce_data_dir))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("KG_GRAPH", raising=False)
    index = CommunityIndex.of(load_extras(catalog.resolve(dulce_data_dir, "dulce").dir))
    alex = next(c.subject_id for c in index.extras.claims if c.subject == "ALEX MERCER")
    at = open_page(graph="dulce", community="4", entity=alex)
    text = "\n".join(m.value for m in at.markdown)
    assert "#### Dulce Base and Operation\\: Dulce Community" in text
    assert "**ALEX MERCER** (PERSON) is in 1 community" in text
    assert "ALEX MERCER \\[MENTORSHIP, TRUE\\] SAM RIVERA" in text  # the entity's claims
    assert "DULCE BASE \\[SECRET FACILITY, TRUE\\]" in text  # the claims of the community's members
    loose = [e for e in at.expander if e.label.startswith("Claims without an entity")]
    assert [e.label for e in loose] == [f"Claims without an entity ({len(index.unattached_claims)})"]
    assert len(index.unattached_claims) == 7  # as the ingest warning counts them, listed here
    assert len(at.expander) - len(loose) == len(index.by_id["4"].findings) == 7
    assert any("rank 9\\.0" in c.value and "GraphRAG report" in c.value for c in at.caption)
    assert at.query_params["community"] == "4"
