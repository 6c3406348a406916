"""Retrieval engine: canonical SQLite store, offline embeddings, Chroma vectors, hybrid ranking."""
