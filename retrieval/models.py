"""Typed records: the seed vocabulary (GUIDE §3) and the search results built from it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Record(BaseModel):
    """Immutable base; change a record with `model_copy(update=...)`."""

    model_config = ConfigDict(frozen=True, extra="forbid")


# --- graph data -------------------------------------------------------------------------------


class Entity(Record):
    """A graph node (GraphNode). `source_chunks` lists the chunks that mention it."""

    id: str
    name: str
    type: str = "entity"
    description: str = ""
    properties: dict[str, Any] = Field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    source_chunks: tuple[str, ...] = ()


GraphNode = Entity


class Relation(Record):
    """A directed graph edge (GraphEdge) with its one-sentence description."""

    id: str
    source_id: str
    target_id: str
    relation_type: str
    description: str = ""
    weight: float = 1.0
    vector_db_ref_id: str = ""
    source_chunks: tuple[str, ...] = ()
    valid_at: str | None = None
    invalid_at: str | None = None

    @property
    def source_chunk(self) -> str | None:
        return self.source_chunks[0] if self.source_chunks else None


GraphEdge = Relation


class Chunk(Record):
    """A passage of a book (the DocumentChunks collection)."""

    id: str
    text: str
    source: str = ""
    original_document: str = ""  # the book
    chapter: str = ""
    author: str = ""
    position: int = 0


class SourceMetadata(Record):
    """Where a fact comes from: chunk id, book, chapter, author."""

    source: str
    original_document: str = ""
    chapter: str = ""
    author: str = ""
    chunk_id: str = ""


class Finding(Record):
    """One insight of a community report: a short summary and its explanation."""

    summary: str = ""
    explanation: str = ""


class Community(Record):
    """A group of entities: GraphRAG's Leiden hierarchy with its LLM report, or one computed at ingest.

    A computed community has no LLM report: its title names its top entities and its summary is a plain
    description built from its own counts (`source == "computed"`, `rank` is None).
    """

    id: str
    level: int = 0
    parent: str | None = None
    children: tuple[str, ...] = ()
    title: str = ""
    summary: str = ""
    rank: float | None = None  # GraphRAG: the report's LLM-rated importance (0-10)
    rank_explanation: str = ""
    findings: tuple[Finding, ...] = ()
    entity_ids: tuple[str, ...] = ()
    relation_ids: tuple[str, ...] = ()  # relations with both ends inside
    chunk_ids: tuple[str, ...] = ()
    size: int = 0  # entities
    source: Literal["graphrag", "computed"] = "computed"


class Claim(Record):
    """A claim (GraphRAG covariate) about its subject entity; an object that is no entity stays text."""

    id: str
    subject_id: str | None = None  # None: the subject named is not an entity of the graph
    subject: str = ""  # the subject as the source names it
    object_id: str | None = None
    object: str = ""
    type: str = ""
    status: str = ""  # e.g. TRUE, FALSE, SUSPECTED
    description: str = ""
    start_date: str | None = None
    end_date: str | None = None
    source_text: str = ""
    source_chunks: tuple[str, ...] = ()


class GraphData(Record):
    """A whole graph in memory: what ingest builds and stores load."""

    entities: tuple[Entity, ...] = ()
    relations: tuple[Relation, ...] = ()
    chunks: tuple[Chunk, ...] = ()
    warnings: tuple[str, ...] = ()  # what the parser skipped (e.g. malformed triples), shown by ingest
    communities: tuple[Community, ...] = ()  # empty: ingest computes them (Leiden)
    claims: tuple[Claim, ...] = ()


class GraphChanges(Record):
    """Records to put (insert, or replace by id) and ids to delete: one unit of change to a graph's stores.

    A store applies it atomically where it can (one transaction), deletes first; a relation put may move to new
    endpoints, which must be stored or among `entities`.
    """

    entities: tuple[Entity, ...] = ()
    relations: tuple[Relation, ...] = ()
    chunks: tuple[Chunk, ...] = ()
    delete_entities: tuple[str, ...] = ()
    delete_relations: tuple[str, ...] = ()
    delete_chunks: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.entities or self.relations or self.chunks or self.delete_entities
                    or self.delete_relations or self.delete_chunks)


class Subgraph(Record):
    """Nodes and edges of a retrieved or traversed region. `total_nodes` counts before any cap."""

    nodes: tuple[Entity, ...] = ()
    edges: tuple[Relation, ...] = ()
    total_nodes: int = 0
    truncated: bool = False


class GraphStats(Record):
    """Counts and identity of a stored graph."""

    name: str
    version: str
    books: int
    chapters: int
    chunks: int
    entities: int
    relations: int
    graph_backend: str
    vector_backend: str
    created_at: str = ""
    embed_model: str = ""
    vectors: dict[str, int] = Field(default_factory=dict)  # rows per vector collection
    communities: int = 0
    chapter_names: dict[str, tuple[str, ...]] = Field(default_factory=dict)  # book -> chapters in reading order


# --- search records ---------------------------------------------------------------------------


class Decomposition(Record):
    """A query split into entity-centred (local) and relation-centred (global) sub-queries."""

    query: str
    local_queries: tuple[str, ...] = ()
    global_queries: tuple[str, ...] = ()
    entity_mentions: tuple[str, ...] = ()
    is_relationship_query: bool = False
    hops: int = 1
    method: Literal["offline", "gemini"] = "offline"


class SemanticPath(Record):
    """A path from a seed to a PPR destination, scored."""

    source_node: Entity
    intermediate_nodes: tuple[Entity, ...] = ()
    destination_node: Entity
    edges: tuple[Relation, ...] = ()
    ppr_score: float = 0.0
    path_semantic_score: float = 0.0


class GlobalRelation(Record):
    """A relation found by searching relation descriptions."""

    source: Entity
    target: Entity
    relation: Relation
    relation_type: str
    description: str
    score: float


class FactStep(Record):
    """One relation of a fact, in the order the fact reads it: `left`, the relation, `right`; `forward` says the
    relation runs left → right (else right → left: an incoming edge of a path)."""

    left: str
    relation: str
    right: str
    forward: bool = True
    description: str = ""


class VerbalizedFact(Record):
    """A fact as text with every score and its sources; also the reranking candidate. `text` is the seed's
    verbalized form (what the agent Markdown carries); `steps` are its relations, for the screen's one layout."""

    id: str
    type: Literal["local", "global", "document", "entity"]
    text: str
    steps: tuple[FactStep, ...] = ()
    scores: dict[str, float] = Field(default_factory=dict)
    sources: tuple[SourceMetadata, ...] = ()
    chunk_ids: tuple[str, ...] = ()
    entity_ids: tuple[str, ...] = ()
    relation_ids: tuple[str, ...] = ()
    valid_at: str | None = None
    invalid_at: str | None = None
    channel: Literal["document", "graph", ""] = ""  # dual-channel citations
    citation: str = ""  # e.g. "[3: Knowledge Graph - Price Elasticity]"


