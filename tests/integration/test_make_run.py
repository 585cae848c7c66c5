"""`make run` listens on 127.0.0.1 unless the user names an address, and says where it serves (issue 21, item 1c).

The test runs `make run` itself (on a data directory that already holds a graph, so nothing is built) and reads
the listening sockets of the Streamlit process it starts; a connection to the machine's own non-loopback address
must be refused.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _outside_address() -> str | None:
    """An IPv4 address of this machine that is not loopback (None if it has none)."""
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                return str(a.address)
    return None


def _listening(root: psutil.Process, port: int) -> set[str]:
    """The addresses the process tree under `root` listens on at `port`."""
    found = set()
    for proc in [root, *root.children(recursive=True)]:
        try:
            conns = proc.net_connections(kind="inet")
        except psutil.Error:
            continue
        found |= {c.laddr.ip for c in conns if c.status == psutil.CONN_LISTEN and c.laddr.port == port}
    return found


@contextmanager
def make_run(data_dir: Path, log: Path, *args: str, **env: str) -> Iterator[tuple[set[str], int]]:
    """`make run PORT=<free> DATA=<data_dir> ARGS`; yields (listening addresses, port) once the app listens."""
    dry = subprocess.run(["make", "-n", "run", f"DATA={data_dir}"], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    if "pip install" in dry.stdout:
        pytest.skip("make run would install the requirements first (the venv is not installed for this "
                    "requirements.txt); run `make test`, which installs them")
    port = _free_port()
    full_env = {k: v for k, v in os.environ.items() if k not in ("ADDRESS", "KG_SERVER_ADDRESS")}
    with log.open("wb") as out:
        proc = subprocess.Popen(["make", "run", f"PORT={port}", f"DATA={data_dir}", *args], cwd=ROOT,
                                env={**full_env, **env}, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        root = psutil.Process(proc.pid)
        deadline = time.monotonic() + 120
        while not (addresses := _listening(root, port)):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"the app did not listen on port {port}: {log.read_text()}"
            time.sleep(0.3)
        yield addresses, port
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)


def test_make_run_listens_on_loopback_unless_told(demo_data_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "make-run.log"
    with make_run(demo_data_dir, log) as (addresses, port):
        assert addresses == {"127.0.0.1"}
        outside = _outside_address()
        if outside:  # the machine's LAN address does not answer
            with pytest.raises(OSError), socket.create_connection((outside, port), timeout=3):
                pass
        with socket.create_connection(("127.0.0.1", port), timeout=3):
            pass
    assert f"KG Lens serves on http://127.0.0.1:{port}" in log.read_text()

    # The user names another address: ADDRESS=... on the command line, or KG_SERVER_ADDRESS in the environment
    # (127.0.0.2 is another loopback address, so the test never listens on the network).
    with make_run(demo_data_dir, log, KG_SERVER_ADDRESS="127.0.0.2") as (addresses, port):
        assert addresses == {"127.0.0.2"}
    assert f"KG Lens serves on http://127.0.0.2:{port}" in log.read_text()
    dry = subprocess.run(["make", "-n", "run", "ADDRESS=0.0.0.0"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert "--server.address 0.0.0.0" in dry and "serves on http://0.0.0.0:" in dry
