"""Benchmark harnesses: synthetic graphs and the scale benchmark (not part of the engine)."""
