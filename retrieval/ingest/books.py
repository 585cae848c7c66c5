"""One book file -> a Book (title, author, chapter sections): plain text, Markdown, PDF and EPUB.

Chapters come from the file's structure (Markdown headings, the PDF outline, the EPUB table of contents) and,
where it has none, from heading lines (`Chapter 12`, `BOOK THE FIRST—RECALLED TO LIFE`, `Stave One: ...`).
A table of contents at the front of a book is recognised and not cut at. Text of .txt and .md files is kept
byte for byte: a section is a slice of the decoded file.
"""

from __future__ import annotations

import io
import re
import zipfile
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval.errors import IngestError

TEXT_SUFFIXES = frozenset({".txt", ".text"})
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
SUFFIXES = TEXT_SUFFIXES | MARKDOWN_SUFFIXES | {".pdf", ".epub"}
MAX_TEXT_FILE_BYTES = 32 * 1024 * 1024  # a long novel is 1-5 MB of text
MAX_PACKED_FILE_BYTES = 256 * 1024 * 1024  # PDFs and EPUBs carry images and fonts
MAX_BOOK_CHARS = 32 * 1024 * 1024  # extracted text of one book
MAX_EPUB_MEMBERS = 10_000
MAX_FRONT_MATTER = 64 * 1024


@dataclass(frozen=True)
class Section:
    """Text under one heading; `start` is its offset in the book's text (PDF: to find the page)."""

    chapter: str
    text: str
    start: int = 0


@dataclass(frozen=True)
class Book:
    title: str
    author: str
    sections: tuple[Section, ...]
    chapters_from: str  # what the chapters came from: "headings", "outline", "toc", "heading lines", "none"
    page_starts: tuple[int, ...] = ()  # PDF: offset of each page's text in the book's text

    def page_of(self, offset: int) -> int:
        """1-based page holding `offset` (0 for formats without pages)."""
        return bisect_right(self.page_starts, offset) if self.page_starts else 0


# --- heading lines (plain text, and PDFs / Markdown without structure) ---------------------------------------

_KEYWORDS = r"chapter|part|book|section|act|scene|canto|stave|volume|letter"
_UNITS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
          "seventeen eighteen nineteen").split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_ORDINALS = ("first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth "
             "fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth").split()
_TENS_ORD = "twentieth thirtieth fortieth fiftieth sixtieth seventieth eightieth ninetieth".split()
_WORD = "|".join(sorted([*_UNITS[1:], *_TENS, *_ORDINALS, *_TENS_ORD, "last", "final"], key=len, reverse=True))
_ROMAN = r"(?=[ivxlc])(?:c|xc|xl|l?x{0,3})(?:ix|iv|v?i{0,3})"  # 1-100: no M/D, so "mix" or "did" never match
_NUMBER = rf"(?:\d{{1,4}}[a-z]?|{_ROMAN}|(?:the\s+)?(?:{_WORD})(?:[\s-](?:{_WORD}))?)"
_SEP = r"\s*[.:\-–—]+\s*"
HEADING_LINE = re.compile(rf"^(?P<kw>{_KEYWORDS})\s+(?P<num>{_NUMBER})(?:{_SEP}|\s+|$)(?P<title>.*)$", re.I)
STANDALONE_LINE = re.compile(
    rf"^(?P<kw>prologue|epilogue|preface|introduction|foreword|afterword|interlude|appendix|conclusion)"
    rf"(?:{_SEP}|\s+|$)(?P<title>.*)$",
    re.I,
)
CONTENTS_LINE = re.compile(r"^(?:table\s+of\s+)?contents\.?$", re.I)
MAX_HEADING_CHARS = 100
TOC_GAP_WORDS = 12  # at most this many words between two table-of-contents entries


