"""What the import paths refuse from the hostile corpus: payloads no back end can store (NUL, lone surrogates)
with `file:line: field: reason` and nothing half-written; JSON bombs with a clear error in bounded time and
memory. The live graph of the data directory stays as it was."""

from __future__ import annotations

import json
import os
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from retrieval.cli import memory as memory_cli
from retrieval.config import Settings
from retrieval.embedding import Embedder
from retrieval.errors import IngestError, ValidationError
from retrieval.explore.export import from_json
from retrieval.graph import catalog
from retrieval.ingest.build import ingest
from retrieval.ingest.bundle import MAX_LINE_BYTES, MAX_NESTING, load_bundle
from tests.data.hostile.graph import GRAPH, copy_graph, hostile_data_dir
from tests.data.hostile.make_bundle import (
    REJECT_FIELDS,
    expected_error,
    load_payloads,
    rejected,
    write_bombs,
    write_rejected,
)

pytestmark = pytest.mark.integration

BOMB_SECONDS = 5.0  # per bomb, on a loaded 2-core machine; each takes well under a second alone
BOMB_PEAK_BYTES = 2 * MAX_LINE_BYTES + 16 * 1024 * 1024  # the reader holds at most one capped line (and its text)


@pytest.fixture
def live_settings(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, embedder: Embedder) -> Settings:
    """A data dir whose active graph is the hostile corpus (a copy of the one built once per process)."""
    src, _ = hostile_data_dir(tmp_path_factory.mktemp("hostile"), embedder)
    settings = Settings.from_env(env={}, data_dir=tmp_path / "kg")
    copy_graph(src, settings.data_dir)
    catalog.set_active(settings.data_dir, GRAPH)
    return settings


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under `root` with its size and mtime: a snapshot to compare before and after."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            out[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def test_nul_and_lone_surrogates_are_refused_in_every_field_with_nothing_written(
    live_settings: Settings, tmp_path: Path, embedder: Embedder
) -> None:
    refused = rejected()
    assert {p.reject for p in refused} == {"NUL", "lone surrogate"} and len(refused) >= 3
    live = catalog.resolve(live_settings.data_dir, GRAPH)
    before = tree(live_settings.data_dir)
    messages = []
    for p in refused:
        for file, field in REJECT_FIELDS:
            bundle = write_rejected(tmp_path / f"{p.id}-{file}-{field}", p, file, field)
            with pytest.raises(IngestError) as caught:
                ingest(live_settings, bundle, fmt="bundle", name=GRAPH, embedder=embedder, progress=False)
            assert str(caught.value) == expected_error(bundle, p, file, field)
            messages.append(str(caught.value))
    assert len(messages) == len(refused) * len(REJECT_FIELDS)
    assert tree(live_settings.data_dir) == before  # no version, build dir, link or lock file changed
    assert catalog.resolve(live_settings.data_dir, GRAPH).version == live.version
    print(f"\n{len(refused)} refused payloads x {len(REJECT_FIELDS)} fields: {len(messages)} clean rejections, e.g.\n"
          f"  {messages[0]}\n  {messages[-1]}")


def _raised(fn: Callable[[], object]) -> Exception | None:
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the caller asserts on the exact type
        return exc
    return None


def _bounded(fn: Callable[[], object]) -> tuple[Exception | None, float, int]:
    """Run `fn` twice: timed, then under tracemalloc (which slows it); what it raised, seconds, peak bytes."""
    start = time.perf_counter()
    raised = _raised(fn)
    seconds = time.perf_counter() - start
    tracemalloc.start()
    try:
        _raised(fn)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return raised, seconds, peak


def test_json_bombs_are_refused_quickly_with_bounded_memory(
    live_settings: Settings, tmp_path: Path, embedder: Embedder
) -> None:
    bombs = write_bombs(tmp_path / "bombs", MAX_LINE_BYTES, MAX_NESTING)
    before = tree(live_settings.data_dir)
    app = typer.Typer()
    memory_cli.register(app)
    report = []
    for name, (path, message) in bombs.items():
        if name == "memory-deep":
            raw = path.read_bytes()
            raised, seconds, peak = _bounded(lambda raw=raw: from_json(raw))  # type: ignore[misc]
            assert isinstance(raised, ValidationError) and "not a JSON document" in str(raised)
            out = CliRunner().invoke(app, ["memory", "store", str(path), "--tenant", "t", "--data-dir",
                                           str(live_settings.data_dir)], env={})
            assert out.exit_code == 2 and message in out.stderr, out.output
        else:
            fmt = "hipporag" if name.startswith("hipporag") else "bundle"
            raised, seconds, peak = _bounded(
                lambda path=path, fmt=fmt: ingest(  # type: ignore[misc]
                    live_settings, path, fmt=fmt, name=GRAPH, embedder=embedder, progress=False)
            )
            assert isinstance(raised, IngestError), (name, raised)
            assert message in str(raised), (name, str(raised)[:300])
        assert seconds < BOMB_SECONDS, (name, seconds)
        assert peak < BOMB_PEAK_BYTES, (name, peak)
        report.append(f"{name}: {path.stat().st_size if path.is_file() else _size(path):,} bytes -> "
                      f"{seconds * 1000:.0f} ms, peak {peak / 2**20:.1f} MiB: {str(raised)[-70:]}")
    assert tree(live_settings.data_dir) == before
    print("\n" + "\n".join(report))


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir())


def test_nesting_up_to_the_limit_is_accepted(tmp_path: Path) -> None:
    """The nesting cap refuses bombs, not data: properties exactly MAX_NESTING levels deep still load."""
    bombs = write_bombs(tmp_path / "bombs", MAX_LINE_BYTES, MAX_NESTING)
    folder, _ = bombs["over-nesting"]
    lines = (folder / "entities.jsonl").read_text(encoding="utf-8").splitlines()
    deepest: object = []
    for _ in range(MAX_NESTING - 2):  # properties (1) -> "x" (2) -> ... -> the innermost list (MAX_NESTING)
        deepest = [deepest]
    lines[-1] = json.dumps({"id": "deep", "name": "deep", "properties": {"x": deepest}})
    (folder / "entities.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    data = load_bundle(folder)
    assert data.entities[-1].properties == {"x": deepest}


def test_every_corpus_payload_is_accounted_for() -> None:
    """The figures the hostile tier reports: payloads tried, refused at ingest (by design), ingested."""
    payloads = load_payloads()
    refused = rejected(payloads)
    assert len(payloads) >= 30
    assert sorted(p.id for p in refused) == ["lone-surrogate-high", "lone-surrogate-low", "nul", "path-nul"]
    print(f"\npayloads: {len(payloads)} tried, {len(payloads) - len(refused)} ingested, {len(refused)} refused "
          f"({', '.join(f'{p.id}: {p.reject}' for p in refused)})")
