"""KG Lens retrieval engine: stores, ingest, search stages and their orchestrator (no UI)."""
