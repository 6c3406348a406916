"""Read-only views for the dashboard, the review inbox, and the warnings of writes no person asked for.

May import: `server.service`, `graph`, `ingest`, `retrieval`; never a face, never `mcp` (tests/runtime/test_layers.py).
"""
