"""The instruction-injection detector: rule tables, the text they read, mentions, the linear-time rule search and a linear model over the text's embedding (`injection_model.npz`).

May import: `server.service`, `graph`, `ingest`, `retrieval`; never a face, never `mcp` (tests/runtime/test_layers.py).
"""
