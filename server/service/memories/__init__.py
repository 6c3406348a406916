"""Memories and writes: remember, update with a three-way merge, bulk writes, idempotency keys, write coordination, conflicts, the change stream."""
