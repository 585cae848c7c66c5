"""Latency of the Query console (`retrieval.explore.console.run_query`) on a graph: the first query of the process
(it makes the console's copy of the version if there is none, and starts a worker), then medians over repeats.

    .venv/bin/python scripts/console_bench.py --data-dir data/kg [--graph demo] [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from retrieval.config import Settings  # noqa: E402
from retrieval.explore.console import run_query  # noqa: E402
from retrieval.graph import catalog  # noqa: E402

QUERIES = {
    "10 names": "MATCH (e:Entity) RETURN e.name LIMIT 10",
    "50 paths as a graph": "MATCH (a:Entity)-[r:RELATES]-(b:Entity) RETURN a, r, b LIMIT 50",
    "count by type": "MATCH (e:Entity) RETURN e.type AS type, count(*) AS n ORDER BY n DESC",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("data/kg"))
    parser.add_argument("--graph", default=None)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    settings = Settings.from_env(env={}, data_dir=args.data_dir)
    handle = catalog.resolve(settings.data_dir, args.graph)
    start = time.perf_counter()
    run_query(settings, handle, "RETURN 1")
    print(f"graph {handle.name} version {handle.version}; load average {os.getloadavg()[0]:.1f}")
    print(f"first query of the process: {(time.perf_counter() - start) * 1000:.0f} ms")
    for label, query in QUERIES.items():
        times = []
        for _ in range(args.runs):
            t = time.perf_counter()
            run_query(settings, handle, query)
            times.append((time.perf_counter() - t) * 1000)
        times.sort()
        print(f"{label:20} median {statistics.median(times):6.1f} ms  p90 {times[int(len(times) * 0.9)]:6.1f} ms")


if __name__ == "__main__":
    main()
