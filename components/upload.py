"""Uploaded .zip archives, extracted safely: no path traversal, no links, bounded size."""

from __future__ import annotations

import re
import shutil
import stat
import zipfile
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from retrieval.errors import ValidationError

MAX_MEMBERS = 200_000
MAX_TOTAL_BYTES = 8 * 1024**3  # uncompressed; a zip bomb stops here
_DRIVE = re.compile(r"^[A-Za-z]:")
_IGNORED = ("__MACOSX/", ".DS_Store")


def check_member(info: zipfile.ZipInfo) -> PurePosixPath | None:
    """The member's safe relative path, None for OS litter; ValidationError for anything escaping the folder."""
    name = info.filename
    if any(name.startswith(p) or name.endswith(p) for p in _IGNORED):
        return None
    if "\x00" in name or "\\" in name or name.startswith("/") or _DRIVE.match(name):
        raise ValidationError(f"zip member {name!r}: absolute or non-portable path rejected")
    path = PurePosixPath(name)
    if any(part == ".." for part in path.parts):
        raise ValidationError(f"zip member {name!r}: path traversal ('..') rejected")
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        raise ValidationError(f"zip member {name!r}: symbolic links are not allowed")
    return path


def content_root(folder: Path) -> Path:
    """Descend through a single wrapping folder (archives made with 'compress folder')."""
    entries = [p for p in folder.iterdir() if not p.name.startswith(".")]
    while len(entries) == 1 and entries[0].is_dir():
        folder = entries[0]
        entries = [p for p in folder.iterdir() if not p.name.startswith(".")]
    return folder


def safe_extract_zip(source: BinaryIO | Path, dest: Path) -> Path:
    """Check every member first, then extract into `dest`; returns the folder holding the files."""
    try:
        archive = zipfile.ZipFile(source)
    except zipfile.BadZipFile as exc:
        raise ValidationError(f"not a zip archive: {exc}") from exc
    with archive:
        members = archive.infolist()
        if len(members) > MAX_MEMBERS:
            raise ValidationError(f"zip has {len(members):,} members; the limit is {MAX_MEMBERS:,}")
        if sum(m.file_size for m in members) > MAX_TOTAL_BYTES:
            raise ValidationError(f"zip expands beyond {MAX_TOTAL_BYTES // 1024**3} GiB")
        checked = [(m, check_member(m)) for m in members]
        root = dest.resolve()
        for info, rel in checked:
            if rel is None:
                continue
            target = (root / rel).resolve()
            if target != root and root not in target.parents:  # belt and braces over the '..' check
                raise ValidationError(f"zip member {info.filename!r}: resolves outside the upload folder")
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out, 1024 * 1024)
    return content_root(root)
