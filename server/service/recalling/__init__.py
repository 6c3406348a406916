"""Recall: the ranked context entry point, the session-start view, excerpts, citations and their verification, what read tools withhold.

May import: `server.service`, `graph`, `ingest`, `retrieval`; never a face, never `mcp` (tests/runtime/test_layers.py).
"""
