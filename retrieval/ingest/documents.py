"""Documents reader: a folder of .txt, .md, .pdf and .epub books -> chapters -> token-window chunks -> GraphData.

Each file is a book (`retrieval.ingest.books` finds its title, author and chapters). A chapter is cut into
windows of `Settings.chunk_tokens` tokens of the embedder's own tokenizer, `Settings.chunk_overlap` shared
between neighbours, ending after a sentence where one ends in the window's second half; a window never spans
two chapters. Entities and relations come from `retrieval.ingest.extract` (Gemini with a key, else offline).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from retrieval.config import Settings
from retrieval.errors import ConfigError, IngestError
from retrieval.ingest import Format, IngestOptions
from retrieval.ingest.books import SUFFIXES, Book, read_book
from retrieval.ingest.extract import extractor_for
from retrieval.ingest.extract.base import ChunkInput, merge_graphs
from retrieval.models import Chunk, GraphData

MAX_FILES = 20_000
MIN_CHUNK_TOKENS, MAX_CHUNK_TOKENS = 16, 4096
_SENTENCE_END = frozenset({".", "!", "?"})
_SPACE = " \t\r\n"  # stripped from a window's ends; other characters (zero-width, U+2028 ...) are text
_SKIPPED_NAMES = frozenset({"__MACOSX", "Thumbs.db"})


@lru_cache(maxsize=4)
def load_tokenizer(embed_model: str = "") -> Any:
    """The tokenizer of the embedding model (a local model folder's tokenizer.json, else the packaged MiniLM's),
    without its padding or truncation: chunk sizes are counted in the tokens the embedder will see."""
    from tokenizers import Tokenizer

    from retrieval.embedding import default_model_path

    own = Path(embed_model) / "tokenizer.json" if embed_model and not embed_model.startswith("hash") else None
    path = own if own is not None and own.is_file() else Path(default_model_path()) / "tokenizer.json"
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises its own Exception type for a missing or bad file
        raise ConfigError(f"cannot load the tokenizer {path}: {exc}") from exc
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def windows(text: str, tokenizer: Any, size: int, overlap: int) -> list[str]:
    """`text` cut into windows of at most `size` tokens, `overlap` tokens shared; each a stripped slice of it."""
    enc = tokenizer.encode(text, add_special_tokens=False)
    offsets, tokens, n = enc.offsets, enc.tokens, len(enc.offsets)
    if n <= size:
        return [text.strip(_SPACE)] if text.strip(_SPACE) else []
    out = []
    start = 0
    while start < n:
        end = min(n, start + size)
        if end < n:  # end after a sentence if one ends in the window's second half
            end = next((k + 1 for k in range(end - 1, start + size // 2, -1) if tokens[k] in _SENTENCE_END), end)
        a = 0 if start == 0 else offsets[start][0]
        b = len(text) if end >= n else offsets[end][0]
        piece = text[a:b].strip(_SPACE)
        if piece:
            out.append(piece)
        if end >= n:
            break
        start = max(end - overlap, start + 1)
    return out


def _display(path: Path, root: Path) -> str:
    """The file's path relative to the input folder, as text (undecodable bytes in a name shown as U+FFFD)."""
    rel = path.relative_to(root).as_posix()
    return os.fsencode(rel).decode("utf-8", "replace")


def _files(root: Path) -> tuple[list[tuple[Path, str]], list[str], list[str]]:
    """Supported files (path, display name) in name order; unsupported and outside-the-folder ones, by name."""
    found, unsupported, outside = [], [], []
    real_root = root.resolve()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in _SKIPPED_NAMES)
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if name.startswith(".") or name in _SKIPPED_NAMES:
                continue
            rel = _display(path, root)
            if path.suffix.lower() not in SUFFIXES:
                unsupported.append(rel)
            elif not path.resolve().is_relative_to(real_root) or not path.is_file():
                outside.append(rel)  # a link to a file outside the folder (or to no file) is not read
            else:
                found.append((path, rel))
            if len(found) > MAX_FILES:
                raise IngestError(str(root), 0, "path", f"more than {MAX_FILES} documents; split the folder")
    return found, unsupported, outside


