"""Stage progress as people read it: the stage, its count and the time left, in the terminal (tqdm bars) and as
one line of text for the app."""

from __future__ import annotations

import time
from typing import Any

from tqdm import tqdm


def time_left(elapsed: float, done: int, total: int) -> float | None:
    """Seconds left at the rate so far (None before the first item or without a total)."""
    if done <= 0 or total <= 0 or elapsed <= 0:
        return None
    return max(total - done, 0) * elapsed / done


def stage_line(stage: str, done: int, total: int, elapsed: float, since: int = 0) -> str:
    """`stage: done / total, about N s left` (the count alone until a rate is known; `done` once complete).
    `since`: the count when the stage was first heard of (work done before it, e.g. by a thread that started
    earlier, is no part of the rate seen since)."""
    if total and done >= total:
        return f"✓ {stage}: {done:,} / {total:,} in {elapsed:.1f} s"
    left = time_left(elapsed, done - since, total - since)
    tail = f", about {_duration(left)} left" if left is not None and elapsed >= 1.0 else ""
    return f"… {stage}: {done:,} / {total:,}{tail}"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(seconds, 1):.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class StageClock:
    """When each stage started, so its line can say the time left. State is real, hence a class."""

    def __init__(self) -> None:
        self.started: dict[str, tuple[float, int]] = {}  # stage -> (when first heard of, its count then)

    def line(self, stage: str, done: int, total: int) -> str:
        start, since = self.started.setdefault(stage, (time.perf_counter(), done))
        return stage_line(stage, done, total, time.perf_counter() - start, since)


class StageBars:
    """Stage reports (stage, done, total) as one tqdm bar per stage (count, rate, time left), closed when the next
    stage begins."""

    def __init__(self) -> None:
        self.stage = ""
        self.bar: tqdm[Any] | None = None

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage != self.stage:
            self.close()
            self.stage, self.bar = stage, tqdm(total=total, desc=stage, unit="item", leave=False)
        if self.bar is not None:
            self.bar.total = total
            self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
