"""The architecture is a test: the import-linter contracts in pyproject.toml (engine layers, no cycles, no
streamlit in the engine, benchmarks outside it) hold on the code, and break when an import goes the wrong way."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")


def lint(root: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    only = [arg for c in contracts for arg in ("--contract", c)]
    return subprocess.run([str(LINT), "--no-cache", "--config", str(root / "pyproject.toml"), *only], cwd=root,
                          capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(root)})


def copy_tree(tmp_path: Path) -> Path:
    for name in ("retrieval", "bench", "components"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "assets"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    return tmp_path


def test_contracts_hold() -> None:
    done = lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(("module", "line", "contract"), [
    # the graph layer reaching up into search
    ("retrieval/graph/ppr.py", "from retrieval.search import retriever", "layers"),
    # a cycle inside one package: the retriever already imports nomatch
    ("retrieval/search/nomatch.py", "from retrieval.search import retriever", "acyclic"),
    ("retrieval/search/tools.py", "import streamlit", "no-streamlit"),
    ("retrieval/search/tools.py", "import bench.synth", "no-bench"),
])
def test_a_wrong_import_breaks_its_contract(tmp_path: Path, module: str, line: str, contract: str) -> None:
    root = copy_tree(tmp_path)
    assert lint(root, contract).returncode == 0  # the copy holds, before the wrong import
    with (root / module).open("a", encoding="utf-8") as fh:
        fh.write(f"\n{line}  # noqa\n")
    done = lint(root, contract)
    assert done.returncode != 0, done.stdout
    assert "1 broken" in done.stdout
