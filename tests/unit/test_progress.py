"""Stage lines with the time left (the Data page's import box)."""

from __future__ import annotations

from retrieval.ingest.progress import stage_line, time_left


def test_time_left_at_the_rate_so_far() -> None:
    assert time_left(10.0, 100, 400) == 30.0
    assert time_left(0.0, 0, 400) is None and time_left(5.0, 0, 400) is None and time_left(5.0, 3, 0) is None
    assert stage_line("embedding Entities", 100, 400, 10.0) == "… embedding Entities: 100 / 400, about 30 s left"
    assert stage_line("embedding Entities", 400, 400, 12.5) == "✓ embedding Entities: 400 / 400 in 12.5 s"
    assert stage_line("layout", 0, 400, 0.2) == "… layout: 0 / 400"  # no rate yet: the count alone
    assert stage_line("x", 1_000, 100_000, 600.0) == "… x: 1,000 / 100,000, about 16.5 h left"


def test_work_done_before_the_stage_was_heard_of_is_no_part_of_the_rate() -> None:
    # 512 embedded by a thread before the first report; 100 more in the 10 s since: 2,388 left at 10 per second
    assert stage_line("embedding Entities", 612, 3_000, 10.0, since=512) == \
        "… embedding Entities: 612 / 3,000, about 4 min left"