def _number_value(num: str) -> str:
    """'IV', '4', 'Four', 'the fourth' -> '4' (so TOC entries and headings written differently match)."""
    n = num.lower().removeprefix("the").strip()
    if n.isdigit():
        return str(int(n))
    if re.fullmatch(_ROMAN, n):
        values = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100}
        total = 0
        for a, b in zip(n, n[1:] + " ", strict=True):
            total += -values[a] if b != " " and values[a] < values[b] else values[a]
        return str(total)
    words = re.split(r"[\s-]+", n)
    total = 0
    for w in words:
        for table, base in ((_UNITS, 0), (_ORDINALS, 1)):
            if w in table:
                total += table.index(w) + base
        for table in (_TENS, _TENS_ORD):
            if w in table:
                total += 20 + 10 * table.index(w)
    return str(total) if total else n


@dataclass(frozen=True)
class _Candidate:
    start: int  # offset of the heading line
    end: int  # offset after the heading (and its subtitle line)
    title: str
    key: str  # keyword + number value, or the title lower-cased: equal for a TOC entry and its chapter


def _lines(text: str) -> list[tuple[int, str]]:
    """(offset, line without its ending) for every line."""
    out, pos = [], 0
    for line in text.splitlines(keepends=True):
        out.append((pos, line.rstrip("\r\n")))
        pos += len(line)
    return out


def _heading(line: str) -> tuple[str, str, bool] | None:
    """(key, heading text, has a title after the number) if `line` is a heading line."""
    s = " ".join(line.split())
    if not s or len(s) > MAX_HEADING_CHARS:
        return None
    m = HEADING_LINE.match(s)
    if m:
        title = m.group("title").strip()
        if title.endswith((",", ";")) or len(title.split()) > 12:
            return None
        return f"{m.group('kw').lower()} {_number_value(m.group('num'))}", s, bool(title)
    m = STANDALONE_LINE.match(s)
    if m and len(m.group("title").split()) <= 8:
        title = m.group("title").strip()
        return f"{m.group('kw').lower()} {title.lower()}".strip(), s, bool(title)
    return None


def _subtitle(line: str) -> bool:
    """A chapter's title on the line after `CHAPTER I.`: short, not a sentence, not itself a heading."""
    s = line.strip()
    return 0 < len(s) <= 60 and not s.endswith((".", ",", ";", ":")) and _heading(s) is None


def _candidates(text: str) -> tuple[list[_Candidate], list[int]]:
    """Heading lines (after a blank line or at the start) and the offsets of `Contents` lines.

    A heading line is accepted alone on its line (a blank line after it); as `CHAPTER I.` followed by its title
    line and a blank line; if it has no title after its number, straight before the text; and in a list of
    heading lines (a table of contents, or `ACT I` over `SCENE 1`).
    """
    lines = _lines(text)
    out: list[_Candidate] = []
    contents: list[int] = []
    heads = [_heading(line) for _, line in lines]
    for i, (pos, line) in enumerate(lines):
        found = heads[i]
        if i > 0 and lines[i - 1][1].strip():
            if found is not None and heads[i - 1] is not None:  # a list of headings: a table of contents
                out.append(_Candidate(pos, pos + len(line), found[1], found[0]))
            continue
        if CONTENTS_LINE.match(line.strip()):
            contents.append(pos)
            continue
        if found is None:
            continue
        key, heading, has_title = found
        if i + 1 < len(lines) and heads[i + 1] is not None:
            out.append(_Candidate(pos, pos + len(line), heading, key))
            continue
        after = lines[i + 1][1] if i + 1 < len(lines) else ""
        blank_after_next = i + 2 >= len(lines) or not lines[i + 2][1].strip()
        if not after.strip():
            out.append(_Candidate(pos, pos + len(line), heading, key))
        elif not has_title and blank_after_next and _subtitle(after):
            sub = " ".join(after.split())
            title = f"{heading} {sub}" if heading[-1] in ".:—–-" else f"{heading}: {sub}"
            out.append(_Candidate(pos, lines[i + 1][0] + len(after), title, key))
        elif not has_title:
            out.append(_Candidate(pos, pos + len(line), heading, key))
    return out, contents


