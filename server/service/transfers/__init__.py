"""Import, export and ingest as service calls: other memory servers' data in, notes and JSON out, a workspace ingested.

May import: `server.service`, `graph`, `ingest`, `retrieval`; never a face, never `mcp` (tests/runtime/test_layers.py).
"""
