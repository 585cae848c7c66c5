"""Access control without the UI: the access file, identities from ID-token claims, the role × action table that
`authorize` enforces, the gate's audit trail, the append-only durable audit log, graph memory seen through a gate,
deleting a graph, and `python -m retrieval audit`."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

import pytest
from typer.testing import CliRunner

from retrieval.access import ACTIONS, LOCAL, AuditLog, Gate, Role, authorize, identity_for, load_policy, refusal
from retrieval.access.audit import parse_since
from retrieval.access.policy import Identity
from retrieval.errors import AccessDenied, ConfigError, NotFoundError, ValidationError
from retrieval.explore.memory import GraphMemory
from retrieval.models import Entity

POLICY = """
groups_claim = "roles"

[[grant]]
role = "viewer"
groups = ["staff"]
graphs = ["demo"]
tenants = ["team-a"]

[[grant]]
role = "annotator"
users = ["Alice@Example.org"]
graphs = ["demo"]
tenants = ["team-a"]

[[grant]]
role = "admin"
users = ["bob-subject"]
graphs = ["*"]
tenants = ["*"]
"""


def policy_file(tmp_path: Path, text: str = POLICY) -> Path:
    path = tmp_path / "access.toml"
    path.write_text(text, encoding="utf-8")
    return path


def who(role: Role | None, *, graph: str = "demo", tenant: str = "team-a") -> Identity:
    return Identity(key=f"{role.label if role else 'nobody'}@example.org",
                    graphs={graph: role} if role else {}, tenants={tenant: role} if role else {})


def test_the_access_file_gives_roles_by_email_subject_and_group_claim(tmp_path: Path) -> None:
    policy = load_policy(policy_file(tmp_path))
    alice = identity_for(policy, {"sub": "a-1", "email": "alice@example.org", "email_verified": True, "name": "Alice",
                                  "roles": ["staff"]})
    assert alice.key == "alice@example.org" and alice.name == "Alice"
    assert alice.role("graph", "demo") == Role.ANNOTATOR  # the higher of her own grant and her group's
    assert alice.role("graph", "hostile") is None and alice.role("tenant", "team-b") is None
    bob = identity_for(policy, {"sub": "bob-subject", "email": "bob@example.org"})
    assert bob.role("graph", "anything") == Role.ADMIN and bob.role("site") == Role.ADMIN
    # the groups claim is configurable and may be one string; `groups` is not read when the file names `roles`
    carol = identity_for(policy, {"sub": "c", "email": "carol@example.org", "roles": "staff", "groups": ["admins"]})
    assert carol.role("graph", "demo") == Role.VIEWER and carol.role("site") is None
    # an e-mail the provider says is unverified neither names the user nor matches a grant: the subject does
    mallory = identity_for(policy, {"sub": "m-1", "email": "alice@example.org", "email_verified": False})
    assert mallory.key == "m-1" and not mallory.granted
    with pytest.raises(AccessDenied, match="no subject"):
        identity_for(policy, {"email": "x@example.org"})
    with pytest.raises(AccessDenied, match="cannot name an annotator"):
        identity_for(policy, {"sub": "adjudicated"})


@pytest.mark.parametrize("verified", ["false", "False", "FALSE", "0", "no", "", "yes", 1, 0, None, [], {}, "true "])
def test_only_an_email_verified_that_is_really_true_maps_an_email(tmp_path: Path, verified: object) -> None:
    """Issue 27.1: a provider sending `email_verified` as the string "false" (or anything but true) gets the subject."""
    policy = load_policy(policy_file(tmp_path))
    claims = {"sub": "m-1", "email": "bob@example.org", **({} if verified is None else {"email_verified": verified})}
    who = identity_for(policy, claims)
    assert who.key == "m-1" and who.email == "" and not who.granted  # not Bob, not admin (Bob's grant is his subject)
    admin = load_policy(policy_file(tmp_path, '[[grant]]\nrole = "admin"\nusers = ["bob@example.org"]\n'
                                              'graphs = ["*"]\ntenants = ["*"]\n'))
    assert identity_for(admin, claims).role("site") is None


@pytest.mark.parametrize("verified", [True, "true"])
def test_a_true_email_verified_maps_the_email(tmp_path: Path, verified: object) -> None:
    policy = load_policy(policy_file(tmp_path))
    who = identity_for(policy, {"sub": "a" * 255, "email": "alice@example.org", "email_verified": verified})
    assert who.key == "alice@example.org" and who.role("graph", "demo") == Role.ANNOTATOR  # a long subject is no key


ADMIN_BOB = '[[grant]]\nrole = "admin"\nusers = ["bob@example.org", "kate@example.org", "strasse@example.org"]\n' \
    'graphs = ["*"]\ntenants = ["*"]\n'


@pytest.mark.parametrize("email", ["bob@example.org ", " bob@example.org", "bob@example.org\n", "bob @example.org",
                                   "bob@example.org\u200b", "\u202ebob@example.org", "bob@example.org\x00",
                                   "bob\u00a0@example.org", "jose\u0301@example.org",
                                   "\u212aate@example.org", "bob", "bob@", "@example.org",
                                   "bob@@example.org"])
def test_an_email_claim_that_normalisation_would_change_is_refused(tmp_path: Path, email: str) -> None:
    """Issue 27.2: a verified e-mail with white space, control or format characters, not in NFC, or not one
    `local@domain` is refused: it is never trimmed or collapsed onto another user's identity."""
    policy = load_policy(policy_file(tmp_path, ADMIN_BOB))
    with pytest.raises(AccessDenied, match="e-mail claim") as err:
        identity_for(policy, {"sub": "m-2", "email": email, "email_verified": True})
    assert "bob@example.org" not in str(err.value).replace(ascii(email), "")  # named only as the claim it is
    with pytest.raises(AccessDenied, match="subject"):
        identity_for(policy, {"sub": "bob@example.org ", "email": "x@example.org", "email_verified": False})


