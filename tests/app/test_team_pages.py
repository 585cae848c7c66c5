"""AppTest, team mode (an `[auth]` secrets table, an access file, `st.user` as a provider leaves it): the pages for a
signed-out session, a half set-up and each role. The role × action table of SECURITY.md names these tests; the
browser tier (tests/browser/test_team.py) walks the same with a real provider and forged websocket messages."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from retrieval.access import AuditLog
from retrieval.answer.fewshot import FewShotManager
from retrieval.curation.log import CurationLog, has_log
from retrieval.embedding import Embedder
from retrieval.evaluation.labels import ADJUDICATED, LabelStore
from retrieval.graph import catalog
from tests.app.conftest import APP, clear_caches
from tests.app.grading import grader_data, send_grades
from tests.app.graphs import HOSTILE_GRAPH, SECRET_TITLE, team_data_dir
from tests.oidc_provider import write_access_file

pytestmark = pytest.mark.integration

USERS = {role: f"{role}@example.org" for role in ("viewer", "annotator", "curator", "admin")}
AUTH = {"redirect_uri": "http://127.0.0.1:8501/oauth2callback", "cookie_secret": "x" * 32, "client_id": "kg-lens",
        "client_secret": "s", "server_metadata_url": "http://127.0.0.1:1/.well-known/openid-configuration"}


@pytest.fixture(scope="module")
def team_dir(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[dict[str, Any]]:
    """The team data dir, on caches of its own: its `demo` is merged, and its results are keyed like those of the
    shared dir's `demo` (see `clear_caches`)."""
    seeded = team_data_dir(tmp_path_factory, embedder, tmp_path_factory.mktemp("team") / "kg")
    grants = [{"role": role, "users": [email], "graphs": ["demo"], "tenants": ["team-a"]}
              for role, email in USERS.items() if role != "admin"]
    grants.append({"role": "admin", "users": [USERS["admin"]], "graphs": ["*"], "tenants": ["*"]})
    seeded["access"] = write_access_file(Path(str(seeded["data_dir"])).parent / "access.toml", grants)
    clear_caches()
    yield seeded
    clear_caches()


@pytest.fixture
def team_env(monkeypatch: pytest.MonkeyPatch, team_dir: dict[str, Any]) -> dict[str, Any]:
    monkeypatch.setenv("KG_DATA_DIR", str(team_dir["data_dir"]))
    monkeypatch.setenv("KG_ACCESS_FILE", str(team_dir["access"]))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("KG_GRAPH", raising=False)
    return team_dir


