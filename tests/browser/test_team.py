"""Team mode in Debian chromium against a real OpenID Connect provider (oidc-provider-mock, started by the test on
127.0.0.1) and `streamlit run` with an `[auth]` secrets table and an access file:

- a signed-out browser sees the sign-in page and no data, whatever page or link it opens;
- Alice (annotator on `demo`, tenant `team-a`) signs in through the provider, grades, and her grades are stored under
  her identity; she cannot import, delete, adjudicate, read tenant `team-b` or open graph `hostile`: each is tried in
  the UI (not offered, drawn disabled or read-only) and by a crafted link or a crafted websocket message that clicks
  the disabled button / sends the read-only list's state, and the server refuses it naming the role needed;
- Bob (admin) signs in after her sign-out and can do each of those, and the audit log (page and CLI) lists both.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from retrieval.config import Settings
from retrieval.embedding import Embedder
from retrieval.evaluation.labels import ADJUDICATED, LabelStore
from retrieval.evaluation.pooling import build_pool, stored_pool
from retrieval.evaluation.querysets import import_queries
from retrieval.explore.memory import GraphMemory
from retrieval.graph import catalog
from retrieval.graph.runtime import open_kg
from retrieval.models import Entity
from tests.app.graphs import HOSTILE_GRAPH, build_app_data_dir
from tests.browser.conftest import CHROMIUM, RECORD_LONG_TASKS, VIEWPORT, streamlit_app
from tests.browser.wire import Wire
from tests.conftest import ROOT
from tests.oidc_provider import oidc_provider, write_access_file, write_secrets

pytestmark = pytest.mark.browser

ALICE, BOB = "alice@example.org", "bob@example.org"
USERS = {
    "alice": {"email": ALICE, "name": "Alice Annotator", "groups": ["annotators"]},
    "bob": {"email": BOB, "name": "Bob Admin", "groups": ["staff"]},
}
GRANTS = [
    {"role": "annotator", "groups": ["annotators"], "graphs": ["demo"], "tenants": ["team-a"]},
    {"role": "admin", "users": [BOB], "graphs": ["*"], "tenants": ["*"]},
]
QUESTIONS = ["How does brand awareness connect to conversion rate?", "What drives customer lifetime value?"]
SECRET_TITLE = "Team B merger plan"
QUEUE = '[class*="st-key-queue-"] .kg-grader'
ADJUDICATE = '[class*="st-key-adjudicate-"] .kg-grader'


@pytest.fixture
def team(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The demo + hostile data dir with a pooled query set, two annotators who disagree, a stored graph in each of
    tenants team-a and team-b; the provider; and the app served in team mode."""
    data_dir = tmp_path / "kg"
    shutil.copytree(build_app_data_dir(tmp_path_factory, embedder, pristine=True), data_dir, symlinks=True)
    cfg = Settings.from_env(env={}, data_dir=data_dir)
    store = LabelStore.in_data_dir(data_dir)
    qset = import_queries(store, "".join(f"t{i}\t{q}\n" for i, q in enumerate(QUESTIONS, start=1)), "team")
    kg = open_kg(cfg.with_(graph_name="demo"), embedder=embedder)
    try:
        build_pool(store, kg, qset, 5, ["vector"], [])
    finally:
        kg.close()
    version = catalog.resolve(data_dir, "demo").version
    _, items = stored_pool(store, "team", version)
    for who, grade in (("x@example.org", 0), ("y@example.org", 3)):  # one disagreement to adjudicate
        store.put_label(items[0].query, items[0].item_id, grade, graph_version=version, annotator=who)
    store.close()
    memory = GraphMemory(data_dir / "memory")
    node = Entity(id="n1", name="Acme", type="org")
    secret = memory.store_graph("team-b", "default", [node], [], keywords=["merger"], metadata={"title": SECRET_TITLE})
    mine = memory.store_graph("team-a", "default", [node], [], keywords=["acme"], metadata={"title": "Team A notes"})
    with oidc_provider(USERS) as issuer:
        secrets = write_secrets(tmp_path / "auth" / "secrets.toml", issuer)
        access = write_access_file(tmp_path / "access.toml", GRANTS)
        with streamlit_app(data_dir, tmp_path / "server.log", "--secrets.files", str(secrets),
                           KG_ACCESS_FILE=str(access)) as url:
            yield {"url": url, "issuer": issuer, "data_dir": data_dir, "version": version, "items": items,
                   "secret_gid": secret.graph_id, "mine_gid": mine.graph_id, "log": tmp_path / "server.log"}


