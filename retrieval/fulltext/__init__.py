"""Lexical retrieval: the analyzer, FTS5's bm25 and its in-memory postings (kept on disk beside the store), Porter's step 1.

May import: `retrieval` only (tests/runtime/test_layers.py).
"""
