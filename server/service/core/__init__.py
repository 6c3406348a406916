"""The service's ground: its error tree, models, identity and ids, scopes and limits, settings, the running service, bearer tokens, maintenance, the demo.

May import: `server.service`, `graph`, `ingest`, `retrieval`; never a face, never `mcp` (tests/runtime/test_layers.py).
"""
