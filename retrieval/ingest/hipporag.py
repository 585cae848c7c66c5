"""HippoRAG OpenIE reader: a corpus JSON + an `openie_*.json` (HippoRAG v1 legacy layout) -> GraphData.

Phrase normalisation follows `processing_phrases` in HippoRAG's legacy `src/processing.py`
(Gutiérrez et al., "HippoRAG", NeurIPS 2024, arXiv:2405.14831).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Any

from retrieval.errors import IngestError
from retrieval.ingest import Format, IngestOptions
from retrieval.ingest.bundle import MAX_ID_LEN, check_name, check_text, id_too_long, relation_id
from retrieval.models import Chunk, Entity, GraphData, Relation

_NON_ALNUM = re.compile(r"[^A-Za-z0-9 ]")
_SPACES = re.compile(r" +")
ENTITY_PREFIX = "e:"


@lru_cache(maxsize=1 << 16)
def normalise_phrase(phrase: str) -> str:
    """HippoRAG's processing_phrases (lower-case, non-alphanumerics to spaces, strip), spaces collapsed."""
    return _SPACES.sub(" ", _NON_ALNUM.sub(" ", phrase.lower()).strip())


def relation_type_of(predicate: str) -> str:
    """'published by' -> 'PUBLISHED_BY' (empty if nothing alphanumeric is left)."""
    return normalise_phrase(predicate).replace(" ", "_").upper()


def _sentence(subject: str, predicate: str, obj: str) -> str:
    text = " ".join(part.strip() for part in (subject, predicate, obj))
    return text if text.endswith((".", "!", "?")) else text + "."


def _find_one(root: Path, pattern: str) -> Path:
    hits = sorted(root.glob(pattern))
    if len(hits) != 1:
        found = ", ".join(p.name for p in hits) or "none"
        raise IngestError(str(root), 0, "path", f"expected exactly one {pattern} file, found {found}")
    return hits[0]


def _load_json(path: Path) -> Any:
    try:
        # Python's json on purpose: the OpenIE file holds JavaScript-style NaN literals.
        with path.open("r", encoding="utf-8") as fh:
            return json.load(fh)
    except UnicodeDecodeError as exc:
        raise IngestError(str(path), 0, "encoding", f"not valid UTF-8 at byte {exc.start}") from exc
    except json.JSONDecodeError as exc:
        raise IngestError(str(path), exc.lineno, "json", exc.msg) from exc
    except RecursionError as exc:  # a JSON bomb of nested brackets
        raise IngestError(str(path), 0, "json", "nested too deeply") from exc


def _str_field(record: Any, key: str, file: str, at: str) -> str:
    if not isinstance(record, dict):
        raise IngestError(file, 0, at, "expected an object")
    value = record.get(key)
    if not isinstance(value, str):
        raise IngestError(file, 0, f"{at}.{key}", "missing or not a string")
    return check_text(value, file, 0, f"{at}.{key}")


def detect(path: Path) -> bool:
    """Whether `path` holds HippoRAG output: an `openie_*.json` beside its corpus."""
    return any(path.glob("openie_*.json"))