def _toc_entries(text: str, cands: list[_Candidate], contents: list[int]) -> set[int]:
    """Indexes of candidates that belong to a table of contents rather than the body.

    A candidate is a TOC entry when it sits in a run of headings with almost no text between them and either
    its heading comes back later in the book (as `Chapter 1` after `CHAPTER I.`: numbers are compared by value)
    or the run follows a `Contents` line. Short chapters whose headings do not come back are chapters.
    """
    gaps = [len(text[c.end : (cands[i + 1].start if i + 1 < len(cands) else len(text))].split())
            for i, c in enumerate(cands)]
    last_at = {c.key: i for i, c in enumerate(cands)}  # a heading "comes back" if its key occurs later
    toc: set[int] = set()
    i = 0
    while i < len(cands):
        j = i
        while j < len(cands) and gaps[j] <= TOC_GAP_WORDS:
            j += 1
        run = list(range(i, min(j + 1, len(cands))))  # the run plus the first entry followed by text
        if len(run) >= 2:
            after_contents = any(0 <= cands[i].start - pos and len(text[pos : cands[i].start].split()) <= 3
                                 for pos in contents)
            marked = {k for k in run if gaps[k] <= TOC_GAP_WORDS
                      and (last_at[cands[k].key] > k or after_contents)}
            end = run[-1]
            if marked and gaps[end] > TOC_GAP_WORDS and last_at[cands[end].key] > end:
                marked.add(end)  # the table's last entry, followed by a preface
            toc |= marked
        i = j + 1
    return toc


def heading_cuts(text: str) -> list[tuple[int, int, str | None]]:
    """(start, end, chapter title) of each heading line that starts a chapter; a table of contents is not cut at
    but left out of the text, as (start, end, None) from its `Contents` line (if any) to its last entry."""
    cands, contents = _candidates(text)
    toc = _toc_entries(text, cands, contents)
    cuts: list[tuple[int, int, str | None]] = []
    for i, c in enumerate(cands):
        if i not in toc:
            cuts.append((c.start, c.end, c.title))
        elif cuts and cuts[-1][2] is None and len(text[cuts[-1][1] : c.start].split()) <= TOC_GAP_WORDS:
            cuts[-1] = (cuts[-1][0], c.end, None)  # the next entry of the same table
        else:
            head = [pos for pos in contents if pos <= c.start and len(text[pos : c.start].split()) <= 3]
            cuts.append((head[-1] if head else c.start, c.end, None))
    return cuts


def _chapters(cuts: Sequence[tuple[int, int, str | None]]) -> bool:
    return any(title is not None for _, _, title in cuts)


def _sections(text: str, cuts: Sequence[tuple[int, int, str | None]], base: int = 0) -> list[Section]:
    """Split `text` at (start, end, title) cuts (sorted); text before the first cut has chapter ''; a cut
    titled None drops its span and the chapter goes on."""
    out = []
    prev_end, prev_title = 0, ""
    for start, end, title in [*cuts, (len(text), len(text), "")]:
        body = text[prev_end:start]
        if body.strip():
            out.append(Section(prev_title, body, base + prev_end))
        prev_end, prev_title = end, prev_title if title is None else title
    return out


def untitled_note(ids: Sequence[str], why: str) -> str:
    """The one import note for documents whose source gives no title (`why`): their book is named by their id."""
    shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    return (f"{len(ids)} document{'s' * (len(ids) != 1)} without a title ({why}): each is shown as a book named by "
            f"its document id ({shown})")


# --- decoding ---------------------------------------------------------------------------------------------


def _decode(raw: bytes, rel: str) -> str:
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return raw.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise IngestError(rel, 0, "encoding", f"not valid UTF-16 at byte {exc.start}") from exc
    if b"\x00" in raw[:8192]:
        raise IngestError(rel, 0, "encoding", "a binary file (NUL bytes), not text")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise IngestError(rel, line, "encoding", f"not valid UTF-8 at byte {exc.start}; save the file as UTF-8"
                          ) from exc
    text = text.removeprefix("\ufeff")
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise IngestError(rel, line, "text", "contains a NUL character (a binary file?)")
    return text


def _read(path: Path, rel: str, limit: int) -> bytes:
    size = path.stat().st_size
    if size > limit:
        raise IngestError(rel, 0, "size", f"{size} bytes; at most {limit} are read per file of this type")
    return path.read_bytes()


def _clean(text: str) -> str:
    """Extracted (PDF/EPUB) text without NUL or lone surrogates, which no store can hold; the length is kept."""
    return text.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")