def _names(items: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(repr(x) for x in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40]


def chunk_id(rel: str, position: int) -> str:
    """Stable id from the file's relative path and the chunk's position in its book."""
    digest = hashlib.sha256(rel.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    stem = _slug(Path(rel).stem)
    return f"{stem}-{digest}:{position}" if stem else f"{digest}:{position}"


def book_chunks(book: Book, rel: str, tokenizer: Any, size: int, overlap: int) -> list[Chunk]:
    """The book's chunks: windows inside each chapter section, positions in reading order."""
    out: list[Chunk] = []
    is_pdf = bool(book.page_starts)
    for section in book.sections:
        at = 0  # a PDF chunk's offset in its section (windows come in order), for its page number
        for piece in windows(section.text, tokenizer, size, overlap):
            if is_pdf:
                at = section.text.find(piece, at)
            out.append(Chunk(
                id=chunk_id(rel, len(out)),
                text=piece,
                source=f"{rel}#page={book.page_of(section.start + at)}" if is_pdf else rel,
                original_document=book.title,
                chapter=section.chapter,
                author=book.author,
                position=len(out),
            ))
    return out


def _chunk_sizes(settings: Settings) -> tuple[int, int]:
    size, overlap = settings.chunk_tokens, settings.chunk_overlap
    if not MIN_CHUNK_TOKENS <= size <= MAX_CHUNK_TOKENS:
        raise ConfigError(f"chunk tokens must be {MIN_CHUNK_TOKENS}-{MAX_CHUNK_TOKENS}, got {size}")
    if not 0 <= overlap < size // 2 + 1:
        raise ConfigError(f"chunk overlap must be 0 to half the chunk size ({size // 2}), got {overlap}")
    return size, overlap


def detect(path: Path) -> bool:
    """Whether `path` holds a folder holding .txt, .md, .pdf or .epub documents."""
    return any(p.suffix.lower() in SUFFIXES and p.is_file() for p in path.rglob("*"))


def load_documents(path: str | Path, options: IngestOptions | None = None) -> GraphData:
    """Read every supported file of the folder (sub-folders too) as a book; chunk, extract, merge.

    A malformed file raises IngestError with its path relative to the folder; unsupported files, hidden files
    and links leading out of the folder are skipped and named in the warnings.
    """
    options = options or IngestOptions()
    settings = options.settings or Settings()
    root = Path(path)
    if not root.is_dir():
        raise IngestError(str(root), 0, "path", "not a directory (expected a folder of .txt/.md/.pdf/.epub files)")
    size, overlap = _chunk_sizes(settings)
    files, unsupported, outside = _files(root)
    if not files:
        seen = f"; found only {_names(unsupported)}" if unsupported else ""
        raise IngestError(str(root), 0, "path", f"no {', '.join(sorted(SUFFIXES))} files{seen}")
    tokenizer = load_tokenizer(settings.embed_model)
    chunks: list[Chunk] = []
    empty: list[str] = []
    flat: list[str] = []
    titles: dict[str, list[str]] = {}
    for i, (file, rel) in enumerate(files):
        options.report("reading", i, len(files))
        try:
            book = read_book(file, rel)
        except OSError as exc:
            raise IngestError(rel, 0, "file", f"cannot read: {exc.strerror or exc}") from exc
        own = book_chunks(book, rel, tokenizer, size, overlap)
        if not own:
            empty.append(rel)
            continue
        if book.chapters_from == "none":
            flat.append(rel)
        titles.setdefault(book.title, []).append(rel)
        chunks.extend(own)
    options.report("reading", len(files), len(files))
    if not chunks:  # nothing to build: a graph of no books would be committed
        raise IngestError(str(root), 0, "path", f"none of the {len(files)} documents holds any text: "
                                                f"{_names(empty)}")

    extractor, which = extractor_for(options.settings)
    inputs = [ChunkInput(c.id, c.text, c.original_document, c.chapter) for c in chunks]
    run = extractor.extract(inputs, options.report)
    options.report("merging", 0, 1)
    entities, relations, merge_warnings = merge_graphs(inputs, run.graphs)
    options.report("merging", 1, 1)

    shared = [t for t, rels in titles.items() if len(rels) > 1]
    notes = (
        (unsupported, "skipped {n} files that are not .txt/.md/.pdf/.epub: {names}"),
        (outside, "skipped {n} links that lead outside the folder: {names}"),
        (empty, "{n} files hold no text and were left out: {names}"),
        (flat, "{n} books have no chapter headings (their chunks have no chapter): {names}"),
        (shared, "{n} titles are shared by several files (one book each, same title): {names}"),
    )
    warnings = [which, *run.warnings, *merge_warnings]
    warnings += [text.format(n=len(items), names=_names(items)) for items, text in notes if items]
    return GraphData(entities=entities, relations=relations, chunks=tuple(chunks), warnings=tuple(warnings))


FORMAT = Format(detect, load_documents)
