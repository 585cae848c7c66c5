"""Small books in every documents format, written by the formats' own writers (fpdf2 for PDF, EbookLib for EPUB;
Markdown and plain text by hand), and a zip of them for the Data page's upload.

  python tests/data/documents/make_docs.py OUT        writes the folder OUT (for `python -m retrieval ingest OUT`)
  python tests/data/documents/make_docs.py OUT.zip    writes the zip
"""

from __future__ import annotations

import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

Chapters = Sequence[tuple[str, str]]  # (chapter title, body text)

# Each book names people, organisations and places, so the offline extractor finds entities in it.
LIGHTHOUSE: Chapters = (
    ("The Keeper", "Marta Silva kept the lighthouse at Cabo Frio for the Portuguese Navy. She wrote to Joao Pereira "
                   "in Lisbon every winter."),
    ("The Storm", "In 1911 a storm wrecked the steamer Aurora near Cabo Frio. Marta Silva rowed out with Tomas "
                  "Reis and saved nine sailors."),
    ("The Medal", "The Portuguese Navy gave Marta Silva a medal in Lisbon. Joao Pereira wrote about her in the "
                  "Diario de Noticias."),
)
ORCHARD: Chapters = (
    ("Planting", "Helen Achebe planted the first apple trees near Hereford for the Wye Valley Cooperative."),
    ("Harvest", "The Wye Valley Cooperative sold cider to Bristol merchants. Helen Achebe met Samuel Price there."),
)
QUERY = "Who did Marta Silva save near Cabo Frio?"


def write_pdf(path: Path, title: str, author: str, chapters: Chapters, *, outline: bool = True,
              password: str = "") -> Path:
    """A PDF by fpdf2: one page per chapter, the chapter's title printed as its first line; bookmarks
    (the PDF outline) when `outline`; encrypted with `password` when given."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_title(title)
    pdf.set_author(author)
    pdf.set_font("helvetica", size=12)
    for name, body in chapters:
        pdf.add_page()
        if outline:
            pdf.start_section(name, level=0)
        pdf.multi_cell(0, 8, name, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(4)
        pdf.multi_cell(0, 8, body)
    if password:
        pdf.set_encryption(owner_password=password + "-owner", user_password=password)
    pdf.output(str(path))
    return path


def write_epub(path: Path, title: str, author: str, chapters: Chapters, *, anchors: bool = True) -> Path:
    """An EPUB by EbookLib: chapters in one XHTML file split by anchored headings (the TOC points at the
    anchors) when `anchors`, else one file per chapter; the navigation document is in the spine."""
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier(f"kg-lens-test-{path.stem}")
    book.set_title(title)
    book.set_language("en")
    book.add_author(author)
    items: list[epub.EpubHtml] = []
    toc = []
    if anchors:
        item = epub.EpubHtml(title=title, file_name="text.xhtml", lang="en")
        item.content = "".join(f'<h2 id="ch{i}">{name}</h2><p>{body}</p>' for i, (name, body) in
                               enumerate(chapters))
        items.append(item)
        toc = [epub.Link(f"text.xhtml#ch{i}", name, f"ch{i}") for i, (name, _) in enumerate(chapters)]
    else:
        for i, (name, body) in enumerate(chapters):
            item = epub.EpubHtml(title=name, file_name=f"ch{i}.xhtml", lang="en")
            item.content = f"<h1>{name}</h1><p>{body}</p>"
            items.append(item)
            toc.append(epub.Link(f"ch{i}.xhtml", name, f"ch{i}"))
    for item in items:
        book.add_item(item)
    book.toc = toc
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", *items]
    epub.write_epub(str(path), book)
    return path


def write_markdown(path: Path, title: str, author: str, chapters: Chapters) -> Path:
    head = f'---\ntitle: "{title}"\nauthor: "{author}"\n---\n\n'
    path.write_text(head + "".join(f"## {name}\n\n{body}\n\n" for name, body in chapters), encoding="utf-8")
    return path


def write_text(path: Path, title: str, author: str, chapters: Chapters) -> Path:
    """A plain-text book: `Title:` / `Author:` lines, a Contents block, then `Chapter N. Title` headings."""
    toc = "".join(f"Chapter {i + 1}. {name}\n" for i, (name, _) in enumerate(chapters))
    body = "".join(f"\nChapter {i + 1}. {name}\n\n{text}\n" for i, (name, text) in enumerate(chapters))
    path.write_text(f"Title: {title}\nAuthor: {author}\n\nContents\n\n{toc}{body}", encoding="utf-8")
    return path


def write_library(out: Path) -> Path:
    """One book per format: the lighthouse story as PDF, EPUB and Markdown parts, the orchard as text."""
    out.mkdir(parents=True, exist_ok=True)
    write_pdf(out / "lighthouse.pdf", "The Lighthouse", "Ana Costa", LIGHTHOUSE[:1])
    write_epub(out / "storm.epub", "The Storm at Cabo Frio", "Ana Costa", LIGHTHOUSE[1:2])
    write_markdown(out / "medal.md", "The Medal", "Ana Costa", LIGHTHOUSE[2:])
    write_text(out / "orchard.txt", "The Orchard", "Ben Price", ORCHARD)
    return out


def make_zip(path: Path) -> Path:
    """The library as a zip (files at its root), as the Data page takes an upload."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        folder = write_library(Path(tmp) / "library")
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            for file in sorted(folder.iterdir()):
                zf.write(file, file.name)
    return path


if __name__ == "__main__":
    target = Path(sys.argv[1])
    make_zip(target) if target.suffix == ".zip" else write_library(target)
    print(target)