def _check_size(text: str, rel: str) -> None:
    if len(text) > MAX_BOOK_CHARS:
        raise IngestError(rel, 0, "size", f"{len(text)} characters of text; at most {MAX_BOOK_CHARS} per book")


def _str_meta(value: Any) -> str:
    return " ".join(value.split()) if isinstance(value, str) else ""


# --- plain text ---------------------------------------------------------------------------------------------

_GUTENBERG_START = re.compile(r"^\*\*\* ?START OF (?:THE|THIS) PROJECT GUTENBERG.*$", re.M | re.I)
_GUTENBERG_END = re.compile(r"^\*\*\* ?END OF (?:THE|THIS) PROJECT GUTENBERG.*$", re.M | re.I)
_HEADER_FIELD = re.compile(r"^(Title|Author):[ \t]*(.+)$", re.M)


_FIELD_BLOCK = re.compile(r"\A(?:[ \t]*\r?\n)*((?:[A-Za-z][A-Za-z ]{0,30}:[^\n]*\r?\n?)+)(?:[ \t]*\r?\n|\Z)")


def gutenberg_bounds(text: str) -> tuple[int, int, dict[str, str]] | None:
    """(start, end) of a Project Gutenberg file's book between its START and END markers, and the `Title:` /
    `Author:` fields of its header (lower-cased keys); None for a text without the START marker."""
    head = text[:20_000]
    m = _GUTENBERG_START.search(head)
    if not m:
        return None
    e = _GUTENBERG_END.search(text, m.end())
    meta = {k.lower(): v.strip() for k, v in _HEADER_FIELD.findall(head[: m.start()])}
    return m.end(), e.start() if e else len(text), meta


def read_text(path: Path, rel: str) -> Book:
    """A .txt book: `Title:` / `Author:` from a leading block of `Field: value` lines or a Project Gutenberg
    header (whose START/END markers also bound the text), chapters from heading lines."""
    text = _decode(_read(path, rel, MAX_TEXT_FILE_BYTES), rel)
    start, end = 0, len(text)
    head = text[:20_000]
    bounds = gutenberg_bounds(text)
    block = _FIELD_BLOCK.match(head)
    if bounds:
        start, end, meta = bounds
    elif block and _HEADER_FIELD.search(block.group(1)):
        start = block.end()
        meta = {k.lower(): v.strip() for k, v in _HEADER_FIELD.findall(block.group(1))}
    else:
        meta = {}
    body = text[start:end]
    cuts = heading_cuts(body)
    return Book(meta.get("title") or Path(rel).stem, meta.get("author", ""), tuple(_sections(body, cuts, start)),
                "heading lines" if _chapters(cuts) else "none")


# --- Markdown -----------------------------------------------------------------------------------------------


def _front_matter(text: str, rel: str) -> tuple[dict[str, Any], int]:
    """YAML front matter (`---` ... `---` at the very start) and the offset after it."""
    if not text.startswith("---"):
        return {}, 0
    m = re.match(r"---[ \t]*\r?\n(.*?\r?\n)?(?:---|\.\.\.)[ \t]*(?:\r?\n|$)", text[: MAX_FRONT_MATTER + 16], re.S)
    if not m:
        return {}, 0
    import yaml

    try:
        meta = yaml.safe_load(m.group(1) or "")
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1
        raise IngestError(rel, line, "front matter", f"not valid YAML: {str(exc).splitlines()[0]}") from exc
    return (meta if isinstance(meta, dict) else {}), m.end()


Cut = tuple[int, int, str | None]  # (start, end, chapter title); None: a span left out, the chapter goes on


