"""Uploaded .zip archives, extracted safely: no path traversal, no links, no member that is both a file and a
folder, bounded by the upload and unpacked-size limits (Settings: KG_MAX_UPLOAD_MB, KG_MAX_UNPACKED_MB)."""

from __future__ import annotations

import re
import shutil
import stat
import zipfile
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from retrieval.config import Settings
from retrieval.errors import ValidationError, excerpt

MAX_MEMBERS = 200_000
MB = 1024**2
_DRIVE = re.compile(r"^[A-Za-z]:")
_IGNORED = ("__MACOSX/", ".DS_Store")


def check_member(info: zipfile.ZipInfo) -> PurePosixPath | None:
    """The member's safe relative path, None for OS litter; ValidationError for anything escaping the folder."""
    name = info.filename
    if any(name.startswith(p) or name.endswith(p) for p in _IGNORED):
        return None
    if "\x00" in name or "\\" in name or name.startswith("/") or _DRIVE.match(name):
        raise ValidationError(f"zip member {excerpt(name)}: absolute or non-portable path rejected")
    path = PurePosixPath(name)
    if any(part == ".." for part in path.parts):
        raise ValidationError(f"zip member {excerpt(name)}: path traversal ('..') rejected")
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        raise ValidationError(f"zip member {excerpt(name)}: symbolic links are not allowed")
    return path


def content_root(folder: Path) -> Path:
    """Descend through a single wrapping folder (archives made with 'compress folder')."""
    entries = [p for p in folder.iterdir() if not p.name.startswith(".")]
    while len(entries) == 1 and entries[0].is_dir():
        folder = entries[0]
        entries = [p for p in folder.iterdir() if not p.name.startswith(".")]
    return folder


def check_upload_size(settings: Settings, size: int) -> None:
    """An upload of `size` bytes is within KG_MAX_UPLOAD_MB (ValidationError naming the limit otherwise)."""
    if size > settings.max_upload_mb * MB:
        raise ValidationError(f"the upload is {size / MB:,.1f} MB; the limit is {settings.max_upload_mb:,} MB "
                              f"(KG_MAX_UPLOAD_MB)")


def _size(source: BinaryIO | Path) -> int:
    if isinstance(source, Path):
        return source.stat().st_size
    here = source.tell()
    size = source.seek(0, 2)
    source.seek(here)
    return size


def _check_layout(checked: list[tuple[zipfile.ZipInfo, PurePosixPath | None]]) -> None:
    """No member may be a file and also the folder of another member (`a` and `a/b`): refused before writing."""
    files = {rel: info.filename for info, rel in checked if rel is not None and not info.is_dir()}
    for info, rel in checked:
        if rel is None:
            continue
        for parent in rel.parents:
            if parent in files:
                raise ValidationError(f"zip member {excerpt(info.filename)}: its folder {excerpt(files[parent])} "
                                      f"is also a file in the archive")


def safe_extract_zip(source: BinaryIO | Path, dest: Path, settings: Settings | None = None) -> Path:
    """Check the upload's size and every member first, then extract into `dest`; returns the folder holding the
    files."""
    settings = settings or Settings()
    check_upload_size(settings, _size(source))
    try:
        archive = zipfile.ZipFile(source)
    except zipfile.BadZipFile as exc:
        raise ValidationError(f"not a zip archive: {exc}") from exc
    with archive:
        members = archive.infolist()
        if len(members) > MAX_MEMBERS:
            raise ValidationError(f"zip has {len(members):,} members; the limit is {MAX_MEMBERS:,}")
        unpacked = sum(m.file_size for m in members)
        if unpacked > settings.max_unpacked_mb * MB:
            raise ValidationError(f"the zip unpacks to {unpacked / MB:,.1f} MB; the limit is "
                                  f"{settings.max_unpacked_mb:,} MB (KG_MAX_UNPACKED_MB)")
        checked = [(m, check_member(m)) for m in members]
        _check_layout(checked)
        root = dest.resolve()
        for info, rel in checked:
            if rel is None:
                continue
            target = (root / rel).resolve()
            if target != root and root not in target.parents:  # belt and braces over the '..' check
                raise ValidationError(f"zip member {excerpt(info.filename)}: resolves outside the upload folder")
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out, MB)  # zipfile reads no more than the header's file_size
    return content_root(root)

