"""Team mode in Debian chromium against a real OpenID Connect provider (oidc-provider-mock, started by the test on
127.0.0.1) and `streamlit run` with an `[auth]` secrets table and an access file:

- a signed-out browser sees the sign-in page and no data, whatever page or link it opens;
- Alice (annotator on `demo`, tenant `team-a`) signs in through the provider, grades, and her grades are stored under
  her identity; she cannot import, delete, adjudicate, read tenant `team-b` or open graph `hostile`: each is tried in
  the UI (not offered, drawn disabled or read-only) and by a crafted link or a crafted websocket message that clicks
  the disabled button / sends the read-only list's state, and the server refuses it naming the role needed;
- Bob's e-mail claimed unverified (`email_verified` the string "false") or with a trailing space is not Bob: no
  role, and nothing logged under his name (issue 27);
- Bob (admin) signs in after their sign-outs and can do each of those, and the audit log (page and CLI) lists both.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from retrieval.access import AuditLog
from retrieval.embedding import Embedder
from retrieval.evaluation.labels import ADJUDICATED, LabelStore
from retrieval.graph import catalog
from tests.app.graphs import HOSTILE_GRAPH, SECRET_TITLE, team_data_dir
from tests.browser.conftest import RECORD_LONG_TASKS, VIEWPORT, graph_upload, streamlit_app
from tests.browser.test_hostile import IN_PAGE_SCHEMES, LOCAL_HOSTS
from tests.browser.wire import Wire
from tests.conftest import ROOT
from tests.oidc_provider import oidc_provider, write_access_file, write_secrets

pytestmark = pytest.mark.browser

ALICE, BOB = "alice@example.org", "bob@example.org"
USERS = {
    "alice": {"email": ALICE, "email_verified": True, "name": "Alice Annotator", "groups": ["annotators"]},
    "bob": {"email": BOB, "email_verified": True, "name": "Bob Admin", "groups": ["staff"]},
    # issue 27: Bob's e-mail claimed with `email_verified` as the *string* "false", and verified with a trailing space
    "mallory": {"email": BOB, "email_verified": "false", "name": "Mallory"},
    "trent": {"email": BOB + " ", "email_verified": True, "name": "Trent"},
}
GRANTS = [
    {"role": "annotator", "groups": ["annotators"], "graphs": ["demo"], "tenants": ["team-a"]},
    {"role": "admin", "users": [BOB], "graphs": ["*"], "tenants": ["*"]},
]
QUEUE = '[class*="st-key-queue-"] .kg-grader'
ADJUDICATE = '[class*="st-key-adjudicate-"] .kg-grader'


@pytest.fixture
def team(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The demo + hostile data dir with a pooled query set, two annotators who disagree, a stored graph in each of
    tenants team-a and team-b; the provider; and the app served in team mode."""
    seeded = team_data_dir(tmp_path_factory, embedder, tmp_path / "kg")
    with oidc_provider(USERS) as issuer:
        secrets = write_secrets(tmp_path / "auth" / "secrets.toml", issuer)
        access = write_access_file(tmp_path / "access.toml", GRANTS)
        with streamlit_app(seeded["data_dir"], tmp_path / "server.log", "--secrets.files", str(secrets),
                           KG_ACCESS_FILE=str(access)) as url:
            yield {**seeded, "url": url, "issuer": issuer}


def new_page(browser: Any) -> tuple[Any, Wire]:
    context = browser.new_context(viewport=VIEWPORT)
    context.add_init_script(RECORD_LONG_TASKS)
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.requests = []
    page.on("request", lambda req: page.requests.append((req.url, req.frame.url)))  # (what, asked for by which page)
    return page, Wire(page)


def sign_in(page: Any, url: str, who: str) -> None:
    """Through the provider's own sign-in form, as a person does: the app's button, then the user's."""
    page.goto(url + "/")
    page.get_by_role("button", name="Sign in with").click()
    page.wait_for_url("**/oauth2/authorize**")
    page.get_by_role("button", name=who, exact=True).click()
    page.get_by_text("Signed in").wait_for(timeout=120_000)
    page.get_by_test_id("stSidebar").get_by_text("on this graph", exact=False).wait_for(timeout=60_000)
    run_over(page)  # the sidebar's identity lines come with the rest of the run


def body(page: Any) -> str:
    return page.inner_text("body")


def run_over(page: Any) -> None:
    page.get_by_test_id("stStatusWidget").wait_for(state="hidden", timeout=120_000)


