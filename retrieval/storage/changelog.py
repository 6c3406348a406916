"""The change log read by the indexes kept beside the store: its head, and which records were
inserted since a point in it.

Every committed write appends to ``changes`` (``seq`` from ``AUTOINCREMENT``); the log is
compacted, so its oldest entries go, but ``sqlite_sequence`` keeps the last ``seq`` handed out.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable


def head(conn: sqlite3.Connection) -> int:
    """The last ``seq`` handed out (0 for a store that never changed)."""
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'changes'").fetchone()
    return int(row[0]) if row else 0


def holds_since(conn: sqlite3.Connection, seq: int) -> bool:
    """True when the log still holds every change after ``seq`` (not compacted past it)."""
    oldest = conn.execute("SELECT min(seq) FROM changes").fetchone()[0]
    return oldest is not None and oldest <= seq + 1


def inserted_since(conn: sqlite3.Connection, seq: int, ids: Iterable[str]) -> set[str] | None:
    """Which of ``ids`` were inserted after ``seq`` (only an inserted record can hold a rowid
    that belonged to another record before); None when the log no longer holds every change
    since then (compacted past it). Reads the log after ``seq`` in SQLite, not in Python."""
    ids = list(dict.fromkeys(ids))
    if not ids or head(conn) == seq:
        return set()
    if not holds_since(conn, seq):
        return None
    found: set[str] = set()
    for i in range(0, len(ids), 500):
        rows = conn.execute(
            "SELECT DISTINCT record_id FROM changes WHERE seq > ? AND op = 'insert' "
            "AND record_id IN (SELECT value FROM json_each(?))",
            (seq, json.dumps(ids[i : i + 500])),
        )
        found.update(r[0] for r in rows)
    return found
