"""Hybrid ranking as small functions: lexical and vector candidates fused, long queries, modality, grouping, the guard that drops a failing feature.

Imports: `retrieval.fulltext`, `retrieval.vector`, `retrieval.timeline`, `retrieval.storage`, `retrieval.embedding`, `retrieval` (errors, records) and this folder.
"""
