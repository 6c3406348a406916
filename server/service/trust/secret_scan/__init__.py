"""The secret scanner: rule tables, value checks, assignments, spellings, and files whose diffs are never kept.

May import: `server.service`, `graph`, `ingest`, `retrieval`; never a face, never `mcp` (tests/runtime/test_layers.py).
"""
