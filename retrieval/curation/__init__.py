"""Curation: correct, merge and update a graph in place, with its history (issue 23).

ops (the operations and changesets), compile (operations to before/after records), views (the graph as
compiling reads it), write (records to the stores, vectors, BM25 and sidecar), apply (the Curator: apply,
undo, redo, recovery, history), log (the SQLite log per graph), access (who may edit), and the features built
on them: duplicates, items (grades follow the graph), replay (re-imports keep corrections), exchange (JSONL).
"""
