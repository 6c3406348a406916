"""Lessons learned from work, the detection: checks and their commands, test reports and filters, error signatures, episodes (a check fails, files are edited, the same check passes) and their events.

Imports: `ingest.sessions` (transcript readers), `retrieval` and this folder.
"""
