"""Server tier: FalkorDB and a Milvus standalone server, started once per session by the project's scripts.

`scripts/falkordb` and `scripts/milvus_server` run against a temporary --run-dir, so a developer's own
servers (data/run) are never touched. Milvus starts only when a test asks for `milvus_uri` (~10 s).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from retrieval.config import Settings
from retrieval.stores.base import StoreLocation
from retrieval.stores.falkordb import FalkorGraphStore, delete_graph

ROOT = Path(__file__).resolve().parents[2]


def run_script(name: str, *args: str, run_dir: Path, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run scripts/NAME with --run-dir; fail the test with the script's stderr if it fails."""
    proc = subprocess.run(
        [str(ROOT / "scripts" / name), *args, "--run-dir", str(run_dir)],
        capture_output=True, text=True, timeout=timeout, check=False,
    )
    if proc.returncode not in (0, 3):  # 3: `status` of a stopped server
        pytest.fail(f"scripts/{name} {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc


def env_value(stdout: str, key: str) -> str:
    for line in stdout.splitlines():
        if line.startswith(f"{key}="):
            return line.split("=", 1)[1]
    raise AssertionError(f"no {key}= line in script output: {stdout!r}")


@dataclass
class FalkorServer:
    """A FalkorDB server run by scripts/falkordb in its own runtime directory."""

    run_dir: Path
    url: str = ""

    def start(self) -> str:
        self.url = env_value(run_script("falkordb", "start", run_dir=self.run_dir).stdout, "KG_FALKORDB_URL")
        return self.url

    def stop(self) -> None:
        run_script("falkordb", "stop", run_dir=self.run_dir)

    @property
    def pid(self) -> int:
        return int((self.run_dir / "falkordb.pid").read_text().strip())

    def kill(self) -> None:
        """SIGKILL, as a crash would: no shutdown, the socket file stays behind."""
        pid = self.pid
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                if Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z"):
                    return
            except OSError:
                return
            time.sleep(0.01)
        raise AssertionError(f"FalkorDB pid {pid} survived SIGKILL")


def _short_dir(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    # A unix socket path must stay under 108 bytes; pytest's base temp is short enough for these names.
    return tmp_path_factory.mktemp(name)


@pytest.fixture(scope="session")
def falkordb_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A FalkorDB server for the whole session (started and stopped by scripts/falkordb)."""
    server = FalkorServer(_short_dir(tmp_path_factory, "falkor"))
    url = server.start()
    yield url
    server.stop()


@pytest.fixture
def falkor_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FalkorServer]:
    """A FalkorDB server of its own, for tests that kill it."""
    server = FalkorServer(_short_dir(tmp_path_factory, "fk"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def milvus_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Milvus 2.3 standalone server for the session (scripts/milvus_server; ~10 s to start)."""
    run_dir = _short_dir(tmp_path_factory, "milvus")
    proc = run_script("milvus_server", "start", "--fresh", run_dir=run_dir, timeout=240)
    yield env_value(proc.stdout, "KG_MILVUS_URI")
    run_script("milvus_server", "stop", run_dir=run_dir, timeout=60)


@pytest.fixture
def server_settings(tmp_path: Path, falkordb_url: str) -> Settings:
    return Settings.from_env(env={}, data_dir=tmp_path / "kg", graph_backend="falkordb", falkordb_url=falkordb_url)


@pytest.fixture
def location(tmp_path: Path) -> StoreLocation:
    """A fresh graph name per test, so tests sharing the session server never see each other's data."""
    return StoreLocation(dir=tmp_path / "graph", key=f"t_{uuid.uuid4().hex[:12]}")


@pytest.fixture
def falkor_store(server_settings: Settings, location: StoreLocation) -> Iterator[FalkorGraphStore]:
    store = FalkorGraphStore.open(server_settings, location)
    yield store
    store.close()
    delete_graph(server_settings, location)
