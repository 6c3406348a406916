"""The knowledge graph (entities, relations, observations, search, the official server's format) and lessons (storage, ranking, stack traces, lessons learned from episodes, what a lesson has earned).

May import: `graph`, `retrieval` (tests/runtime/test_layers.py).
"""
