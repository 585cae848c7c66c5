"""Uploaded zips: traversal, absolute paths and links are rejected before anything is written."""

from __future__ import annotations

import io
import stat
import zipfile
from pathlib import Path

import pytest

from retrieval.errors import ValidationError
from retrieval.ingest.archive import safe_extract_zip


def make_zip(members: dict[str, bytes], links: dict[str, str] | None = None) -> io.BytesIO:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, target)
    buf.seek(0)
    return buf


def test_extracts_and_descends_into_the_wrapping_folder(tmp_path: Path) -> None:
    buf = make_zip({"bundle/chunks.jsonl": b"{}\n", "bundle/sub/x.txt": b"x", "__MACOSX/bundle/._chunks.jsonl": b""})
    root = safe_extract_zip(buf, tmp_path)
    assert root == (tmp_path / "bundle").resolve()
    assert (root / "chunks.jsonl").read_bytes() == b"{}\n" and (root / "sub" / "x.txt").is_file()
    assert not (tmp_path / "__MACOSX").exists()


@pytest.mark.parametrize(
    "name", ["../evil.txt", "ok/../../evil.txt", "/etc/evil.txt", "C:/evil.txt", "a\\..\\evil.txt"]
)
def test_rejects_escaping_member_names_and_writes_nothing(tmp_path: Path, name: str) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(ValidationError, match="zip member"):
        safe_extract_zip(make_zip({"good.txt": b"1", name: b"evil"}), dest)
    assert list(dest.iterdir()) == [] and not (tmp_path / "evil.txt").exists()


def test_rejects_symbolic_links(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="symbolic links"):
        safe_extract_zip(make_zip({}, links={"link": "/etc/passwd"}), tmp_path)


def test_rejects_a_file_that_is_not_a_zip(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="not a zip"):
        safe_extract_zip(io.BytesIO(b"plain text"), tmp_path)


def test_import_errors_name_the_archive_member_never_the_temporary_folder(tmp_path: Path) -> None:
    """What the Data page shows for a malformed member of an upload: `archive.zip/member:line: field: reason`."""
    from components.ingest_panel import relabel
    from retrieval.errors import IngestError
    from retrieval.ingest.load import load_data

    buf = make_zip({"export/graph.graphml": b'<graphml><graph>\n<node id="a">\n</graph></graphml>'})
    tmp = tmp_path / "kg-upload-123"
    tmp.mkdir()
    folder = safe_extract_zip(buf, tmp)
    with pytest.raises(IngestError) as caught:
        load_data(folder, "auto")
    shown = relabel(str(caught.value), (tmp, "my export.zip"))
    assert shown == "my export.zip/export/graph.graphml:3: xml: mismatched tag"
    assert str(tmp_path) not in shown
