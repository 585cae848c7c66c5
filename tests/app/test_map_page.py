"""AppTest: the Map page on the demo graph sends the whole graph (every entity, from the stored layout) and, for a
search (`?q=`), a why-connected question (`?a=&b=`, as Paths links it) or an explored neighbourhood (`?start=`),
what lights up; a link it cannot use is named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from retrieval.config import Settings
from retrieval.graph.runtime import open_kg
from retrieval.search.retriever import search
from tests.app.conftest import APP
from tests.app.graphs import DEMO_QUESTION
from ui_map import decode_message
from ui_text import entity_label

pytestmark = pytest.mark.integration
PAGE = "pages/map.py"


def open_map(q: str = "", **query: str) -> AppTest:
    """The Map with link parameters `query` (read on every run) and `q` typed into its search box."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["graph"] = "demo"
    at.run()
    at.switch_page(PAGE).run()
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    if q:
        at.text_input(key="q").set_value(q).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def sent(at: AppTest) -> tuple[dict, dict, dict]:
    """The map's message (view header, body header) and what its details companion carried."""
    (raw,) = [e.proto.bytes for e in at.get("bidi_component") if e.proto.component_name == "kg_lens_map"]
    view, head, _ = decode_message(raw)
    extras = [json.loads(e.proto.json or e.proto.mixed.json) for e in at.get("bidi_component")
              if e.proto.component_name == "kg_lens_details"]
    (extra,) = [x for x in extras if x["key"] == view["key"]]
    return view, head, extra


def test_the_map_sends_every_entity_and_lights_a_search(app_env: Path, embedder: object) -> None:
    at = open_map()
    view, head, extra = sent(at)
    assert view["key"] == "kg-map" and view["features"]["open"] and head["n"] == 248 and head["m"] == 485
    assert extra["lights"] is None and extra["details"] is None
    assert any("248 entities, 485 relations" in c.value for c in at.caption)
    names = head["names"]

    at = open_map(q=DEMO_QUESTION)
    _, head, extra = sent(at)
    lit = extra["lights"]
    kg = open_kg(Settings.from_env(env={}, data_dir=app_env), "demo", embedder)  # type: ignore[arg-type]
    try:
        result = search(kg, DEMO_QUESTION)
    finally:
        kg.close()
    assert sorted(names[i] for i in lit["seeds"]) == sorted(
        n.name for n in result.subgraph.nodes if n.id in result.seed_ids)
    assert lit["path_edges"] and lit["heat"] and "seeds" in lit["label"]
    heat = dict((names[i], v) for i, v in lit["heat"])
    assert max(heat.values()) == max(result.ppr_mass.values())


def test_the_map_lights_paths_and_neighbourhoods_from_links(app_env: Path) -> None:
    a, b = entity_label("price elasticity", "concept"), entity_label("penetration pricing", "strategy")
    _, head, extra = sent(open_map(a=a, b=b, k="3"))
    lit = extra["lights"]
    names = head["names"]
    assert {names[i] for i in lit["seeds"]} == {"price elasticity", "penetration pricing"}
    assert lit["path_nodes"] and lit["label"].startswith("Paths price elasticity → penetration pricing")
    _, _, extra = sent(open_map(start=a))
    assert extra["lights"]["dest"] and extra["lights"]["label"].startswith("Neighbourhood of price elasticity")
    at = open_map(q="anything", params="{not json")
    assert any(w.value.startswith("Nothing lit") for w in at.warning)
