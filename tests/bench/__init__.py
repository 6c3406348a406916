"""The benchmark harnesses and the published tables."""
