"""The vector index: Chroma in a child process forked from a clean spawner, the outbox applied after commits, stored vectors.

Imports: `retrieval.storage`, `retrieval.embedding`, `retrieval` (errors, records) and this folder.
"""
