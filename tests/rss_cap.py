"""Run a module (`python -m MODULE ARGS`) in a child process whose resident memory is capped: a watchdog thread in
the child reads its own RSS (/proc/self/statm) every 10 ms and ends the child (exit status 99) once it passes the
cap; the child reports its peak RSS (the kernel's high-water mark VmHWM, of this program only: getrusage's
`ru_maxrss` keeps the forking parent's across exec) as its last stderr line, so a spike between two reads is still
seen. RLIMIT_AS would cap address space, not memory: Kuzu and ONNX Runtime reserve far more than they use."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

OVER_CAP = 99
_WRAPPER = r"""
import atexit, os, re, runpy, sys, threading, time
cap = int(sys.argv[1]) << 20
page = os.sysconf("SC_PAGE_SIZE")

def watch():
    while True:
        with open("/proc/self/statm") as fh:
            rss = int(fh.read().split()[1]) * page
        if rss > cap:
            os.write(2, f"\nover the RSS cap: {rss >> 20} MB > {cap >> 20} MB\n".encode())
            os._exit(99)
        time.sleep(0.01)

threading.Thread(target=watch, daemon=True).start()
def peak():
    with open("/proc/self/status") as fh:
        kb = int(re.search(r"VmHWM:\s+(\d+) kB", fh.read()).group(1))
    os.write(2, f"\npeak RSS {kb >> 10} MB\n".encode())

atexit.register(peak)
sys.argv = sys.argv[2:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


@dataclass(frozen=True)
class Capped:
    returncode: int
    peak_mb: int | None  # None: the child was ended before it could say (over the cap, or killed)
    stdout: str
    stderr: str

    @property
    def over_cap(self) -> bool:
        return self.returncode == OVER_CAP


def run_capped(module: str, *args: str, cap_mb: int, timeout_s: float, cwd: Path,
               env: dict[str, str] | None = None) -> Capped:
    """`python -m module args` with at most `cap_mb` MB resident; its exit status, peak RSS and output."""
    proc = subprocess.run([sys.executable, "-c", _WRAPPER, str(cap_mb), module, *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout_s, env={**os.environ, **(env or {})}, check=False)
    peak = re.findall(r"peak RSS (\d+) MB", proc.stderr)
    return Capped(proc.returncode, int(peak[-1]) if peak else None, proc.stdout, proc.stderr)
