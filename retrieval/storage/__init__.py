"""The canonical SQLite store: records, schema and migrations, kept versions, the file locks every process takes, private files, visibility buckets.

Imports: `retrieval` (errors, records) and this folder.
"""