def test_claims_that_differ_stay_distinct_users(tmp_path: Path) -> None:
    """Only ASCII letters compare case-insensitively against the access file; no other folding can merge claims."""
    policy = load_policy(policy_file(tmp_path, ADMIN_BOB))
    upper = identity_for(policy, {"sub": "b-2", "email": "BOB@example.org", "email_verified": True})
    assert upper.key == "BOB@example.org" and upper.role("site") == Role.ADMIN  # the same mailbox, its own key
    for email in ("\u017ftrasse@example.org",  # LATIN SMALL LETTER LONG S: casefold() makes it "s"
                  "straße@example.org",  # casefold() makes it "strasse"
                  "b\u043eb@example.org",  # Cyrillic o: a different address that looks the same
                  "bob@example.org.evil.example"):
        who = identity_for(policy, {"sub": "e-1", "email": email, "email_verified": True})
        assert who.key == email and not who.granted, email


@pytest.mark.parametrize(("text", "message"), [
    ('[[grant]]\nrole = "owner"\ngraphs = ["demo"]', r"grant\.1\.role: .*unknown role 'owner'; valid: viewer"),
    ('[[grant]]\nrole = "viewer"\ngraphs = ["../etc"]', r"grant\.1\.graphs: .*'\.\./etc' is neither"),
    ('[[grant]]\nrole = "viewer"\ncolour = "red"', r"grant\.1\.colour: Extra inputs"),
    ("[[grant]\n", "not valid TOML"),
])
def test_a_malformed_access_file_is_refused_naming_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = policy_file(tmp_path, text)
    with pytest.raises(ConfigError, match=message) as err:
        load_policy(path)
    assert str(path) in str(err.value)
    with pytest.raises(ConfigError, match="cannot read"):
        load_policy(tmp_path / "missing.toml")


@pytest.mark.parametrize("role", [*Role, None], ids=lambda r: r.label if r else "none")
def test_every_role_is_allowed_exactly_the_actions_at_or_below_it(role: Role | None) -> None:
    user = who(role)
    for name, act in ACTIONS.items():
        scope = {"graph": "demo"} if act.scope == "graph" else {"tenant": "team-a"} if act.scope == "tenant" else {}
        allowed = role is not None and role >= act.role and act.scope != "site"  # the site needs `*`
        assert (refusal(user, name, **scope) == "") is allowed, (name, role)
        if not allowed:
            with pytest.raises(AccessDenied, match=f"needs the {act.role.label} role") as err:
                authorize(user, name, **scope)
            assert user.key in str(err.value)
    # another graph or tenant: nothing at all
    assert refusal(user, "view", graph="hostile").startswith("Opening a graph")
    assert "no role there" in refusal(user, "memory_read", tenant="team-b")


def test_local_mode_is_one_user_with_every_role() -> None:
    for name in ACTIONS:
        assert refusal(LOCAL, name, graph="any", tenant="any") == "", name
    assert LOCAL.key == "local" and LOCAL.local


