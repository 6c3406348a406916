"""The memory service, one folder per domain: `core/` (errors, models, identity, scopes, settings, the running service), `memories/`, `updating/`, `recalling/`, `prompting/`, `indexing/`, `learning/`, `transfers/`, `graphs/`, `browsing/`, and `trust/` (what every write is screened for).

Nothing in this package imports `mcp`: the MCP tools in `server.mcp` are thin adapters.

May import: `server.service`, `graph`, `ingest`, `retrieval`; never a face, never `mcp` (tests/runtime/test_layers.py).
"""
