"""Reading books: chapters from Markdown headings, the PDF outline, the EPUB TOC and heading lines (a front table
of contents not cut at); token windows inside one chapter; malformed files refused with `file:line: field: reason`
relative to the input folder. PDFs and EPUBs are written by fpdf2 and EbookLib."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from retrieval.config import Settings
from retrieval.errors import ConfigError, IngestError
from retrieval.ingest.books import heading_cuts, read_book
from retrieval.ingest.documents import MIN_CHUNK_TOKENS, _chunk_sizes, book_chunks, chunk_id, load_tokenizer, windows
from tests.data.documents.make_docs import LIGHTHOUSE, write_epub, write_pdf

BODY = "The keeper climbed the stairs every night and lit the lamp before the ships came in from the sea."


def chapters(text: str) -> list[str]:
    return [t for _, _, t in heading_cuts(text) if t is not None]


def described(path: Path) -> tuple[str, str, str, list[str]]:
    """A book file as (title, author, where its chapters came from, chapter titles)."""
    book = read_book(path, path.name)
    return book.title, book.author, book.chapters_from, [s.chapter for s in book.sections]


def test_heading_lines_in_their_many_spellings() -> None:
    text = (
        "CHAPTER I.\nDown the Rabbit-Hole\n\n" + BODY + "\n\n"
        "Chapter 2: The Pool of Tears\n\n" + BODY + "\n\n"
        "BOOK THE FIRST—RECALLED TO LIFE\n\n" + BODY + "\n\n"
        "Stave Three: The Second of the Three Spirits\n\n" + BODY + "\n\n"
        "Chapter Twenty-One\n" + BODY + "\n\n"
        "Canto XIV\n\n" + BODY + "\n\n"
        "PROLOGUE\n\n" + BODY + "\n"
    )
    assert chapters(text) == [
        "CHAPTER I. Down the Rabbit-Hole", "Chapter 2: The Pool of Tears", "BOOK THE FIRST—RECALLED TO LIFE",
        "Stave Three: The Second of the Three Spirits", "Chapter Twenty-One", "Canto XIV", "PROLOGUE",
    ]


def test_sentences_that_start_like_headings_are_not_cut_at() -> None:
    text = (
        "Part of the reason was the weather, which kept the boats in harbour for a week.\n\n"
        "Section 3 of the Act provides that the keeper\nshall light the lamp at dusk.\n\n"
        "Book mix and match was the game they played.\n\n"
        "Chapter 4 of the report, on the other hand,\nsays nothing of it.\n"
    )
    assert chapters(text) == []


def test_a_front_table_of_contents_is_dropped_not_cut_at() -> None:
    toc = "Contents\n\nChapter 1. Arrival\nChapter 2. The Storm\nChapter 3. Departure\n\n"
    body = "".join(f"Chapter {n}. {t}\n\n{BODY}\n\n" for n, t in ((1, "Arrival"), (2, "The Storm"), (3, "Departure")))
    cuts = heading_cuts(toc + body)
    assert [t for _, _, t in cuts] == [None, "Chapter 1. Arrival", "Chapter 2. The Storm", "Chapter 3. Departure"]
    start, end, _ = cuts[0]
    assert (start, end) == (0, len(toc.rstrip("\n")))  # the Contents line through its last entry
    # a TOC in other spellings than the headings, separated by blank lines, with page numbers
    toc2 = "".join(f"CHAPTER {r}. {t} .... {p}\n\n" for r, t, p in (("I", "Arrival", 1), ("II", "The Storm", 9)))
    assert chapters(toc2 + "A few words before the story.\n\n" + body) == [
        "Chapter 1. Arrival", "Chapter 2. The Storm", "Chapter 3. Departure"]


def test_markdown_front_matter_headings_and_fenced_code(tmp_path: Path) -> None:
    md = tmp_path / "guide.md"
    md.write_text('---\ntitle: "A Guide: Part One"\nauthor: Ada\n---\n\n# Setting Out\n\nIntro text.\n\n'
                  "```\n# not a heading\n```\n\nMore.\n\nSecond Part\n-----------\n\nText two.\n", encoding="utf-8")
    assert described(md) == ("A Guide: Part One", "Ada", "headings", ["Setting Out", "Second Part"])
    assert "# not a heading" in read_book(md, "guide.md").sections[0].text
    lone_h1 = tmp_path / "notes.md"
    lone_h1.write_text("# My Notes\n\n## One\n\nA.\n\n## Two\n\nB.\n", encoding="utf-8")
    assert described(lone_h1) == ("My Notes", "", "headings", ["One", "Two"])
    bad = tmp_path / "bad.md"
    bad.write_text("---\ntitle: [unclosed\n---\ntext\n", encoding="utf-8")
    with pytest.raises(IngestError, match=r"^bad\.md:\d+: front matter: not valid YAML"):
        read_book(bad, "bad.md")


def test_pdf_outline_gives_chapters_and_pages_without_it_heading_lines(tmp_path: Path) -> None:
    pdf = write_pdf(tmp_path / "l.pdf", "The Lighthouse", "Ana Costa", LIGHTHOUSE)
    assert described(pdf) == ("The Lighthouse", "Ana Costa", "outline", ["The Keeper", "The Storm", "The Medal"])
    book = read_book(pdf, "l.pdf")
    assert [book.page_of(s.start) for s in book.sections] == [1, 2, 3]
    assert book.sections[1].text.strip().startswith("In 1911")  # the printed title is not in the text
    plain = write_pdf(tmp_path / "p.pdf", "Plain", "", [(f"Chapter {i + 1}", b) for i, (_, b) in
                                                       enumerate(LIGHTHOUSE)], outline=False)
    assert described(plain)[2:] == ("heading lines", ["Chapter 1", "Chapter 2", "Chapter 3"])


def test_encrypted_and_corrupt_pdfs_are_refused(tmp_path: Path) -> None:
    locked = write_pdf(tmp_path / "locked.pdf", "Secret", "", LIGHTHOUSE[:1], password="s3cret")
    with pytest.raises(IngestError, match=r"^books/locked\.pdf:0: pdf: encrypted"):
        read_book(locked, "books/locked.pdf")


@pytest.mark.parametrize(("name", "raw", "error"), [
    ("broken.pdf", b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\ntrailer garbage", r"broken\.pdf:0: pdf: "),
    ("junk.epub", b"PK\x03\x04 not really a zip", r"junk\.epub:0: epub: not a valid EPUB"),
    ("image.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", r"image\.txt:0: encoding: a binary file"),
    ("latin.txt", b"first line\nsecond caf\xe9 line\n", r"latin\.txt:2: encoding: not valid UTF-8 at byte 21"),
])
def test_damaged_files_are_refused_with_file_line_field_reason(tmp_path: Path, name: str, raw: bytes,
                                                               error: str) -> None:
    (tmp_path / name).write_bytes(raw)
    with pytest.raises(IngestError, match="^" + error):
        read_book(tmp_path / name, name)


def test_epub_toc_anchors_split_one_file_and_the_nav_is_not_text(tmp_path: Path) -> None:
    one = write_epub(tmp_path / "a.epub", "The Storm", "Ana Costa", LIGHTHOUSE)
    assert described(one) == ("The Storm", "Ana Costa", "toc", ["The Keeper", "The Storm", "The Medal"])
    assert read_book(one, "a.epub").sections[0].text.strip().startswith("Marta Silva kept")  # no heading, no nav list
    many = write_epub(tmp_path / "b.epub", "Files", "", LIGHTHOUSE, anchors=False)
    assert described(many)[3] == ["The Keeper", "The Storm", "The Medal"]


def test_malformed_and_hostile_epubs_are_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty.epub"
    with zipfile.ZipFile(empty, "w") as zf:
        zf.writestr("mimetype", "application/epub+zip")
    with pytest.raises(IngestError, match=r"^empty\.epub:0: epub: not a readable EPUB"):
        read_book(empty, "empty.epub")
    src = write_epub(tmp_path / "src.epub", "T", "", LIGHTHOUSE[:1])
    bomb = tmp_path / "bomb.epub"
    entity = '<?xml version="1.0"?><!DOCTYPE c [<!ENTITY x SYSTEM "file:///etc/passwd">]><c>&x;</c>'
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(bomb, "w") as zout:
        for info in zin.infolist():
            data = entity.encode() if info.filename == "META-INF/container.xml" else zin.read(info)
            zout.writestr(info, data)
    with pytest.raises(IngestError, match=r"^bomb\.epub:0: META-INF/container\.xml: refused: EntitiesForbidden"):
        read_book(bomb, "bomb.epub")


def test_oversized_text_files_are_refused_unread(tmp_path: Path) -> None:
    huge = tmp_path / "huge.txt"
    with huge.open("wb") as fh:
        fh.truncate(40 * 1024 * 1024)  # sparse: refused by its size before a byte is read
    with pytest.raises(IngestError, match=r"^huge\.txt:0: size: 41943040 bytes; at most"):
        read_book(huge, "huge.txt")


def test_windows_stay_inside_a_chapter_overlap_and_fit_the_model(tmp_path: Path) -> None:
    tokenizer = load_tokenizer("")
    long = " ".join(f"Sentence number {i} tells of the keeper and the lamp." for i in range(60))
    text = f"Chapter 1\n\n{long}\n\nChapter 2\n\nA short chapter.\n"
    path = tmp_path / "book.txt"
    path.write_text(text, encoding="utf-8")
    book = read_book(path, "book.txt")
    chunks = book_chunks(book, "book.txt", tokenizer, 64, 16)
    assert {c.chapter for c in chunks} == {"Chapter 1", "Chapter 2"}
    assert chunks[-1].text == "A short chapter." and chunks[-1].chapter == "Chapter 2"
    first = [c for c in chunks if c.chapter == "Chapter 1"]
    assert len(first) > 3 and all(c.text in long for c in first)
    assert all(len(tokenizer.encode(c.text, add_special_tokens=False).ids) <= 64 for c in first)
    assert all(c.text.endswith(".") for c in first)  # windows end after a sentence
    assert first[1].text[:20] in first[0].text  # neighbours overlap
    assert [c.position for c in chunks] == list(range(len(chunks)))
    assert [c.id for c in chunks] == [chunk_id("book.txt", i) for i in range(len(chunks))]
    assert chunk_id("book.txt", 0) != chunk_id("other/book.txt", 0)
    assert windows("   ", tokenizer, 64, 16) == []


def test_chunk_size_settings_are_checked() -> None:
    assert _chunk_sizes(Settings.from_env(env={"KG_CHUNK_TOKENS": "300", "KG_CHUNK_OVERLAP": "0"})) == (300, 0)
    for tokens, overlap in ((MIN_CHUNK_TOKENS - 1, 0), (100, 60)):
        with pytest.raises(ConfigError):
            _chunk_sizes(Settings.from_env(env={}, chunk_tokens=tokens, chunk_overlap=overlap))
    with pytest.raises(ConfigError, match="KG_CHUNK_TOKENS must be an integer"):
        Settings.from_env(env={"KG_CHUNK_TOKENS": "many"})


def test_cli_stage_bars_follow_the_reported_stages() -> None:
    from retrieval.cli.data import StageBars

    bars = StageBars()
    bars("reading", 0, 3)
    bars("reading", 3, 3)
    assert bars.bar is not None and (bars.stage, bars.bar.n, bars.bar.total) == ("reading", 3, 3)
    bars("extracting", 5, 8)  # a new stage closes the last bar and starts where the reader says
    assert bars.bar is not None and (bars.stage, bars.bar.n, bars.bar.total) == ("extracting", 5, 8)
    bars.close()
    assert bars.bar is None
