"""Measure the documents format: write the demo library or the MuSiQue passages as a folder of documents.

  python scripts/documents_bench.py demo OUT      the demo's 4 books (data/demo/src) as plain books, KG lines
                                                  dropped: 2 Markdown (`#` title, `##` chapters), 2 text books
                                                  with a table of contents and `Chapter 1.` / `CHAPTER I.` lines;
                                                  then reads them and prints chapters found against the true 16,
                                                  chunks, entities, relations and extraction time.
  python scripts/documents_bench.py musique OUT   one Markdown file per MuSiQue passage (front matter title =
                                                  the passage title, body = its text) plus the questions file;
                                                  reads them (512-token windows: a passage is one chunk) and prints
                                                  counts and extraction time. Then score the graph with
                                                  `KG_CHUNK_TOKENS=512 python -m retrieval eval OUT --format documents`.
Neither writes into the repository; OUT must be empty or absent. --noun-phrases: the offline extractor also
takes noun phrases named by two or more chunks (KG_OFFLINE_NOUN_PHRASES=1).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEMO_SRC = ROOT / "data" / "demo" / "src"
MUSIQUE = ROOT.parent / "shared" / "data" / "hipporag_musique_train"
ROMAN = ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X"]


def demo_books() -> list[dict]:
    """Title, author and (chapter, paragraphs) of each demo source book."""
    books = []
    for path in sorted(DEMO_SRC.glob("*.txt")):
        if path.name == "entities.txt":
            continue
        book: dict = {"file": path.stem, "chapters": []}
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("# "):
                _slug, book["title"], book["author"] = (p.strip() for p in line[2:].split("|"))
            elif line.startswith("## "):
                book["chapters"].append((line[3:].strip(), []))
            elif line.startswith("* "):
                book["chapters"][-1][1].append(line[2:].strip())
        books.append(book)
    return books


def write_demo(out: Path) -> list[dict]:
    books = demo_books()
    for i, book in enumerate(books):
        chapters = book["chapters"]
        if i % 2 == 0:  # Markdown: front matter, chapters as `##` headings
            lines = ["---", f"title: {json.dumps(book['title'])}", f"author: {json.dumps(book['author'])}", "---", ""]
            for title, paras in chapters:
                lines += [f"## {title}", "", *[p + "\n" for p in paras]]
            (out / f"{book['file']}.md").write_text("\n".join(lines), encoding="utf-8")
            continue
        roman = i % 4 == 3  # Gutenberg style `CHAPTER I.` + title line, else `Chapter 1. Title`
        names = [t for t, _ in chapters]
        heads = [f"CHAPTER {ROMAN[n]}.\n{t}" if roman else f"Chapter {n + 1}. {t}" for n, t in enumerate(names)]
        toc = [f"CHAPTER {ROMAN[n]}. {t}" if roman else f"Chapter {n + 1}. {t}" for n, t in enumerate(names)]
        lines = [f"Title: {book['title']}", f"Author: {book['author']}", "", "Contents", "", *toc, ""]
        for head, (_, paras) in zip(heads, chapters, strict=True):
            lines += ["", head, "", *[p + "\n" for p in paras]]
        (out / f"{book['file']}.txt").write_text("\n".join(lines), encoding="utf-8")
    return books


def timed_load(folder: Path, settings: object) -> tuple[object, float, dict[str, float]]:
    """load_documents with the wall time of each stage it reports."""
    from retrieval.ingest import IngestOptions
    from retrieval.ingest.documents import load_documents

    stages: dict[str, float] = {}
    last = {"t": time.perf_counter(), "stage": ""}

    def progress(stage: str, done: int, total: int) -> None:
        now = time.perf_counter()
        if last["stage"]:
            stages[str(last["stage"])] = stages.get(str(last["stage"]), 0.0) + now - float(last["t"])
        last.update(t=now, stage=stage)

    start = time.perf_counter()
    data = load_documents(folder, IngestOptions(settings=settings, progress=progress))  # type: ignore[arg-type]
    progress("", 0, 0)
    return data, time.perf_counter() - start, stages


def _summary(data: object, wall: float, stages: dict[str, float]) -> None:
    print(f"entities {len(data.entities)}, relations {len(data.relations)} "  # type: ignore[attr-defined]
          f"({sum(r.relation_type != 'CO_OCCURS_WITH' for r in data.relations)} typed by a verb); "  # type: ignore[attr-defined]
          f"wall {wall:.1f} s ({', '.join(f'{k} {v:.1f} s' for k, v in stages.items())}); "
          f"load average {open('/proc/loadavg').read().split()[0]}")
    for w in data.warnings:  # type: ignore[attr-defined]
        print("warning:", w)


def demo(out: Path, settings: object) -> None:
    books = write_demo(out)
    truth = {b["title"]: [t for t, _ in b["chapters"]] for b in books}
    data, wall, stages = timed_load(out, settings)
    print(f"{'book':<34} {'file':<14} {'true':>5} {'found':>6} {'exact':>6} {'chunks':>7}")
    found_total = exact_total = 0
    for book in books:
        title = book["title"]
        found = list(dict.fromkeys(c.chapter for c in data.chunks if c.original_document == title and c.chapter))
        exact = sum(any(f.endswith(t) for f in found) for t in truth[title])
        found_total += len(found)
        exact_total += exact
        n = sum(c.original_document == title for c in data.chunks)
        ext = next(p.name for p in out.iterdir() if p.stem == book["file"])
        print(f"{title:<34} {ext:<14} {len(truth[title]):>5} {len(found):>6} {exact:>6} {n:>7}")
    print(f"{'total':<34} {'':<14} {sum(len(v) for v in truth.values()):>5} {found_total:>6} {exact_total:>6} "
          f"{len(data.chunks):>7}")
    known = {}
    for line in (DEMO_SRC / "entities.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            _type, name, aliases, _desc = (p.strip() for p in line.split("|"))
            known[name] = [name, *(a.strip() for a in aliases.split(";") if a.strip())]
    from retrieval.ingest.extract.base import name_key

    got = {name_key(e.name) for e in data.entities}
    hit = sum(any(name_key(n) in got for n in names) for names in known.values())
    print(f"demo entities (hand-written, {len(known)}) found by name or alias: {hit} ({100 * hit / len(known):.0f}%)")
    _summary(data, wall, stages)


def musique(out: Path, settings: object) -> None:
    corpus = json.loads((MUSIQUE / "musique_train_corpus.json").read_text(encoding="utf-8"))
    docs = out / "passages"
    docs.mkdir()
    for i, p in enumerate(corpus):
        head = f"---\ntitle: {json.dumps(p['title'], ensure_ascii=False)}\n---\n\n"
        (docs / f"{i:05d}.md").write_text(head + p["text"] + "\n", encoding="utf-8")
    shutil.copyfile(MUSIQUE / "musique_train.json", out / "musique_train.json")
    data, wall, stages = timed_load(out, settings.with_(chunk_tokens=512))  # type: ignore[attr-defined]
    keys = {(c.original_document, c.text) for c in data.chunks}
    same = sum((p["title"], p["text"]) in keys for p in corpus)
    print(f"{len(corpus)} passages -> {len(data.chunks)} chunks; {same} passages are exactly one chunk")
    _summary(data, wall, stages)
    np = " KG_OFFLINE_NOUN_PHRASES=1" if settings.offline_noun_phrases else ""  # type: ignore[attr-defined]
    print(f"then: KG_CHUNK_TOKENS=512{np} python -m retrieval eval {out} --format documents --modes all")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["demo", "musique"])
    parser.add_argument("out", type=Path)
    parser.add_argument("--noun-phrases", action="store_true", help="offline extractor: recurring noun phrases too")
    args = parser.parse_args()
    out: Path = args.out
    if out.resolve().is_relative_to(ROOT):
        raise SystemExit(f"{out} is inside the repository; write the documents elsewhere (e.g. /tmp)")
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"{out} is not empty")
    out.mkdir(parents=True, exist_ok=True)
    from retrieval.config import Settings

    settings = Settings.from_env().with_(offline_noun_phrases=args.noun_phrases or None)
    demo(out, settings) if args.what == "demo" else musique(out, settings)


if __name__ == "__main__":
    main()
