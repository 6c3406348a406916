"""PostgreSQL as the canonical store shared by many daemons (``PATTERN_STORE_URL``); each
daemon's SQLite store is its replica. See ``docs/postgres.md``. Imported only when a store URL
is given: the SQLite-only path never imports psycopg.

May import: `retrieval` only (tests/runtime/test_layers.py).
"""
