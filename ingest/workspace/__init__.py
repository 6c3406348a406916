"""Workspace ingestion: the walker, chunkers, the file table and artifacts, the pipeline, watch mode, progress output, reading a file inside its root.

May import: `ingest`, `retrieval` (tests/runtime/test_layers.py).
"""
