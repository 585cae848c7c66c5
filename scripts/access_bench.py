"""What access control costs a page run: `authorize` per check, identity resolution from claims, and an audit entry
(one fsynced SQLite transaction). `python scripts/access_bench.py [--entries N]`; prints the numbers (README,
Benchmarks)."""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from retrieval.access import ACTIONS, AuditLog, identity_for  # noqa: E402
from retrieval.access.policy import AccessPolicy, refusal  # noqa: E402


def policy(grants: int) -> AccessPolicy:
    """An access file of `grants` grants over 50 groups and 200 graphs (a large organisation's)."""
    rows = [{"role": ("viewer", "annotator", "curator", "admin")[i % 4], "groups": [f"g{i % 50}"],
             "users": [f"u{i}@example.org"], "graphs": [f"graph{i % 200}"], "tenants": [f"t{i % 20}"]}
            for i in range(grants)]
    return AccessPolicy.model_validate({"grant": rows})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entries", type=int, default=300)
    args = parser.parse_args()
    pol = policy(1000)
    claims = {"sub": "s-1", "email": "u7@example.org", "email_verified": True,
              "groups": [f"g{i}" for i in range(0, 50, 5)]}
    t = time.perf_counter()
    for _ in range(1000):
        who = identity_for(pol, claims)
    resolve_us = (time.perf_counter() - t) / 1000 * 1e6
    t = time.perf_counter()
    n = 0
    for _ in range(2000):
        for name in ACTIONS:
            refusal(who, name, graph="graph7", tenant="t7")
            n += 1
    check_us = (time.perf_counter() - t) / n * 1e6
    with tempfile.TemporaryDirectory() as tmp:
        log = AuditLog.in_data_dir(Path(tmp))
        times = []
        for i in range(args.entries):
            t = time.perf_counter()
            log.record("u7@example.org", "console", graph="graph7", detail=f"MATCH (n) RETURN n LIMIT {i}")
            times.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        rows = log.entries()
        read_ms = (time.perf_counter() - t) * 1000
    print(f"identity from claims, 1,000 grants: {resolve_us:.0f} µs")
    print(f"authorize (one check): {check_us:.1f} µs")
    print(f"audit entry, fsynced: median {statistics.median(times):.2f} ms, p95 "
          f"{sorted(times)[int(0.95 * len(times))]:.2f} ms over {len(times)}")
    print(f"read {len(rows)} entries: {read_ms:.1f} ms")


if __name__ == "__main__":
    main()
