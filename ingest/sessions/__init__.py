"""Agent transcripts of every client read as conversation turns and exchanges.

Imports: `ingest.workspace` (reading inside a root), `ingest.learning` (episode events), `retrieval` and this folder.
"""
