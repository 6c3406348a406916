"""Facts that changed: update links at write time (supersede), write-time candidates and the client's model as their judge.

May import: `server.service`, `graph`, `ingest`, `retrieval`; never a face, never `mcp` (tests/runtime/test_layers.py).
"""
