"""Lessons learned from work, the detection: checks and their commands, test reports and filters, error signatures, episodes (a check fails, files are edited, the same check passes) and their events.

May import: `ingest`, `retrieval` (tests/runtime/test_layers.py).
"""