def load_hipporag(path: str | Path, options: IngestOptions | None = None) -> GraphData:
    """Passages become chunks `p{i}`; normalised phrases become entities `e:{phrase}`; triples become relations.

    Malformed triples (not three strings) and phrases that normalise to nothing are skipped and
    counted in `GraphData.warnings`. Duplicate triples (after normalisation) merge their source chunks.
    Errors in the files raise IngestError; line 0 means "this file", the field gives the JSON path.
    """
    max_name = (options or IngestOptions()).max_name_chars
    root = Path(path)
    if not root.is_dir():
        raise IngestError(str(root), 0, "path", "not a directory (expected a corpus JSON + openie_*.json)")
    corpus_path = _find_one(root, "*_corpus.json")
    openie_path = _find_one(root, "openie_*.json")
    cfile, ofile = str(corpus_path), str(openie_path)
    corpus = _load_json(corpus_path)
    openie = _load_json(openie_path)
    if not isinstance(corpus, list):
        raise IngestError(cfile, 0, "(root)", "expected a list of {title, text} objects")
    docs = openie.get("docs") if isinstance(openie, dict) else None
    if not isinstance(docs, list):
        raise IngestError(ofile, 0, "docs", "missing or not a list")
    if len(docs) != len(corpus):
        raise IngestError(ofile, 0, "docs", f"{len(docs)} records but the corpus has {len(corpus)} passages")

    chunks: list[Chunk] = []
    surface: dict[str, Counter[str]] = {}
    mentions: dict[str, dict[str, None]] = {}
    triples: dict[tuple[str, str, str], tuple[str, list[str]]] = {}
    malformed: Counter[int] = Counter()
    empty_triples = empty_phrases = 0
    first_bad = ""

    def mention(phrase: str, chunk_id: str) -> str | None:
        key = normalise_phrase(phrase)
        if not key:
            return None
        surface.setdefault(key, Counter())[phrase] += 1
        mentions.setdefault(key, {})[chunk_id] = None
        return key

    for i, (passage, doc) in enumerate(zip(corpus, docs, strict=True)):
        title = _str_field(passage, "title", cfile, f"[{i}]")
        text = _str_field(passage, "text", cfile, f"[{i}]")
        at = f"docs[{i}]"
        if (_str_field(doc, "title", ofile, at), _str_field(doc, "text", ofile, at)) != (title, text):
            raise IngestError(ofile, 0, at, "title/text differ from the corpus passage at the same position")
        cid = f"p{i}"
        chunks.append(Chunk(id=cid, text=text, source=title, original_document=title, position=i))

        ents = doc.get("extracted_entities") or []
        trips = doc.get("extracted_triples") or []
        if not isinstance(ents, list):
            raise IngestError(ofile, 0, f"{at}.extracted_entities", "expected a list")
        if not isinstance(trips, list):
            raise IngestError(ofile, 0, f"{at}.extracted_triples", "expected a list")
        for j, phrase in enumerate(ents):
            if not isinstance(phrase, str):
                raise IngestError(ofile, 0, f"{at}.extracted_entities[{j}]", "expected a string")
            check_name(phrase, ofile, 0, f"{at}.extracted_entities[{j}]", max_name)
            if mention(phrase, cid) is None:
                empty_phrases += 1
        for j, triple in enumerate(trips):
            where = f"{at}.extracted_triples[{j}]"
            if not (isinstance(triple, list) and len(triple) == 3 and all(isinstance(t, str) for t in triple)):
                malformed[len(triple) if isinstance(triple, list) else -1] += 1
                first_bad = first_bad or where
                continue
            for k, part in enumerate(triple):
                check_name(part, ofile, 0, f"{where}[{k}]", max_name)
            subj, pred, obj = triple
            rtype = relation_type_of(pred)
            skey = normalise_phrase(subj)
            okey = normalise_phrase(obj)
            if not (skey and okey and rtype):
                empty_triples += 1
                continue
            mention(subj, cid)
            mention(obj, cid)
            key = (skey, rtype, okey)
            if key in triples:
                triples[key][1].append(cid)
            else:
                triples[key] = (_sentence(subj, pred, obj), [cid])

    too_long = {k for k in surface if id_too_long(ENTITY_PREFIX + k)}
    entities = tuple(
        Entity(
            id=ENTITY_PREFIX + key,
            name=counts.most_common(1)[0][0],
            source_chunks=tuple(mentions[key]),
        )
        for key, counts in surface.items()
        if key not in too_long
    )
    relations = []
    for (skey, rtype, okey), (sentence, cids) in triples.items():
        if skey in too_long or okey in too_long:
            continue
        src, dst = ENTITY_PREFIX + skey, ENTITY_PREFIX + okey
        rid = relation_id(src, rtype, dst)
        unique = tuple(dict.fromkeys(cids))
        relations.append(
            Relation(
                id=rid,
                source_id=src,
                target_id=dst,
                relation_type=rtype,
                description=sentence,
                # HippoRAG weights an edge by how often it was extracted; here: passages stating it
                weight=float(len(unique)),
                vector_db_ref_id=rid,
                source_chunks=unique,
            )
        )

    warnings = []
    if malformed:
        sizes = ", ".join(
            f"{n} with {size} elements" if size >= 0 else f"{n} not a list" for size, n in sorted(malformed.items())
        )
        warnings.append(
            f"{ofile}: skipped {sum(malformed.values())} malformed triples (need 3 strings): {sizes}; "
            f"first at {first_bad}"
        )
    if empty_triples:
        warnings.append(f"{ofile}: skipped {empty_triples} triples with a part that normalises to nothing")
    if empty_phrases:
        warnings.append(f"{ofile}: skipped {empty_phrases} entity phrases that normalise to nothing")
    if too_long:
        warnings.append(f"{ofile}: skipped {len(too_long)} entity phrases longer than {MAX_ID_LEN} bytes")
    return GraphData(entities=entities, relations=tuple(relations), chunks=tuple(chunks), warnings=tuple(warnings))


FORMAT = Format(detect, load_hipporag)
