"""The session indexer: transcripts become searchable exchanges, incrementally and safely.

May import: `server.service`, `graph`, `ingest`, `retrieval`; never a face, never `mcp` (tests/runtime/test_layers.py).
"""
