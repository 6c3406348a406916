"""The prompt gate and the hooks' service side: what a client hook injects, the gate and its vocabulary, the per-session ledger, each client's tool results read back.

May import: `server.service`, `graph`, `ingest`, `retrieval`; never a face, never `mcp` (tests/runtime/test_layers.py).
"""
