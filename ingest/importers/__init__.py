"""Readers of other memory servers' stores, one module per source: each turns a source (a
database, an export, a folder of notes) into neutral items (:mod:`.items`) that the service
writes through the same path as every write (``server/service/transfers/import_from.py``).

The official memory server's ``memory.jsonl`` is read by the knowledge graph's own
``graph.compat`` (``import-graph``), so it is not here.

May import: `ingest`, `retrieval` (tests/runtime/test_layers.py).
"""