def team(email: str | None, page: str | None = None, *, auth: bool = True, direct: str = "", **query: str) -> AppTest:
    """A new session signed in as `email` (None: signed out), on `page` (the shell's default page if None), or on
    the page file `direct` run alone (as Streamlit runs a page its navigation does not list)."""
    at = AppTest.from_file(str(Path(APP).parent / direct) if direct else APP, default_timeout=120)
    if auth:
        at.secrets["auth"] = AUTH
    at.user = {"is_logged_in": False} if email is None else {
        "is_logged_in": True, "sub": f"sub-{email}", "email": email, "email_verified": True,
        "name": email.split("@")[0], "iat": 1_800_000_000}
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    if page:
        at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def shown(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [e.value for e in at.error] + \
        [w.value for w in at.warning] + [i.value for i in at.info] + [b.label for b in at.button]
    return "\n".join(parts).replace("\\", "")  # md_literal's escapes, so the text reads as on the page


def frames(at: AppTest) -> str:
    return "\n".join(d.value.to_csv() for d in at.dataframe)


def audit(team_dir: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(e.actor, e.action, e.outcome) for e in AuditLog.in_data_dir(Path(team_dir["data_dir"])).entries()]


def test_signed_out_or_half_set_up_sessions_see_no_data(team_env: dict[str, Any],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    at = team(None)
    assert [b.label for b in at.button] == ["Sign in with your organisation's account"]
    for page in ("pages/data.py", "pages/labels.py", "pages/memory.py", "pages/query.py", "pages/audit.py"):
        direct = team(None, direct=page)  # a page run without the shell (as Streamlit does before any navigation)
        assert not direct.markdown and not direct.get("bidi_component") and not direct.button, page
    assert "demo" not in shown(at) and HOSTILE_GRAPH not in shown(at)
    nobody = team("nobody@example.org")  # signed in, granted nothing
    assert "grants you no role" in shown(nobody) and [b.label for b in nobody.button] == ["Sign out"]
    assert ("nobody@example.org", "login", "refused") in audit(team_env)
    half = team(USERS["admin"], auth=False)  # KG_ACCESS_FILE without [auth]: refused, never served open
    assert "team mode needs both" in shown(half) and "demo" not in shown(half)
    monkeypatch.delenv("KG_ACCESS_FILE")
    other = team(USERS["admin"])  # [auth] without an access file
    assert "KG_ACCESS_FILE is not set" in shown(other) and not other.get("bidi_component")
    monkeypatch.setenv("KG_ACCESS_FILE", str(Path(str(team_env["access"])).parent / "missing.toml"))
    assert "missing.toml: No such file" in shown(team(USERS["admin"]))


def test_data_page_actions_by_role(team_env: dict[str, Any]) -> None:
    data_dir = Path(str(team_env["data_dir"]))
    at = team(USERS["annotator"], "pages/data.py")
    assert "hostile" not in shown(at) and at.selectbox(key="graph-pick").options == ["demo"]
    at.button(key="build-demo").click().run()
    assert "Importing a graph needs the curator role on graph 'demo'; you (annotator@example.org) have annotator" \
        in shown(at)
    at.selectbox(key="graph-pick").select("demo").run()
    at.button(key="graph-delete").click().run()
    assert "Deleting a graph needs the admin role on graph 'demo'" in shown(at)
    curator = team(USERS["curator"], "pages/data.py")
    curator.selectbox(key="graph-pick").select("demo").run()
    curator.button(key="graph-activate").click().run()
    assert "Making a graph active for everyone needs the admin role" in shown(curator)
    admin = team(USERS["admin"], "pages/data.py")
    assert admin.selectbox(key="graph-pick").options == ["demo", HOSTILE_GRAPH]
    admin.selectbox(key="graph-pick").select(HOSTILE_GRAPH).run()
    admin.button(key="graph-activate").click().run()
    assert catalog.active_name(data_dir) == HOSTILE_GRAPH
    catalog.set_active(data_dir, "demo")
    admin.selectbox(key="graph-pick").select(HOSTILE_GRAPH).run()
    admin.button(key="graph-open").click().run()  # for this user only: the active graph stays
    assert admin.session_state["graph-picked"] == HOSTILE_GRAPH and catalog.active_name(data_dir) == "demo"
    assert f"**{HOSTILE_GRAPH}** · version" in shown(admin)
    log = audit(team_env)
    for entry in [(USERS["annotator"], "import", "refused"), (USERS["annotator"], "delete", "refused"),
                  (USERS["curator"], "activate", "refused"), (USERS["admin"], "activate", "ok")]:
        assert entry in log, entry


def fewshot_save(email: str, question: str) -> AppTest:
    at = team(email, "pages/data.py")
    next(t for t in at.text_input if t.label == "Question").input(question)
    next(t for t in at.text_area if t.label == "Answer").input("Because of it.")
    next(b for b in at.button if b.label == "Save").click().run()
    return at


def test_few_shot_edits_need_the_curator_role_and_are_logged(team_env: dict[str, Any]) -> None:
    data_dir = Path(str(team_env["data_dir"]))
    refused = fewshot_save(USERS["annotator"], "An annotator's example?")
    assert "Editing few-shot examples needs the curator role" in shown(refused)
    fewshot_save(USERS["curator"], "A curator's example?")
    assert [e.question for e in FewShotManager(data_dir, "demo").examples()] == ["A curator's example?"]
    log = audit(team_env)
    assert (USERS["annotator"], "fewshot", "refused") in log and (USERS["curator"], "fewshot", "ok") in log


def test_grades_are_the_identity_and_adjudication_is_the_admins(team_env: dict[str, Any]) -> None:
    data_dir, version = Path(str(team_env["data_dir"])), str(team_env["version"])
    store = LabelStore.in_data_dir(data_dir)
    viewer = team(USERS["viewer"], "pages/labels.py", set="team")
    queue = grader_data(viewer, "queue-")
    assert queue["readonly"] and "Grading needs the annotator role" in shown(viewer)
    send_grades(viewer, queue["key"], [(1, queue["rows"][0]["key"], 2)])  # what a tampered page could send
    viewer.run()
    assert "Grades are not saved: Grading needs the annotator role" in shown(viewer)
    assert store.all_labels(version, annotator=USERS["viewer"]) == []

    at = team(USERS["annotator"], "pages/labels.py", set="team")
    queue = grader_data(at, "queue-")
    assert not queue["readonly"] and queue["annotator"] == USERS["annotator"]
    assert not at.text_input, "no free-text annotator name"
    send_grades(at, queue["key"], [(1, queue["rows"][0]["key"], 2)])
    at.run()
    assert [(lb.grade, lb.annotator) for lb in store.all_labels(version, annotator=USERS["annotator"])] == \
        [(2, USERS["annotator"])]
    decide = grader_data(at, "adjudicate-")
    assert decide["readonly"] and "Adjudicating disagreements needs the admin role" in shown(at)
    send_grades(at, decide["key"], [(1, decide["rows"][0]["key"], 1)])
    at.run()
    assert "Grades are not saved: Adjudicating disagreements needs the admin role" in shown(at)
    assert store.all_labels(version, annotator=ADJUDICATED) == []
    assert at.selectbox(key="export-who").options == ["(adjudicated)", USERS["annotator"]], "own grades only"
    assert "Importing query sets, qrels and building pools needs the curator role" in shown(at)
    assert not [b for b in at.button if b.key == "pool-go"] and not at.get("file_uploader")
    curator = team(USERS["curator"], "pages/labels.py", set="team")
    assert [b for b in curator.button if b.key == "pool-go"] and curator.get("file_uploader")

    admin = team(USERS["admin"], "pages/labels.py", set="team")
    decide = grader_data(admin, "adjudicate-")
    send_grades(admin, decide["key"], [(1, decide["rows"][0]["key"], 1)])
    admin.run()
    assert [(lb.grade, lb.note) for lb in store.all_labels(version, annotator=ADJUDICATED)] == \
        [(1, f"by {USERS['admin']}")]
    assert len(admin.selectbox(key="export-who").options) > 2
    log = audit(team_env)
    assert (USERS["viewer"], "grade", "refused") in log and (USERS["annotator"], "adjudicate", "refused") in log
    assert (USERS["admin"], "adjudicate", "ok") in log


def test_graph_memory_tenants_follow_identity(team_env: dict[str, Any]) -> None:
    at = team(USERS["viewer"], "pages/memory.py")
    assert at.selectbox(key="tenant").options == ["team-a"] and SECRET_TITLE not in frames(at)
    link = team(USERS["viewer"], "pages/memory.py", tenant="team-b", ns="default", gid=str(team_env["secret_gid"]))
    assert "Reading graph memory needs the viewer role on tenant 'team-b'" in shown(link)
    assert SECRET_TITLE not in frames(link) + shown(link)
    admin = team(USERS["admin"], "pages/memory.py", tenant="team-b", ns="default")
    assert "team-b" in admin.selectbox(key="tenant").options and SECRET_TITLE in frames(admin)
    assert (USERS["viewer"], "memory_read", "refused") in audit(team_env)


def test_graphs_not_granted_are_not_listed_searchable_or_linkable(team_env: dict[str, Any]) -> None:
    at = team(USERS["annotator"], None, graph=HOSTILE_GRAPH)
    assert "names no graph that you may open" in shown(at) and "Eve Evilname" not in shown(at)
    query = team(USERS["annotator"], "pages/query.py", graph=HOSTILE_GRAPH)
    assert "Cypher on graph **demo**" in shown(query)  # hers, not the link's
    query.text_area(key="console-query").input("MATCH (e:Entity) RETURN e.name LIMIT 2").run()
    next(b for b in query.button if b.label == "Run").click().run()
    log = AuditLog.in_data_dir(Path(str(team_env["data_dir"]))).entries()
    assert any(e.actor == USERS["annotator"] and e.action == "console" and "LIMIT 2" in e.detail for e in log)
    assert (USERS["annotator"], "view", "refused") in audit(team_env)


def test_the_audit_log_page_is_for_admins(team_env: dict[str, Any]) -> None:
    admin = team(USERS["admin"], "pages/audit.py")
    assert admin.get("dataframe") and "entries (" in shown(admin)
    assert not [p for p in team(USERS["curator"]).get("page_link") if "audit" in p.proto.page]
    curator = team(USERS["curator"], direct="pages/audit.py")  # not in its navigation; reached anyway: refused
    assert "Reading the audit log needs the admin role on every graph" in shown(curator)
    assert not curator.get("dataframe")


def test_curation_needs_the_curator_role_and_is_recorded_under_the_signed_in_identity(
        team_env: dict[str, Any]) -> None:
    """SECURITY.md's `edit` row: a merge from the Curation page is refused to an annotator on the server (the button
    is drawn for every role) and logged; a curator's is applied under their sign-in and its changeset goes to the
    audit log (the last test of this module: the merge stays in its data dir)."""
    def merge(email: str) -> AppTest:
        at = team(email, "pages/curation.py")
        next(b for b in at.button if b.key and b.key.endswith("-merge")).click().run()
        return at

    data_dir = Path(str(team_env["data_dir"]))
    refused = merge(USERS["annotator"])
    assert "Editing a graph needs the curator role on graph 'demo'" in shown(refused)
    assert (USERS["annotator"], "edit", "refused") in audit(team_env)
    assert not has_log(data_dir, "demo") or not CurationLog(data_dir, "demo").changesets(limit=5)
    done = merge(USERS["curator"])
    assert "Editing a graph needs" not in shown(done) and f"you edit as **{USERS['curator']}**" in shown(done)
    [changeset] = CurationLog(data_dir, "demo").changesets(limit=5)
    assert changeset.author == USERS["curator"] and changeset.action == "edit"
    entries = [e for e in AuditLog.in_data_dir(data_dir).entries()
               if e.actor == USERS["curator"] and e.action == "edit"]
    assert [e.outcome for e in entries] == ["ok"] and entries[0].detail.startswith("changeset #")
