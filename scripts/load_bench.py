"""Load benchmark: N concurrent users searching one graph, as threads in one process and as browser sessions.

    .venv/bin/python scripts/load_bench.py --data-dir DIR [--graph NAME] [--users 1,2,4,8,16] [--queries 32]
                                            [--mode threads|browser|both] [--json OUT] [--markdown]

Both modes run the same fixed query set (`bench_scale.bench_queries`: "How does A relate to B?" and
"What does A <verb>?" built from relations spread over the graph's source bundle) split round-robin over N
users; each user sends its queries one after another, all users start together. So every level does the
same total work, and throughput = queries / wall time.

* threads: one KG opened once and shared by N threads calling `retriever.search`, as the app shares one
  cached KG between its sessions.
* browser: one `streamlit run app.py` process per level (a fresh one, so no answer comes from the app's
  result cache) and N Playwright contexts on one headless /usr/bin/chromium; latency is Enter -> the
  result's agent context (the Markdown `search_knowledge_graph` returns) present in the page.

Correctness: a level's answer to a query must equal the 1-user answer of the same mode (every fact, in
order); the report counts mismatches and empty answers. Queries with no fact in the 1-user threads run are
dropped first (an empty answer has nothing query-specific to wait for in the page). Settings come from the
environment as in the app (KG_EMBED_MODEL must match the graph: `hash-384` for synthetic graphs).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from retrieval.config import Settings  # noqa: E402 (after the path set-up: run as a script)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
FACT_LINE = re.compile(r"^\d+\. (.+)$")
APP_START_S = 600.0  # a 1M-relation graph takes minutes to open (edge export, CSR, Milvus Lite load)


@dataclass
class Level:
    """One concurrency level of one mode: per-request latencies, wall time and the answers."""

    mode: str
    users: int
    latencies_ms: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    answers: dict[str, list[str]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    setup_s: float = 0.0  # browser: app start to a page that can search (graph opened and warmed)
    load: str = ""  # the machine's load average (1, 5, 15 min) when the level ended

    def summary(self, reference: dict[str, list[str]]) -> dict[str, Any]:
        arr = np.asarray(self.latencies_ms, dtype=np.float64)
        wrong = sorted(q for q, facts in self.answers.items() if facts != reference.get(q))
        return {
            "mode": self.mode,
            "users": self.users,
            "requests": len(self.latencies_ms),
            "wall_s": round(self.wall_s, 3),
            "throughput_qps": round(len(self.latencies_ms) / self.wall_s, 3) if self.wall_s else 0.0,
            **{f"p{p}_ms": round(float(np.percentile(arr, p)), 1) if arr.size else 0.0 for p in (50, 95, 99)},
            "max_ms": round(float(arr.max()), 1) if arr.size else 0.0,
            "empty": sum(1 for facts in self.answers.values() if not facts),
            "mismatches": len(wrong),
            "mismatched_queries": wrong[:5],
            "errors": self.errors[:5],
            "setup_s": round(self.setup_s, 1),
            "load_average": self.load,
        }


def split(queries: Sequence[str], users: int) -> list[list[str]]:
    """Round-robin: user u gets queries u, u+N, u+2N, ..."""
    return [list(queries[u::users]) for u in range(users)]


def run_users(level: Level, queries: Sequence[str], ask: Callable[[str], list[str]]) -> Level:
    """N threads, started together, each asking its share of `queries` in turn."""
    shares = split(queries, level.users)
    start = threading.Barrier(level.users + 1)
    lock = threading.Lock()

    def user(share: list[str]) -> None:
        start.wait()
        for q in share:
            t = time.perf_counter()
            try:
                facts = ask(q)
            except Exception as exc:  # recorded and counted: a load test must see every failure
                with lock:
                    level.errors.append(f"{q!r}: {type(exc).__name__}: {exc}")
                continue
            ms = (time.perf_counter() - t) * 1000
            with lock:
                level.latencies_ms.append(ms)
                level.answers[q] = facts

    threads = [threading.Thread(target=user, args=(share,)) for share in shares]
    for th in threads:
        th.start()
    start.wait()
    t0 = time.perf_counter()
    for th in threads:
        th.join()
    level.load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    level.wall_s = time.perf_counter() - t0
    return level


# --- threads ----------------------------------------------------------------------------------------


def open_shared_kg(settings: Settings, graph: str | None) -> Any:
    """The graph opened once and warmed as the app does (BM25, CSR index, one search)."""
    from retrieval.graph.runtime import open_kg
    from retrieval.models import SearchParams
    from retrieval.search.retriever import search

    kg = open_kg(settings, graph)
    _ = kg.bm25
    names = kg.index.arrays.node_names
    if names:
        search(kg, f"How does {names[0]} relate to {names[-1]}?", SearchParams.model_validate({}))
    return kg


def thread_ask(kg: Any) -> Callable[[str], list[str]]:
    """query -> the fact texts of `retriever.search` with the default parameters, on the shared KG."""
    from retrieval.models import SearchParams
    from retrieval.search.retriever import search

    params = SearchParams.model_validate({})
    return lambda q: [f.text for f in search(kg, q, params).facts]


def thread_levels(kg: Any, queries: Sequence[str], users: Sequence[int], log: Callable[[str], None]) -> list[Level]:
    levels = []
    for n in users:
        levels.append(run_users(Level("threads", n), queries, thread_ask(kg)))
        log(f"threads x{n}: {levels[-1].wall_s:.1f} s")
    return levels


# --- browser ----------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class App:
    """`streamlit run app.py` on a free localhost port, as tests/browser/conftest.py starts it."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        cmd = [
            sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(self.port),
            "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false",
        ]
        with open(log_path, "wb") as out:
            self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)

    def wait_healthy(self, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"streamlit exited {self.proc.returncode}: {self.log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as resp:  # noqa: S310
                    if resp.status == 200:
                        return
            except OSError:
                time.sleep(0.25)
        raise RuntimeError(f"streamlit not healthy after {timeout_s:.0f} s: {self.log_path.read_text()[-2000:]}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=20)


# The agent context (a code block) of the answer to the query in the box; hidden tabs are in the DOM too.
_ANSWER_JS = """(q) => {
    for (const el of document.querySelectorAll('[data-testid="stCode"]')) {
        const t = el.textContent || '';
        if (t.includes('**Query:** ' + q)) return t;
    }
    return null;
}"""


def facts_of(markdown: str) -> list[str]:
    """The numbered fact lines of the agent Markdown's "Relationships & Paths" list."""
    out = []
    for line in markdown.splitlines():
        m = FACT_LINE.match(line.strip())
        if m:
            out.append(m.group(1))
    return out


async def _browser_level(app: App, queries: Sequence[str], users: int, timeout_s: float) -> Level:
    from playwright.async_api import async_playwright

    level = Level("browser", users)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        # Warm-up: the first view opens the graph (stores, CSR, first query) before any timed search.
        t0 = time.perf_counter()
        warm = await browser.new_page()
        await warm.goto(app.url)
        await warm.get_by_placeholder("Ask a multi-hop question", exact=False).wait_for(timeout=APP_START_S * 1000)
        await warm.close()
        level.setup_s = time.perf_counter() - t0
        pages = []
        for _ in range(users):
            page = await (await browser.new_context(viewport={"width": 1600, "height": 1000})).new_page()
            await page.goto(app.url)
            await page.get_by_placeholder("Ask a multi-hop question", exact=False).wait_for(timeout=120_000)
            pages.append(page)

        async def user(page: Any, share: list[str]) -> None:
            box = page.get_by_placeholder("Ask a multi-hop question", exact=False)
            for q in share:
                await box.fill(q)
                t = time.perf_counter()
                await box.press("Enter")
                try:
                    handle = await page.wait_for_function(_ANSWER_JS, arg=q, timeout=timeout_s * 1000)
                    text = await handle.json_value()
                except Exception as exc:  # a timeout is a failed request, counted, not a crash of the run
                    level.errors.append(f"{q!r}: {type(exc).__name__}: {str(exc).splitlines()[0]}")
                    continue
                level.latencies_ms.append((time.perf_counter() - t) * 1000)
                level.answers[q] = facts_of(text)

        t0 = time.perf_counter()
        await asyncio.gather(*(user(p, share) for p, share in zip(pages, split(queries, users), strict=True)))
        level.wall_s = time.perf_counter() - t0
        level.load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        await browser.close()
    return level


def browser_levels(env: dict[str, str], queries: Sequence[str], users: Sequence[int], work: Path,
                   timeout_s: float, log: Callable[[str], None]) -> list[Level]:
    levels = []
    for n in users:
        t0 = time.perf_counter()
        app = App(env, work / f"streamlit-x{n}.log")
        try:
            app.wait_healthy()
            healthy = time.perf_counter() - t0
            levels.append(asyncio.run(_browser_level(app, queries, n, timeout_s)))
        finally:
            app.stop()
        levels[-1].setup_s += healthy
        log(f"browser x{n}: app ready in {levels[-1].setup_s:.1f} s, searches {levels[-1].wall_s:.1f} s")
    return levels


# --- the run ----------------------------------------------------------------------------------------


def load_queries(kg: Any, n: int) -> list[str]:
    """`n` queries from the graph's source bundle (its manifest names it)."""
    from bench.scale import bench_queries

    source = Path(kg.handle.manifest.get("source") or "")
    if not (source / "relations.jsonl").is_file():
        raise SystemExit(f"error: the graph's source bundle {source} is gone; the queries are built from it")
    return bench_queries(source, n)


def machine_load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def run(args: argparse.Namespace, log: Callable[[str], None]) -> dict[str, Any]:
    settings = Settings.from_env(data_dir=args.data_dir)
    users = sorted({1, *(int(u) for u in args.users.split(","))})  # the 1-user run is each mode's reference
    kg = open_shared_kg(settings, args.graph)
    try:
        graph = {"name": kg.name, "version": kg.version, **kg.handle.manifest.get("counts", {})}
        candidates = load_queries(kg, args.queries)
        # An untimed pass: keeps the queries that have an answer and warms every lazily built index.
        first = run_users(Level("threads", 1), candidates, thread_ask(kg))
        queries = [q for q in candidates if first.answers.get(q)]
        levels = thread_levels(kg, queries, users, log) if args.mode != "browser" else []
    finally:
        kg.close()  # Milvus Lite admits one process per file: the app opens it next
    report: dict[str, Any] = {
        "graph": graph, "queries": len(queries), "dropped_empty": len(candidates) - len(queries),
        "load_before": machine_load(), "levels": [lv.summary(levels[0].answers) for lv in levels],
    }
    if args.mode != "threads":
        env = {**os.environ, "KG_DATA_DIR": str(settings.data_dir), "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
        if args.graph:
            env["KG_GRAPH"] = args.graph
        env.pop("GEMINI_API_KEY", None)
        work = Path(args.work_dir)
        work.mkdir(parents=True, exist_ok=True)
        browser = browser_levels(env, queries, users, work, args.timeout, log)
        report["levels"] += [lv.summary(browser[0].answers) for lv in browser]
        # Not required to be equal (the app's search form may set other parameters), but shown.
        report["browser_equals_threads"] = sum(browser[0].answers.get(q) == first.answers[q] for q in queries)
    report["load_after"] = machine_load()
    return report


def markdown_table(report: dict[str, Any]) -> str:
    rows = ["| mode | users | requests | throughput (q/s) | × 1 user | p50 ms | p95 ms | p99 ms | max ms | empty | "
            "mismatches | errors | load average |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    one = {lv["mode"]: lv["throughput_qps"] for lv in report["levels"] if lv["users"] == 1}
    for lv in report["levels"]:
        ratio = lv["throughput_qps"] / one[lv["mode"]] if one.get(lv["mode"]) else 0.0
        rows.append(
            f"| {lv['mode']} | {lv['users']} | {lv['requests']} | {lv['throughput_qps']:.2f} | {ratio:.2f} | "
            f"{lv['p50_ms']:.0f} | {lv['p95_ms']:.0f} | {lv['p99_ms']:.0f} | {lv['max_ms']:.0f} | {lv['empty']} | "
            f"{lv['mismatches']} | {len(lv['errors'])} | {lv.get('load_average', '')} |"
        )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=None, help="data directory (default $KG_DATA_DIR)")
    parser.add_argument("--graph", default=None, help="graph name (default: the active graph)")
    parser.add_argument("--users", default="1,2,4,8,16", help="comma-separated concurrency levels")
    parser.add_argument("--queries", type=int, default=32, help="queries per level, split over the users")
    parser.add_argument("--mode", choices=("threads", "browser", "both"), default="both")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a browser search may take")
    parser.add_argument("--work-dir", default="/tmp/kg-load-bench", help="streamlit logs")
    parser.add_argument("--json", type=Path, default=None, help="write the report here")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = parser.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    report = run(args, log)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(markdown_table(report) if args.markdown else json.dumps(report, indent=1))
    bad = sum(lv["mismatches"] + len(lv["errors"]) + lv["empty"] for lv in report["levels"])
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
