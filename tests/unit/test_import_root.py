"""Server folders are read only under the import root (issue 21, item 1b): `server_folder`, the one check the Data
page calls before (and again at) a server-folder import."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from retrieval.config import Settings
from retrieval.errors import ValidationError
from retrieval.ingest.load import IMPORT_ROOT_RULE, server_folder


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Settings, Path, Path]:
    """root/team/bundle (a folder to import), outside/secret (a folder beside the root), links of both kinds."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "team" / "bundle").mkdir(parents=True)
    (root / "team" / "bundle" / "chunks.jsonl").write_text("{}\n")
    (outside / "secret").mkdir(parents=True)
    (outside / "secret" / "password.txt").write_text("hunter2")
    os.symlink(outside / "secret", root / "escape")  # a link in the root leading out of it
    os.symlink(root / "team" / "bundle", root / "alias")  # a link that stays inside
    return Settings.from_env(env={"KG_IMPORT_ROOT": str(root)}), root, outside


def test_folders_inside_the_root_are_allowed(layout: tuple[Settings, Path, Path]) -> None:
    settings, root, _ = layout
    bundle = (root / "team" / "bundle").resolve()
    assert server_folder(settings, "team/bundle") == bundle
    assert server_folder(settings, f"  {root / 'team' / 'bundle'}  ") == bundle  # absolute, inside
    assert server_folder(settings, "team/../team/bundle") == bundle  # '..' that stays inside
    assert server_folder(settings, "alias") == bundle  # a link that stays inside


@pytest.mark.parametrize("text", ["..", "../outside/secret", "team/../../outside/secret", "escape", "escape/",
                                  "/etc", "/", "~", "team/bundle/../../../outside"])
def test_escapes_are_refused_by_the_rule_never_naming_the_resolved_path(layout: tuple[Settings, Path, Path],
                                                                        text: str) -> None:
    settings, _, outside = layout
    with pytest.raises(ValidationError) as refused:
        server_folder(settings, text)
    message = str(refused.value)
    if text == "~":  # a folder named "~" inside the root: there is none
        assert message == "no folder '~' inside the import root"
        return
    assert message == IMPORT_ROOT_RULE
    assert str(outside) not in message and "secret" not in message


def test_a_link_inside_the_folder_leading_out_is_refused(layout: tuple[Settings, Path, Path]) -> None:
    settings, root, outside = layout
    os.symlink(outside / "secret" / "password.txt", root / "team" / "bundle" / "nodes.csv")
    with pytest.raises(ValidationError) as refused:
        server_folder(settings, "team/bundle")
    assert str(refused.value) == f"{IMPORT_ROOT_RULE} (the folder holds such a link: 'nodes.csv')"


def test_without_an_import_root_no_server_folder_is_read(layout: tuple[Settings, Path, Path]) -> None:
    _, root, _ = layout
    for settings in (Settings.from_env(env={}), Settings.from_env(env={"KG_IMPORT_ROOT": ""})):
        assert settings.import_root is None
        with pytest.raises(ValidationError, match=r"switched off \(KG_IMPORT_ROOT is not set\)"):
            server_folder(settings, str(root / "team" / "bundle"))
    missing = Settings.from_env(env={"KG_IMPORT_ROOT": str(root / "nowhere")})
    with pytest.raises(ValidationError, match="KG_IMPORT_ROOT does not name a folder on the server"):
        server_folder(missing, "team")
    settings = layout[0]
    for bad in ("", "   ", "team\x00bundle"):
        with pytest.raises(ValidationError):
            server_folder(settings, bad)
    with pytest.raises(ValidationError, match="no folder 'team/nothing' inside the import root"):
        server_folder(settings, "team/nothing")
