"""The UI's one door: app_state owns every cached engine call; components get what they need as arguments.

Read from the source with `ast` (nothing is imported): no component imports app_state, app_state imports no
component, the shared helpers (ui_*.py) import neither, and only app_state caches (st.cache_data/cache_resource).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPONENTS = sorted((ROOT / "components").glob("*.py"))
PAGES = sorted((ROOT / "pages").glob("*.py"))
SHARED = sorted(ROOT.glob("ui_*.py"))
CACHES = {"cache_data", "cache_resource"}


def imported(path: Path) -> set[str]:
    """Every module `path` imports, at the top or inside a function (`from a import b` counts as a and a.b)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def within(modules: set[str], package: str) -> set[str]:
    return {m for m in modules if m == package or m.startswith(package + ".")}


def caches(path: Path) -> list[str]:
    """Where `path` uses Streamlit's caches: `st.cache_data`/`st.cache_resource` (any alias), or imports them."""
    uses = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr in CACHES:
            uses.append(f"{path.name}:{node.lineno} .{node.attr}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("streamlit"):
            uses += [f"{path.name}:{node.lineno} import {a.name}" for a in node.names if a.name in CACHES]
    return uses


def test_the_files_are_found() -> None:
    assert len(COMPONENTS) > 10 and len(PAGES) >= 8 and SHARED
    assert within(imported(ROOT / "app.py"), "components")  # the reader sees imports where they are


@pytest.mark.parametrize("path", COMPONENTS, ids=lambda p: p.name)
def test_no_component_imports_the_app_state(path: Path) -> None:
    assert not within(imported(path), "app_state"), f"{path.name} imports app_state: take it as an argument"


def test_the_app_state_imports_no_component() -> None:
    assert not within(imported(ROOT / "app_state.py"), "components")


@pytest.mark.parametrize("path", SHARED, ids=lambda p: p.name)
def test_the_shared_ui_modules_import_neither_side(path: Path) -> None:
    modules = imported(path)
    assert not within(modules, "app_state") and not within(modules, "components"), path.name


@pytest.mark.parametrize("path", COMPONENTS + PAGES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_only_the_app_state_caches(path: Path) -> None:
    assert not caches(path), "cache it in app_state.py and pass the result or a callable in"


def test_the_app_state_is_where_the_caches_are() -> None:
    assert len(caches(ROOT / "app_state.py")) >= 10