def markdown_chapters(body: str, title: str = "") -> tuple[list[Cut], str, str | None]:
    """Chapter cuts of Markdown text (markdown-it-py: every heading, none inside code), what they came from
    ("headings", "heading lines" where the headings give no chapter, "none"), and the book's title: a lone `#`
    heading at the top (when `title`, the front matter's, is empty or the same), which is then no chapter."""
    from markdown_it import MarkdownIt

    lines = _lines(body)
    tokens = MarkdownIt("commonmark").parse(body)
    heads: list[tuple[int, int, int, str | None]] = []  # (level, start, end, text)
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.map:
            first, last = tok.map
            start = lines[first][0]
            end = lines[last - 1][0] + len(lines[last - 1][1])
            heads.append((int(tok.tag[1:]), start, end, " ".join(tokens[i + 1].content.split())))
    h1 = [h for h in heads if h[0] == 1]
    top = h1[0][3] if len(h1) == 1 and heads[0] is h1[0] else None
    if top is not None and (not title or title.casefold() == top.casefold()):
        heads[0] = (1, heads[0][1], heads[0][2], None)  # the book's title, not a chapter: left out of the text
    else:
        top = None
    cuts: list[Cut] = [(s, e, t) for _, s, e, t in heads]
    if _chapters(cuts):
        return cuts, "headings", top
    cuts = sorted([*cuts, *heading_cuts(body)], key=lambda c: c[0])
    return cuts, "heading lines" if _chapters(cuts) else "none", top


def chapter_cuts(text: str) -> list[Cut]:
    """Where the chapters of a document's whole text start, found as the documents format finds them in a file: in
    a Project Gutenberg text, heading lines between its START and END markers (none outside them); else Markdown
    headings (a lone top `#` heading is the title), else heading lines; a table of contents is never cut at."""
    bounds = gutenberg_bounds(text)
    if bounds is None:
        return markdown_chapters(text)[0]
    start, end, _ = bounds
    inside = [(a + start, b + start, t) for a, b, t in heading_cuts(text[start:end])]
    return [*inside, (end, end, "")]  # the licence after the END marker is no chapter of the book


def read_markdown(path: Path, rel: str) -> Book:
    """A .md book: front matter title/author (else a lone top H1, which is then no chapter), chapters from
    headings (markdown-it-py; every heading starts one)."""
    text = _decode(_read(path, rel, MAX_TEXT_FILE_BYTES), rel)
    meta, offset = _front_matter(text, rel)
    body = text[offset:]
    title = _str_meta(meta.get("title"))
    cuts, source, top = markdown_chapters(body, title)
    return Book(title or top or Path(rel).stem, _str_meta(meta.get("author")), tuple(_sections(body, cuts, offset)),
                source)


# --- PDF ----------------------------------------------------------------------------------------------------


def _flat_outline(reader: Any, items: list[Any]) -> Iterator[tuple[int, str]]:
    for item in items:
        if isinstance(item, list):
            yield from _flat_outline(reader, item)
            continue
        try:
            page = reader.get_destination_page_number(item)
        except Exception:  # noqa: S112 - an outline entry pointing nowhere is skipped (pypdf raises many types)
            continue
        title = _str_meta(getattr(item, "title", ""))
        if page is not None and page >= 0 and title:
            yield page, title


def _find_title(page_text: str, title: str) -> tuple[int, int] | None:
    """Where a bookmark's title is printed on its page (whitespace- and case-insensitive), as (start, end)."""
    words = title.split()
    if not words:
        return None
    pattern = r"\s+".join(re.escape(w) for w in words)
    m = re.search(pattern, page_text, re.I)
    return (m.start(), m.end()) if m else None


