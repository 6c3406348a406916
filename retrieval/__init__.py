"""The storage and ranking engine: the engine that owns a store folder (`engine.py`), SQLite (`storage/`), full text (`fulltext/`), embeddings (`embedding/`), the vector index (`vector/`), hybrid ranking (`ranking/`), time and update links (`timeline/`), linear-time regular expressions (`regexes/`), PostgreSQL mode (`pg/`).

May import: `retrieval` only (tests/runtime/test_layers.py).
"""