class StageTiming(Record):
    stage: str
    ms: float


# The longest query any search mode runs (every tool, the KG retriever, imported query sets).
MAX_QUERY_CHARS = 2000


class SearchParams(Record):
    """Seed parameters of the KG retriever (validated)."""

    max_results: int = Field(10, ge=1, le=50)
    max_seed_nodes: int = Field(5, ge=1, le=50)
    max_hops: int | None = Field(None, ge=1, le=4)
    top_k_destinations: int = Field(10, ge=1, le=100)
    top_k_per_query: int = Field(5, ge=1, le=50)
    damping: float = Field(0.5, gt=0.0, lt=1.0)
    max_edges: int = Field(2000, ge=10, le=100_000)
    rerank: Literal["mmr", "llm", "none"] = "mmr"
    # PPR on the whole in-memory graph up to this many edges; beyond it, on the k-hop neighbourhood
    full_graph_max_edges: int = Field(5_000_000, ge=0)


class SearchResult(Record):
    """Facts, subgraph, trace and warnings of one search."""

    query: str
    params: SearchParams = Field(default_factory=lambda: SearchParams.model_validate({}))
    facts: tuple[VerbalizedFact, ...] = ()
    subgraph: Subgraph = Field(default_factory=Subgraph)
    seed_ids: tuple[str, ...] = ()
    destination_ids: tuple[str, ...] = ()
    paths: tuple[SemanticPath, ...] = ()
    global_relations: tuple[GlobalRelation, ...] = ()
    decomposition: Decomposition | None = None
    timings: tuple[StageTiming, ...] = ()
    warnings: tuple[str, ...] = ()
    graph_version: str = ""
    mode: str = "kg"  # kg | vector | graph | hybrid | comprehensive | dual | multidoc
    counts: dict[str, int] = Field(default_factory=dict)  # e.g. per-channel totals
    groups: dict[str, tuple[str, ...]] = Field(default_factory=dict)  # multidoc: book -> fact ids
    entity_ppr: dict[str, float] = Field(default_factory=dict)  # KG: PPR of each subgraph entity
    # KG: the entities of the whole graph with the most PPR mass (the map's heat overlay), best first
    ppr_mass: dict[str, float] = Field(default_factory=dict)
    chunks: dict[str, Chunk] = Field(default_factory=dict)  # the cited chunks' records (text, book, chapter) by id
    # the no-match signal (issue 17; records below): when it fires, `facts` is empty and the nearest
    # candidates are kept as `weak_matches`
    no_match: bool = False
    evidence_strength: EvidenceStrength | None = None
    weak_matches: tuple[VerbalizedFact, ...] = ()