def read_pdf(path: Path, rel: str) -> Book:
    """A .pdf book (pypdf): info title/author, text per page, chapters from the outline (else heading lines)."""
    import pypdf

    raw = _read(path, rel, MAX_PACKED_FILE_BYTES)
    try:
        reader = pypdf.PdfReader(io.BytesIO(raw), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            raise IngestError(rel, 0, "pdf", "encrypted with a password; decrypt it first")
        info: Any = reader.metadata or {}
        pages: list[str] = []
        for number, pdf_page in enumerate(reader.pages, start=1):
            try:
                pages.append(_clean(pdf_page.extract_text() or ""))
            except Exception as exc:  # pypdf raises many types on a damaged content stream
                raise IngestError(rel, 0, f"page {number}", f"cannot extract text: {exc}") from exc
        outline = list(_flat_outline(reader, reader.outline)) if reader.outline else []
        title, author = _str_meta(info.get("/Title")), _str_meta(info.get("/Author"))
    except IngestError:
        raise
    except Exception as exc:  # pypdf raises many types (PdfReadError, struct.error, zlib.error ...) on a damaged file
        if "decrypt" in str(exc).lower() or "encrypt" in str(exc).lower():
            raise IngestError(rel, 0, "pdf", f"encrypted: {exc}") from exc
        raise IngestError(rel, 0, "pdf", f"not a readable PDF: {exc}") from exc
    starts, pos = [], 0
    for text in pages:
        starts.append(pos)
        pos += len(text) + 2
    whole = "\n\n".join(pages)
    _check_size(whole, rel)
    cuts: list[tuple[int, int, str | None]] = []
    for index, name in outline:
        if index >= len(pages):
            continue
        found = _find_title(pages[index], name)
        at = (starts[index] + found[0], starts[index] + found[1]) if found else (starts[index], starts[index])
        cuts.append((*at, name))
    cuts.sort(key=lambda c: c[0])
    # two bookmarks at one spot (a part and its first chapter): the later, deeper one names the text
    cuts = [c for i, c in enumerate(cuts) if i + 1 == len(cuts) or cuts[i + 1][0] > c[0]]
    source = "outline"
    if not cuts:
        cuts, source = heading_cuts(whole), "heading lines"
    return Book(title or Path(rel).stem, author, tuple(_sections(whole, cuts)), source if _chapters(cuts) else "none",
                tuple(starts))


# --- EPUB ---------------------------------------------------------------------------------------------------

_BLOCKS = frozenset("p div h1 h2 h3 h4 h5 h6 li br tr section article blockquote pre dt dd figcaption".split())
_SKIP = frozenset({"script", "style", "head", "title", "template"})
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})


def _check_epub_zip(raw: bytes, rel: str) -> None:
    """Refuse zip bombs and XML with entity declarations before EbookLib parses anything."""
    import defusedxml.ElementTree as SafeET
    from defusedxml import DefusedXmlException

    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as zf:
            infos = zf.infolist()
            if len(infos) > MAX_EPUB_MEMBERS:
                raise IngestError(rel, 0, "epub", f"{len(infos)} files inside; at most {MAX_EPUB_MEMBERS}")
            total = sum(i.file_size for i in infos)
            if total > MAX_PACKED_FILE_BYTES:
                raise IngestError(rel, 0, "epub", f"unpacks to {total} bytes; at most {MAX_PACKED_FILE_BYTES}")
            for info in infos:
                if info.filename.lower().endswith((".xml", ".opf", ".ncx", ".xhtml", ".html", ".htm")):
                    data = zf.read(info)
                    try:
                        SafeET.fromstring(data, forbid_dtd=False, forbid_entities=True, forbid_external=True)
                    except DefusedXmlException as exc:
                        raise IngestError(rel, 0, info.filename, f"refused: {type(exc).__name__}") from exc
                    except SafeET.ParseError:
                        continue  # sloppy XHTML: EbookLib and lxml.html recover from it
    except zipfile.BadZipFile as exc:
        raise IngestError(rel, 0, "epub", f"not a valid EPUB (zip) file: {exc}") from exc


def _html_blocks(content: bytes, anchors: dict[str, str], titles: set[str]) -> Iterator[tuple[str | None, str]]:
    """(chapter started here or None, text) pieces of one XHTML document in reading order; a heading element
    that repeats a chapter title (`titles`, case-folded) is left out, as heading lines are elsewhere."""
    from lxml import etree, html

    parser = html.HTMLParser(no_network=True, remove_comments=True, remove_pis=True)
    try:
        root = html.fromstring(content, parser=parser)
    except (etree.ParserError, ValueError):
        return
    body = root.find(".//body")
    start = body if body is not None else root

    def walk(el: Any) -> Iterator[tuple[str | None, str]]:
        tag = el.tag.lower() if isinstance(el.tag, str) else ""
        if tag in _SKIP:
            return
        ident = el.get("id")
        if ident is not None and ident in anchors:
            yield anchors[ident], ""
        if tag in _HEADINGS and " ".join("".join(el.itertext()).split()).casefold() in titles:
            return
        if tag in _BLOCKS:
            yield None, "\n"
        if el.text and tag:
            yield None, el.text
        for child in el:
            yield from walk(child)
            if child.tail:
                yield None, child.tail
        if tag in _BLOCKS:
            yield None, "\n"

    yield from walk(start)


