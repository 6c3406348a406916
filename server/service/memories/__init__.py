"""Memories and writes: remember, update with a three-way merge, bulk writes, idempotency keys, write coordination, conflicts, the change stream.

May import: `server.service`, `graph`, `ingest`, `retrieval`; never a face, never `mcp` (tests/runtime/test_layers.py).
"""