def test_team_mode_signs_in_through_a_real_provider_and_refuses_what_a_role_does_not_allow(
    team: dict[str, Any], browser: Any, artifacts: Path
) -> None:
    url, data_dir, version = team["url"], team["data_dir"], team["version"]
    graphs_before = sorted(p.name for p in (data_dir / "versions").iterdir())

    # --- signed out: the sign-in page, and nothing of the data, from any page or link ---------------------------
    page, wire = new_page(browser)  # the tier's chromium (one Playwright per process)
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

    # --- Alice may not adjudicate: the list is read-only; a crafted grade log for it is refused ---------------
    page.get_by_role("tab", name="Agreement").click()
    decisions = page.locator(ADJUDICATE + " .row")
    decisions.first.wait_for()
    page.get_by_text("Grading is off: Adjudicating disagreements needs the admin role").wait_for()
    decisions.first.locator('button[data-grade="1"]').click()  # the page itself ignores it: read-only
    row = wire.component_data("adjudicate-")["rows"][0]["key"]
    wire.set_state("adjudicate-", {"log": {"client": "crafted", "events": [{"seq": 1, "key": row, "grade": 3}]}})
    page.get_by_text("Grades are not saved: Adjudicating disagreements needs the admin role").wait_for()
    assert LabelStore.in_data_dir(data_dir).all_labels(version, annotator=ADJUDICATED) == []

    # --- the Data page: only her graph listed; import, delete and activate drawn disabled; crafted clicks refused --
    page.goto(f"{url}/data")
    page.get_by_role("button", name="Rebuild demo graph").wait_for()
    run_over(page)
    page.get_by_placeholder("Choose a graph to activate").click()
    assert page.get_by_role("option").all_inner_texts() == ["demo"], "a graph not granted is not listed"
    page.get_by_role("option", name="demo").click()
    run_over(page)
    refusals = {"Rebuild demo graph": ("import", "Importing a graph needs the curator role on graph 'demo'"),
                "Delete…": ("delete", "Deleting a graph needs the admin role on graph 'demo'"),
                "Make active for everyone": ("activate", "Making a graph active for everyone needs the admin role")}
    for label, (action, refusal) in refusals.items():
        page.mouse.move(5, 5)  # no tooltip of the last button over this one
        page.get_by_role("button", name=label, exact=True).click()  # in the UI: the click is refused, naming the role
        page.get_by_test_id("stAlertContentError").filter(has_text=refusal).wait_for()
        run_over(page)
        assert refused(data_dir, ALICE, action) == 1
        wire.click(label)  # a forged click (the message a tampered page sends): refused on the server too
        until(page, lambda: refused(data_dir, ALICE, action) == 2)  # noqa: B023 (used at once)
        page.get_by_test_id("stAlertContentError").filter(has_text=refusal).wait_for()
        run_over(page)
    assert sorted(p.name for p in (data_dir / "versions").iterdir()) == graphs_before
    assert catalog.active_name(data_dir) == "demo"

    # --- her console queries are logged ------------------------------------------------------------------------
    page.goto(f"{url}/query?graph=demo")
    page.get_by_role("textbox", name="Cypher").fill("MATCH (e:Entity) RETURN e.name LIMIT 3")
    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_text("time limit").first.wait_for()

    # --- a link to a graph not granted opens hers instead, and says so without confirming the name exists --------
    page.goto(f"{url}/?graph={HOSTILE_GRAPH}")
    page.get_by_text("names no graph that you may open").wait_for()
    run_over(page)
    content = page.content()
    at = content.find("Eve Evilname")
    assert at < 0, f"the refused graph's data is on the page: ...{content[max(0, at - 600):at + 200]}..."
    assert "Graph demo" in body(page)

    # --- Graph Memory: her tenant only; a crafted link to another tenant's stored graph is refused --------------
    page.goto(f"{url}/memory")
    page.get_by_text("Team A notes").first.wait_for(state="attached")
    page.get_by_test_id("stSelectbox").filter(has_text="Tenant").locator("input").click()
    assert page.get_by_role("option").all_inner_texts() == ["team-a"]
    page.keyboard.press("Escape")
    page.goto(f"{url}/memory?tenant=team-b&ns=default&gid={team['secret_gid']}")
    page.get_by_text("Reading graph memory needs the viewer role on tenant 'team-b'").wait_for()
    run_over(page)
    assert SECRET_TITLE not in page.content() and refused(data_dir, ALICE, "memory_read") == 1
    wire.set_value("tenant", "team-b")  # the tenant box's value, crafted: not an option, so not taken
    page.wait_for_timeout(1000)
    run_over(page)
    assert SECRET_TITLE not in page.content()
    page.screenshot(path=str(artifacts / "team-alice-refused.png"))

    # --- sign out, through the provider's end-session page, back to the sign-in page -------------------------
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/end_session**")
    page.get_by_role("button", name="End session").click()
    page.get_by_role("button", name="Sign in with").wait_for()
    assert ALICE not in body(page)

    # --- Bob's e-mail, unverified (the string "false") or with a trailing space, is not Bob (issue 27) -----------
    for who, why in (("mallory", "You are signed in as mallory, but the access file grants you no role"),
                     ("trent", "e-mail claim 'bob@example.org ' cannot name a user")):
        page.goto(url + "/")
        page.get_by_role("button", name="Sign in with").click()
        page.wait_for_url("**/oauth2/authorize**")
        page.get_by_role("button", name=who, exact=True).click()
        page.get_by_text(why).or_(page.get_by_text("Signed in")).first.wait_for(timeout=120_000)
        run_over(page)
        assert why in body(page) and page.get_by_test_id("stSidebarNav").count() == 0, (who, body(page)[:500])
        assert [e for e in AuditLog.in_data_dir(data_dir).entries() if BOB in e.actor] == [], who
        page.get_by_role("button", name="Sign out").click()
        page.wait_for_url("**/end_session**")
        page.get_by_role("button", name="End session").click()
        page.get_by_role("button", name="Sign in with").wait_for()

    # --- Bob, admin: each of those is his to do -----------------------------------------------------------------
    sign_in(page, url, "bob")
    page.goto(f"{url}/?graph={HOSTILE_GRAPH}")
    page.get_by_text("Graph hostile").first.wait_for()
    page.goto(f"{url}/memory?tenant=team-b&ns=default&gid={team['secret_gid']}")
    page.get_by_text(SECRET_TITLE).first.wait_for(state="attached")
    page.goto(f"{url}/labels?graph=demo&set=team")
    page.get_by_role("tab", name="Agreement").click()
    decisions = page.locator(ADJUDICATE + " .row")
    decisions.first.wait_for()
    decisions.first.locator('button[data-grade="1"]').click()
    page.locator(ADJUDICATE + '[data-pending="0"]').wait_for()
    decided = LabelStore.in_data_dir(data_dir).all_labels(version, annotator=ADJUDICATED)
    assert [(lb.grade, lb.note) for lb in decided] == [(1, f"by {BOB}")]

    bundle = Path(team["data_dir"]).parent / "tiny.zip"
    with zipfile.ZipFile(bundle, "w") as zf:
        for f in (ROOT / "tests" / "data" / "bundles" / "small").iterdir():
            zf.write(f, f"tiny/{f.name}")
    page.goto(f"{url}/data")
    page.get_by_role("button", name="Rebuild demo graph").wait_for()
    graph_upload(page).set_input_files(str(bundle))
    page.get_by_text(bundle.name).first.wait_for()
    # the app has the upload once it proposes its name (the zip's stem)
    page.wait_for_function("() => [...document.querySelectorAll('input')].some(i => i.value === 'tiny')")
    page.get_by_role("button", name="Import", exact=True).click()
    page.get_by_role("link", name="Open tiny in Search").wait_for(timeout=180_000)
    assert "tiny" in catalog.list_graphs(data_dir)
    run_over(page)
    page.get_by_placeholder("Choose a graph to activate").click()
    assert page.get_by_role("option").all_inner_texts() == ["demo", HOSTILE_GRAPH, "tiny"]
    page.get_by_role("option", name="tiny").click()
    run_over(page)
    page.get_by_role("button", name="Delete…").click()
    page.get_by_role("button", name="Delete graph").click()
    # unlisted at once, then its versions removed (their stores closed first): both, within a minute
    until(page, lambda: catalog.list_graphs(data_dir) == ["demo", HOSTILE_GRAPH]
          and not [p for p in (data_dir / "versions").iterdir() if p.name.startswith("tiny-")])

    # --- the audit log lists both: in the app (admins) and from the CLI ---------------------------------------
    page.goto(f"{url}/audit")
    page.get_by_text("entries (").first.wait_for()
    page.screenshot(path=str(artifacts / "team-audit.png"))
    out = subprocess.run([sys.executable, "-m", "retrieval", "audit", "--json", "--data-dir", str(data_dir)],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    log = {(e["actor"], e["action"], e["outcome"]) for e in json.loads(out.stdout)}
    for entry in [(ALICE, "login", "ok"), (ALICE, "adjudicate", "refused"), (ALICE, "import", "refused"),
                  (ALICE, "delete", "refused"), (ALICE, "activate", "refused"), (ALICE, "console", "ok"),
                  (ALICE, "view", "refused"), (ALICE, "memory_read", "refused"), (ALICE, "logout", "ok"),
                  (BOB, "login", "ok"), (BOB, "adjudicate", "ok"), (BOB, "import", "ok"), (BOB, "delete", "ok"),
                  ("mallory", "login", "refused"), ("mallory", "logout", "ok"),
                  ("unresolved sign-in, subject 'trent'", "login", "refused")]:
        assert entry in log, entry
    # the app's pages reach nothing but 127.0.0.1 (the test provider's own sign-in page styles itself from a CDN)
    egress = [u for u, frame in page.requests if not frame.startswith(team["issuer"])
              and not u.startswith(IN_PAGE_SCHEMES) and urlsplit(u).hostname not in LOCAL_HOSTS]
    assert egress == []


def refused(data_dir: Path, actor: str, action: str) -> int:
    """How many refusals of `action` to `actor` the audit log holds."""
    return sum(e.actor == actor and e.action == action and e.outcome == "refused"
               for e in AuditLog.in_data_dir(data_dir).entries())


def until(page: Any, condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
    """Wait for a condition outside the page (the audit file), letting the page's events run meanwhile."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        page.wait_for_timeout(200)
