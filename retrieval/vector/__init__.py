"""The vector index: Chroma in a child process forked from a clean spawner, the outbox applied after commits, stored vectors, and the exact scan of a small store that has no index yet.

May import: `retrieval` only (tests/runtime/test_layers.py).
"""
