"""Agent transcripts of every client read as conversation turns and exchanges.

May import: `ingest`, `retrieval` (tests/runtime/test_layers.py).
"""