class _TextBuffer:
    """Text of XHTML pieces as a reader sees it: whitespace collapsed, blocks separated by one blank line."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.pos = 0
        self._tail = "\n\n"

    def add(self, piece: str) -> None:
        if piece == "\n":
            if self._tail.endswith("\n\n"):
                return
            piece = "\n" if self._tail.endswith("\n") else "\n\n"
        else:
            piece = _clean(re.sub(r"\s+", " ", piece))
            if self._tail.endswith("\n"):
                piece = piece.lstrip(" ")
            if not piece:
                return
        self.parts.append(piece)
        self.pos += len(piece)
        self._tail = (self._tail + piece)[-2:]

    def text(self) -> str:
        return "".join(self.parts)


def _flat_toc(items: Any) -> Iterator[tuple[str, str]]:
    """(href, title) of every TOC entry, depth first."""
    for item in items:
        if isinstance(item, tuple | list) and len(item) == 2 and isinstance(item[1], list):
            head, children = item
            if getattr(head, "href", None):
                yield head.href, _str_meta(head.title)
            yield from _flat_toc(children)
        elif getattr(item, "href", None):
            yield item.href, _str_meta(item.title)


def read_epub(path: Path, rel: str) -> Book:
    """An .epub book (EbookLib): DC title/creator, spine order, chapters from the TOC (else heading lines)."""
    import ebooklib
    from ebooklib import epub

    raw = _read(path, rel, MAX_PACKED_FILE_BYTES)
    _check_epub_zip(raw, rel)
    try:
        book = epub.read_epub(io.BytesIO(raw), options={"ignore_ncx": False})
    except Exception as exc:  # EbookLib raises EpubException, KeyError, lxml errors ... on a malformed book
        raise IngestError(rel, 0, "epub", f"not a readable EPUB: {type(exc).__name__}: {exc}") from exc
    meta_title = book.get_metadata("DC", "title")
    meta_author = book.get_metadata("DC", "creator")
    by_file: dict[str, dict[str, str]] = {}
    for href, title in _flat_toc(book.toc):
        name, _, frag = href.partition("#")
        by_file.setdefault(name, {}).setdefault(frag, title)
    out = _TextBuffer()
    cuts: list[tuple[int, int, str | None]] = []
    for idref, _linear in book.spine:
        item = book.get_item_with_id(idref)
        if item is None or item.get_type() != ebooklib.ITEM_DOCUMENT or isinstance(item, epub.EpubNav):
            continue  # the navigation document is the book's own table of contents
        anchors = by_file.get(item.file_name, {})
        out.add("\n")
        if "" in anchors:
            cuts.append((out.pos, out.pos, anchors[""]))
        titles = {t.casefold() for t in anchors.values()}
        for chapter, piece in _html_blocks(item.get_content(), {k: v for k, v in anchors.items() if k}, titles):
            if chapter is not None:
                cuts.append((out.pos, out.pos, chapter))
            out.add(piece)
            if out.pos > MAX_BOOK_CHARS:
                _check_size(out.text(), rel)
    whole = out.text()
    source = "toc"
    if not cuts:
        cuts, source = heading_cuts(whole), "heading lines"
    return Book(
        _str_meta(meta_title[0][0]) if meta_title else Path(rel).stem,
        _str_meta(meta_author[0][0]) if meta_author else "",
        tuple(_sections(whole, cuts)),
        source if _chapters(cuts) else "none",
    )


READERS = {**dict.fromkeys(TEXT_SUFFIXES, read_text), **dict.fromkeys(MARKDOWN_SUFFIXES, read_markdown),
           ".pdf": read_pdf, ".epub": read_epub}


def read_book(path: Path, rel: str) -> Book:
    """Parse one file by its suffix; IngestError(rel, line, field, reason) on a malformed one."""
    book = READERS[path.suffix.lower()](path, rel)
    for s in book.sections:
        _check_size(s.text, rel)
    return book
