"""The canonical SQLite store: records, schema and migrations, kept versions, the file locks every process takes, private files, visibility buckets.

May import: `retrieval` only (tests/runtime/test_layers.py).
"""
