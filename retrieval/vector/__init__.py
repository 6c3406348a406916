"""The vector index: Chroma in a child process forked from a clean spawner, the outbox applied after commits, stored vectors.

May import: `retrieval` only (tests/runtime/test_layers.py).
"""
