"""The knowledge-graph and lesson services of a store, and their read-only views.

May import: `server.service`, `graph`, `ingest`, `retrieval`; never a face, never `mcp` (tests/runtime/test_layers.py).
"""