# --- traversal and graph memory (issue 7) -----------------------------------------------------


class GraphPath(Record):
    """One path, verbalized `A --[REL: description]--> B`, with its scores and sources."""

    nodes: tuple[Entity, ...]
    edges: tuple[Relation, ...] = ()
    text: str = ""
    hops: int = 0
    ppr_mass: float = 0.0
    query_similarity: float | None = None
    score: float = 0.0
    chunk_ids: tuple[str, ...] = ()
    sources: tuple[SourceMetadata, ...] = ()


class TraversalResult(Record):
    """BFS / neighbourhood expansion: nodes in BFS order, one path to each, the induced subgraph."""

    start_id: str
    max_depth: int
    direction: Literal["out", "in", "both"] = "out"
    relation_types: tuple[str, ...] = ()
    depths: dict[str, int] = Field(default_factory=dict)  # shown node id -> hops from start
    paths: tuple[GraphPath, ...] = ()
    subgraph: Subgraph = Field(default_factory=Subgraph)
    shown: int = 0
    total: int = 0  # nodes reachable within max_depth under the filters, start excluded (exact)
    warnings: tuple[str, ...] = ()

    @property
    def visited(self) -> tuple[Entity, ...]:
        return self.subgraph.nodes

    @property
    def showing(self) -> str:
        return f"showing {self.shown} of {self.total}"


class PathResult(Record):
    """Up to k shortest simple paths between two entities, ranked (hops, then score)."""

    source: Entity
    target: Entity
    paths: tuple[GraphPath, ...] = ()
    subgraph: Subgraph = Field(default_factory=Subgraph)
    k: int = 5
    max_hops: int = 4
    query: str = ""
    candidates: int = 0  # simple paths ranked before the top k was taken
    warnings: tuple[str, ...] = ()


class MemoryGraphSummary(Record):
    """One stored graph as listed or found in graph memory (seed 003)."""

    graph_id: str
    tenant: str
    namespace: str
    title: str = ""
    keywords: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    node_count: int = 0
    edge_count: int = 0
    created_at: str = ""
    score: float = 0.0


class StoredGraph(Record):
    """A graph kept in graph memory: nodes, edges, keywords, tags and free metadata."""

    graph_id: str
    tenant: str
    namespace: str
    nodes: tuple[Entity, ...] = ()
    edges: tuple[Relation, ...] = ()
    keywords: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: str = ""


class MemoryResult(Record):
    """Ok/fail record of a graph-memory operation; `error_kind` says why it failed."""

    ok: bool
    error: str | None = None
    error_kind: Literal["invalid", "not_found", "corrupt", "io", "forbidden"] | None = None
    graph_id: str | None = None
    graph: StoredGraph | None = None
    graphs: tuple[MemoryGraphSummary, ...] = ()
    traversal: TraversalResult | None = None


# --- answers, the no-match signal and the Cypher console (issue 17) ---------------------------


class EvidenceStrength(Record):
    """How strongly the best evidence matches a query (retrieval.search.nomatch); below `threshold`: no match."""

    score: float
    threshold: float
    applied: bool = True  # False: the threshold was calibrated for another embedder, so it is not used
    signals: dict[str, float] = Field(default_factory=dict)  # the inputs of `score`, for the trace