@pytest.fixture
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS_TEAM)
        yield browser
        browser.close()


CHROMIUM_ARGS_TEAM = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def new_page(browser: Any) -> tuple[Any, Wire]:
    context = browser.new_context(viewport=VIEWPORT)
    context.add_init_script(RECORD_LONG_TASKS)
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.requests = []
    page.on("request", lambda req: page.requests.append(req.url))
    return page, Wire(page)


def sign_in(page: Any, url: str, who: str) -> None:
    """Through the provider's own sign-in form, as a person does: the app's button, then the user's."""
    page.goto(url + "/")
    page.get_by_role("button", name="Sign in with").click()
    page.wait_for_url("**/oauth2/authorize**")
    page.get_by_role("button", name=who, exact=True).click()
    page.get_by_text("Signed in").wait_for(timeout=120_000)


def body(page: Any) -> str:
    return page.inner_text("body")


def run_over(page: Any) -> None:
    page.get_by_test_id("stStatusWidget").wait_for(state="hidden", timeout=120_000)


def test_team_mode_signs_in_through_a_real_provider_and_refuses_what_a_role_does_not_allow(
    team: dict[str, Any], chromium: Any, artifacts: Path
) -> None:
    url, data_dir, version = team["url"], team["data_dir"], team["version"]
    graphs_before = sorted(p.name for p in (data_dir / "versions").iterdir())

    # --- signed out: the sign-in page, and nothing of the data, from any page or link ---------------------------
    page, wire = new_page(chromium)
    for path in ("/", "/data", "/query?graph=demo", f"/memory?tenant=team-b&gid={team['secret_gid']}",
                 "/labels?graph=hostile", "/audit"):
        page.goto(url + path)
        page.get_by_role("button", name="Sign in with").wait_for(timeout=120_000)
        text = body(page)
        for secret in ("demo", HOSTILE_GRAPH, "Eve Evilname", SECRET_TITLE, "Search", "Data", "data dir"):
            assert secret not in text, (path, secret)
        assert page.get_by_test_id("stSidebarNav").count() == 0
    page.screenshot(path=str(artifacts / "team-signed-out.png"))

    # --- Alice, annotator on demo and tenant team-a ------------------------------------------------------------
    sign_in(page, url, "alice")
    sidebar = page.get_by_test_id("stSidebar")
    assert ALICE in sidebar.inner_text() and "annotator on this graph" in sidebar.inner_text()
    assert page.get_by_role("textbox", name="Annotator").count() == 0, "no free-text annotator name in team mode"

    page.goto(f"{url}/labels?graph=demo&set=team")
    rows = page.locator(QUEUE + " .row")
    rows.first.wait_for(timeout=120_000)
    rows.first.locator(".text").click()
    page.keyboard.type("21", delay=150)
    page.locator(QUEUE + '[data-pending="0"]').wait_for(timeout=60_000)
    queued = [r.split("|", 1)[1] for r in rows.evaluate_all("rs => rs.map(r => r.dataset.key)")[:2]]
    stored = LabelStore.in_data_dir(data_dir).all_labels(version, annotator=ALICE)
    assert sorted((lb.item_id, lb.grade) for lb in stored) == sorted(zip(queued, (2, 1), strict=True))
    print([(w.id, w.WhichOneof("value")) for m in wire.sent[-3:] for w in m.rerun_script.widget_states.widgets])
    print(wire.sent[-1])
