"""Input formats: one module per format, each returning a validated GraphData."""
