"""FalkorDB killed mid-session (SIGKILL, as a crash): the CLI and the running app report it clearly, and once
the server is back the graph is rebuilt by re-ingesting the same input and answers exactly as before."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.faults.conftest import (
    OTHER_QUERY,
    QUERY,
    app_env,
    app_errors,
    app_facts,
    clear_error,
    cli,
    cli_facts,
    fault_env,
    live_version,
    ok,
    run_app,
)
from tests.server.conftest import FalkorServer

pytestmark = [pytest.mark.server, pytest.mark.slow]


@pytest.fixture
def falkor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FalkorServer]:
    """A FalkorDB server of this test's own (scripts/falkordb with its own --run-dir and socket)."""
    server = FalkorServer(tmp_path_factory.mktemp("fkf"))
    server.start()
    yield server
    server.stop()


def test_falkordb_killed_mid_session(falkor: FalkorServer, tmp_path_factory: pytest.TempPathFactory) -> None:
    data_dir = tmp_path_factory.mktemp("falkor-kg") / "kg"
    env = fault_env(data_dir, KG_GRAPH_BACKEND="falkordb", KG_FALKORDB_URL=falkor.url)
    assert "built graph 'demo'" in ok(cli(env, "demo", "--no-progress")).stdout
    before = cli_facts(env)
    with app_env(env):
        shown = app_facts(run_app(q=QUERY))  # the app holds the graph open
        falkor.kill()
        at = run_app(q=OTHER_QUERY)  # a new search on the open graph, after the server died
        assert "Search failed" in app_errors(at) and f"FalkorDB at {falkor.url} is unreachable" in app_errors(at)
        assert not at.dataframe
        assert app_facts(run_app(q=QUERY)) == shown  # an answer already on screen stays (cached), the app is up
    clear_error(cli(env, "search", QUERY), f"FalkorDB at {falkor.url} is unreachable", "scripts/falkordb status")
    clear_error(cli(env, "stats"), "unreachable")

    # The dev server keeps nothing on disk, so it comes back empty: re-ingesting the same input must notice the
    # lost graph and rebuild it (it used to answer "unchanged" and leave the graph empty for good).
    assert falkor.start() == falkor.url
    clear_error(cli(env, "search", QUERY), "has no graph")  # never a silent "nothing found"
    version = live_version(data_dir)
    rebuilt = ok(cli(env, "demo", "--no-progress"))
    assert "built graph 'demo'" in rebuilt.stdout and "lost data" in rebuilt.stderr
    assert live_version(data_dir) != version
    assert cli_facts(env) == before
    with app_env(env):
        assert app_facts(run_app(q=QUERY)) == shown
        assert not app_errors(run_app(q=OTHER_QUERY))
