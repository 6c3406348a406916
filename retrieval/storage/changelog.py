"""The change log read by the indexes kept beside the store: its head, and which records
changed since a point in it.

Every committed write appends to ``changes`` (``seq`` from ``AUTOINCREMENT``); the log is
compacted, so its oldest entries go, but ``sqlite_sequence`` keeps the last ``seq`` handed out.
"""

from __future__ import annotations

import sqlite3


def head(conn: sqlite3.Connection) -> int:
    """The last ``seq`` handed out (0 for a store that never changed)."""
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'changes'").fetchone()
    return int(row[0]) if row else 0


def changed_since(conn: sqlite3.Connection, seq: int) -> set[str] | None:
    """The ids of the records changed after ``seq``; None when the log no longer holds every
    change since then (compacted past it)."""
    if head(conn) == seq:
        return set()
    oldest = conn.execute("SELECT min(seq) FROM changes").fetchone()[0]
    if oldest is None or oldest > seq + 1:
        return None
    rows = conn.execute("SELECT DISTINCT record_id FROM changes WHERE seq > ?", (seq,))
    return {r[0] for r in rows}