class Enhancements(Record):
    """Seed 004's `use_enhancements` switches of the answer path, each reported in the answer's trace."""

    graph_rerank: bool = True  # α·similarity + β·PageRank over the retrieved facts
    cross_encoder: bool = False  # (query, fact) pairs scored by a CrossEncoder; a visible passthrough offline
    few_shot: bool = True  # the graph's stored examples closest to the question go into the prompt
    multi_doc: bool = False  # chunks of the best books added as evidence, the answer combines books


class FewShotExample(Record):
    """A worked example stored with a graph (seed 004 FewShotManager): question, answer, optional Cypher."""

    id: str
    question: str
    answer: str
    cypher: str = ""


class Evidence(Record):
    """One numbered item `[n]` an answer may cite: a retrieved fact or a chunk the facts come from."""

    n: int
    kind: Literal["fact", "chunk"]
    id: str  # fact id or chunk id
    text: str
    source: str = ""  # book — chapter
    book: str = ""


class AnswerSentence(Record):
    """A sentence of an answer with the evidence numbers it cites; `invalid`: numbers that cite nothing."""

    text: str
    citations: tuple[int, ...] = ()
    invalid: tuple[int, ...] = ()

    @property
    def cited(self) -> bool:
        return bool(self.citations)


class Answer(Record):
    """A grounded answer: generated by Gemini, extractive (evidence sentences), or no match."""

    query: str
    kind: Literal["generated", "extractive", "no_match"]
    answer: str  # as written, with its [n] markers
    citations: tuple[Evidence, ...] = ()  # the evidence the answer cites, by number
    sentences: tuple[AnswerSentence, ...] = ()
    evidence: tuple[Evidence, ...] = ()  # every numbered item the answer could cite
    uncited: int = 0  # sentences citing no evidence
    invalid_citations: tuple[int, ...] = ()  # numbers outside 1..len(evidence)
    enhancements: dict[str, str] = Field(default_factory=dict)  # switch -> what it did ("off", "on: ...")
    examples: tuple[str, ...] = ()  # questions of the few-shot examples used
    weak_matches: tuple[VerbalizedFact, ...] = ()
    evidence_strength: EvidenceStrength | None = None
    model: str = ""
    timings: tuple[StageTiming, ...] = ()
    warnings: tuple[str, ...] = ()
    graph_version: str = ""


class QueryResult(Record):
    """Rows of one read-only Cypher query (JSON-safe values) and the nodes/relationships they hold."""

    query: str
    params: dict[str, Any] = Field(default_factory=dict)
    backend: str
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[Any, ...], ...] = ()
    subgraph: Subgraph = Field(default_factory=Subgraph)
    more_rows: bool = False  # the row cap cut the result
    max_rows: int
    timeout_ms: int
    elapsed_ms: float = 0.0

    @property
    def showing(self) -> str:
        """`showing 1,000 of ≥1,001 rows` when the cap cut the result, else `N rows`."""
        n = len(self.rows)
        if self.more_rows:
            return f"showing {n:,} of ≥{n + 1:,} rows"
        return f"{n:,} row{'s' if n != 1 else ''}"


SearchResult.model_rebuild()


# --- the graph view's details panel and expansion (issue 15) ----------------------------------


class RelationLine(Record):
    """One relation of an entity, seen from it: the relation, the entity at its other end and its direction."""

    relation: Relation
    other_id: str
    other_name: str
    other_type: str = "entity"
    outgoing: bool = True


class EntityDetails(Record):
    """What the details panel shows for an entity: record, degree, typed relations and source chunks (capped,
    with the counts before the cap). `in_graph` is False when the entity is not in the opened graph (a stored
    graph from elsewhere): then degree and relations count within the view."""

    entity: Entity
    degree: int = 0
    relations: tuple[RelationLine, ...] = ()
    relations_total: int = 0
    relation_types: dict[str, int] = Field(default_factory=dict)  # every relation of the entity, by type
    sources: tuple[Chunk, ...] = ()
    sources_total: int = 0
    in_graph: bool = True


class RelationDetails(Record):
    """What the details panel shows for a relation: the record, both ends and its source chunks."""

    relation: Relation
    source: Entity
    target: Entity
    sources: tuple[Chunk, ...] = ()
    sources_total: int = 0
    in_graph: bool = True


class NeighbourSummary(Record):
    """How many of an entity's neighbours a view shows ("N of M") and, by relation type, how many it leaves out."""

    node_id: str
    shown: int = 0
    total: int = 0
    left_by_type: dict[str, int] = Field(default_factory=dict)
