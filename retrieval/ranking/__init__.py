"""Hybrid ranking as small functions: lexical and vector candidates fused, long queries, modality, grouping, the guard that drops a failing feature.

May import: `retrieval` only (tests/runtime/test_layers.py).
"""
