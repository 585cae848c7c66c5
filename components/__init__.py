"""Rendering components of the KG Lens app: graph view, fact table, sources, trace, sidebar, data widgets."""