def test_the_gate_logs_refusals_and_what_it_is_told(tmp_path: Path) -> None:
    log = AuditLog.in_data_dir(tmp_path)
    gate = Gate(who(Role.ANNOTATOR), log)
    gate.check("grade", graph="demo")  # allowed: nothing logged by the check itself
    with pytest.raises(AccessDenied):
        gate.check("delete", graph="demo", detail="from the Data page")
    permit = gate.permit("import", graph="demo")
    assert not permit.allowed and "curator" in permit.refusal
    gate.permit("grade", graph="demo").record("3 grades")
    rows = [(e.actor, e.action, e.outcome, e.graph) for e in log.entries()]
    assert rows == [("annotator@example.org", "delete", "refused", "demo"),
                    ("annotator@example.org", "grade", "ok", "demo")]
    assert "needs the admin role" in log.entries()[0].detail and "from the Data page" in log.entries()[0].detail
    Gate(LOCAL).check("delete", graph="demo")  # local mode: allowed, and no log to write to


def test_the_audit_log_is_append_only_capped_and_filtered_by_time(tmp_path: Path) -> None:
    log = AuditLog.in_data_dir(tmp_path)
    first = log.record("a@example.org", "console", graph="demo", detail="x" * 5000)
    assert len(first.detail) == 2000 and first.detail.endswith("…")
    log.record("b@example.org", "delete", outcome="refused", graph="g" * 500)
    with pytest.raises(ValidationError):
        log.record("a", "login", outcome="maybe")
    conn = sqlite3.connect(tmp_path / "audit.sqlite")
    for sql in ("UPDATE audit SET actor = 'someone else'", "DELETE FROM audit",
                # REPLACE deletes the row it collides with without firing a DELETE trigger (issue 27)
                "INSERT OR REPLACE INTO audit (seq, at, actor, action, outcome) VALUES (1, 'x', 'eve', 'login', 'ok')",
                "REPLACE INTO audit (seq, at, actor, action, outcome) VALUES (2, 'x', 'eve', 'login', 'ok')",
                "UPDATE OR REPLACE audit SET seq = 1 WHERE seq = 2",
                "INSERT INTO audit (seq, at, actor, action, outcome) VALUES (1, 'x', 'eve', 'login', 'ok') "
                "ON CONFLICT (seq) DO UPDATE SET actor = 'eve'"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute(sql)
    assert [r[0] for r in conn.execute("SELECT actor FROM audit ORDER BY seq")] == ["a@example.org", "b@example.org"]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    entries = log.entries()
    assert [e.seq for e in entries] == [1, 2] and len(entries[1].graph) == 200
    assert log.entries(entries[1].at) == entries[1:] and log.entries(limit=1) == entries[1:]
    assert parse_since("2026-11-26") == "2026-11-26T00:00:00.000000+00:00"
    assert parse_since("24h") < parse_since("15m")
    with pytest.raises(ValidationError, match="an age such as"):
        parse_since("yesterday")


WRITER = """
import sys
from pathlib import Path
from retrieval.access import AuditLog
log = AuditLog.in_data_dir(Path(sys.argv[1]))
for i in range(100000):
    entry = log.record("writer@example.org", "console", detail=f"query {i}")
    print(entry.seq, flush=True)
"""


def test_acknowledged_entries_survive_a_killed_writer(tmp_path: Path) -> None:
    """Each entry is one fsynced transaction: every seq the writer printed (record had returned) is on disk."""
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert proc.stdout is not None
    acked: list[int] = []
    deadline = time.monotonic() + 60
    while len(acked) < 50 and time.monotonic() < deadline:
        acked.append(int(proc.stdout.readline()))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    stored = {e.seq: e.detail for e in AuditLog.in_data_dir(tmp_path).entries()}
    assert len(acked) == 50 and all(stored[s] == f"query {s - 1}" for s in acked)


def test_graph_memory_through_a_gate_reads_writes_and_deletes_only_granted_tenants(tmp_path: Path) -> None:
    shared = GraphMemory(tmp_path / "memory")
    node = Entity(id="n1", name="Node", type="thing")
    other = shared.store_graph("team-b", "default", [node], [], keywords=["secret"])
    assert other.ok
    log = AuditLog.in_data_dir(tmp_path)
    viewer = shared.as_user(Gate(who(Role.VIEWER), log))
    curator = shared.as_user(Gate(who(Role.CURATOR), log))
    admin = shared.as_user(Gate(who(Role.ADMIN), log))
    assert viewer.tenants() == ["team-a"] and shared.tenants() == ["default", "team-b"]
    refused = viewer.store_graph("team-a", "default", [node], [])
    assert refused.error_kind == "forbidden" and "needs the curator role" in (refused.error or "")
    saved = curator.store_graph("team-a", "default", [node], [])
    assert saved.ok and viewer.get_graph("team-a", saved.graph_id or "").ok
    # another tenant's stored graph cannot be read by id, listed, searched, traversed or deleted
    for result in (viewer.get_graph("team-b", other.graph_id or ""), viewer.list_graphs("team-b"),
                   viewer.search_graphs("team-b", "secret"), admin.delete_graph("team-b", other.graph_id or ""),
                   viewer.traverse_graph("team-b", other.graph_id or "", "n1")):
        assert result.error_kind == "forbidden" and "no role there" in (result.error or "")
    assert not curator.delete_graph("team-a", saved.graph_id or "").ok
    assert admin.delete_graph("team-a", saved.graph_id or "").ok
    assert shared.get_graph("team-b", other.graph_id or "").ok  # the unguarded store (the CLI) is as before
    assert sum(e.outcome == "refused" for e in log.entries()) == 7
    assert [(e.actor, e.action, e.tenant) for e in log.entries() if e.outcome == "ok"] == [
        ("curator@example.org", "memory_write", "team-a"), ("admin@example.org", "memory_delete", "team-a")]
    assert shared.metrics()['graph_memory_retrievals_total{namespace="default",outcome="forbidden",tenant="team-b"}']


def test_deleting_a_graph_unlists_it_drops_every_version_and_moves_the_active_mark(tmp_path: Path) -> None:
    from retrieval.config import Settings
    from retrieval.graph import catalog
    from retrieval.ingest.versions import delete_graph

    cfg = Settings.from_env(env={}, data_dir=tmp_path / "kg")
    for name in ("alpha", "beta"):
        for n in range(2):  # two versions of each
            build = catalog.new_build_dir(cfg.data_dir, name)
            catalog.commit_build(cfg.data_dir, name, build, {"version": f"{n:012x}-2026112{n}T000000", "key": name})
    catalog.set_active(cfg.data_dir, "beta")
    assert len(delete_graph(cfg, "beta")) == 2
    assert catalog.list_graphs(cfg.data_dir) == ["alpha"] and catalog.active_name(cfg.data_dir) == "alpha"
    assert (cfg.data_dir / "active").read_text() == "alpha"
    assert sorted(p.name for p in (cfg.data_dir / "versions").iterdir())[0].startswith("alpha-")
    with pytest.raises(NotFoundError):
        delete_graph(cfg, "beta")
    with pytest.raises(ValidationError):
        delete_graph(cfg, "../x")
    delete_graph(cfg, "alpha")
    assert catalog.list_graphs(cfg.data_dir) == [] and not (cfg.data_dir / "active").exists()


def test_cli_audit_prints_lines_or_json_and_escapes_control_characters(tmp_path: Path) -> None:
    import importlib

    from retrieval.__main__ import COMMAND_MODULES, app

    for module in COMMAND_MODULES:
        importlib.import_module(module).register(app)
    runner = CliRunner()
    empty = runner.invoke(app, ["audit", "--data-dir", str(tmp_path)])
    assert empty.exit_code == 0 and "no audit entries" in empty.stdout
    log = AuditLog.in_data_dir(tmp_path)
    log.record("a@example.org", "console", graph="demo", detail="MATCH (n)\n RETURN n \x1b[31m")
    log.record("b@example.org", "delete", outcome="refused", graph="demo")
    # bidi overrides and isolates, zero-width and other format characters, line and paragraph separators (issue 27)
    log.record("\u202egro.elpmaxe@bob", "console", detail="a\u2066b\u200bc\u2028d\ufeffe\\x41")
    text = runner.invoke(app, ["audit", "--data-dir", str(tmp_path)])
    lines = text.stdout.splitlines()
    assert len(lines) == 3 and "\\x0a RETURN n \\x1b[31m" in lines[0] and "\x1b" not in text.stdout
    assert lines[1].split("\t")[1:5] == ["b@example.org", "delete", "refused", "graph=demo"]
    assert lines[2].split("\t")[1] == "\\u202egro.elpmaxe@bob"
    assert lines[2].split("\t")[-1] == "a\\u2066b\\u200bc\\u2028d\\ufeffe\\\\x41"  # a backslash in data is doubled
    assert not any(unicodedata.category(c) in ("Cf", "Zl", "Zp") for c in text.stdout)
    rows = json.loads(runner.invoke(app, ["audit", "--json", "--since", "1h", "--data-dir", str(tmp_path)]).stdout)
    assert [r["actor"] for r in rows][:2] == ["a@example.org", "b@example.org"] and rows[0]["detail"].endswith("[31m")
    assert json.loads(runner.invoke(app, ["audit", "--json", "--since", "2999-01-01", "--data-dir",
                                          str(tmp_path)]).stdout) == []
    bad = runner.invoke(app, ["audit", "--since", "soon", "--data-dir", str(tmp_path)])
    assert bad.exit_code == 2 and "an age such as" in bad.stderr
