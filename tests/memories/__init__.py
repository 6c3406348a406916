"""Memories and writes: bulk, merge, revisions, idempotency, limits, TTL, visibility, the change stream."""
