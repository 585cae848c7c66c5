"""The offline extractor (packaged spaCy pipeline) on a few short chunks, and the merge into graph records."""

from __future__ import annotations

from retrieval.ingest.extract.base import ChunkInput, entity_id, merge_graphs, name_key, relation_type
from retrieval.ingest.extract.offline import CO_OCCURS, OfflineExtractor

CHUNKS = [
    ChunkInput("a", "The Journal of Mathematical Physics is a peer-reviewed journal published monthly by the "
                    "American Institute of Physics. It had 12 issues and 3,000 readers in 1963."),
    ChunkInput("b", "Jan Philip Solovej from University of Copenhagen edits the Journal of Mathematical Physics."),
]


def test_entities_are_typed_spans_without_numbers_and_relations_come_from_the_parse() -> None:
    seen: list[tuple[str, int, int]] = []
    run = OfflineExtractor().extract(CHUNKS, lambda *a: seen.append(a))
    assert seen[0] == ("extracting", 0, 2) and seen[-1] == ("extracting", 2, 2)
    first = run.graphs[0]
    assert first is not None
    names = {e.name: e.type for e in first.entities}
    assert names["The Journal of Mathematical Physics"] == "ORG" and names["1963"] == "DATE"
    assert not {"12", "3,000", "monthly"} & set(names)  # cardinals, and dates without a digit, are left out
    typed = {(r.source, r.type, r.target) for r in first.relations}
    assert ("The Journal of Mathematical Physics", "PUBLISH_BY", "the American Institute of Physics") in typed
    assert all(r.description.endswith(".") and r.description in CHUNKS[0].text for r in first.relations)
    second = run.graphs[1]
    assert second is not None
    assert any(r.type == CO_OCCURS or r.type.startswith("EDIT") for r in second.relations)


def test_merge_joins_spellings_across_chunks_and_keeps_every_source_chunk() -> None:
    run = OfflineExtractor().extract(CHUNKS)
    again = OfflineExtractor().extract(CHUNKS)
    assert run.graphs == again.graphs  # deterministic: a re-ingest builds the same graph
    entities, relations, _ = merge_graphs(CHUNKS, run.graphs)
    journal = next(e for e in entities if e.id == entity_id(name_key("Journal of Mathematical Physics")))
    assert journal.source_chunks == ("a", "b")  # 'The Journal ...' and 'the Journal ...' are one entity
    assert {r.source_chunks for r in relations} <= {("a",), ("b",)}
    assert all(r.weight == len(r.source_chunks) for r in relations)


def test_name_keys_and_types_keep_unicode_and_ids_stay_short() -> None:
    assert name_key("  The Zoë  Café! ") == "zoë café" and name_key("Жуков") == "жуков"
    assert name_key("...") == "" and relation_type("born in") == "BORN_IN" and relation_type("Part-Of") == "PART_OF"
    long = entity_id("x" * 2000)
    assert long.startswith("e:x") and len(long.encode()) <= 512 and long != entity_id("x" * 1999)


def test_noun_phrases_that_recur_become_entities_one_offs_do_not() -> None:
    chunks = [ChunkInput("x", "Brand equity lets a firm charge a premium price."),
              ChunkInput("y", "Loyal customers raise brand equity over the years."),
              ChunkInput("z", "The premium price of Acme Corp rose in 2020.")]
    plain = OfflineExtractor().extract(chunks)
    assert not any(e.type == "noun_phrase" for g in plain.graphs if g for e in g.entities)
    run = OfflineExtractor(noun_phrases=True).extract(chunks)
    phrases = [{e.name for e in g.entities if e.type == "noun_phrase"} for g in run.graphs if g]
    assert phrases[0] >= {"Brand equity", "premium price"} and "brand equity" in phrases[1]
    assert "Loyal customers" not in phrases[1]  # named by one chunk only
    names = {e.name for g in run.graphs if g for e in g.entities}
    assert all(r.source in names and r.target in names for g in run.graphs if g for r in g.relations)
