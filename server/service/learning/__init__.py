"""Lessons learned from work, the service: episodes fed from transcripts and hook events, a lesson written and its outcomes counted, lessons for a failed command, the review inbox of learned lessons, the scrub of old ones.

May import: `server.service`, `graph`, `ingest`, `retrieval`; never a face, never `mcp` (tests/runtime/test_layers.py).
"""
