"""The rows of ``pending_relations``: the relations an import keeps waiting for an entity.

Written by :func:`graph.pending.keep`; each function here runs in its caller's connection
(inside its transaction): :func:`resolve` when an entity is created, :func:`drop` when entities
are deleted, :func:`forget` when a relation is deleted, :func:`of` for an export.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

COLUMNS = "bucket, from_name, to_name, relation_type, created_by, created_at"
CHUNK = 400  # names per statement (SQLite's limit on variables is 999 in older builds)


def resolve(conn: sqlite3.Connection, bucket: str, name: str) -> int:
    """Make a relation of every relation pending on ``name`` (just created, in ``conn``'s
    transaction) whose other endpoint exists too; returns how many."""
    rows = conn.execute(
        "SELECT from_name, to_name, relation_type, created_by, created_at FROM "
        "pending_relations WHERE bucket=? AND (from_name=? OR to_name=?)",
        (bucket, name, name),
    ).fetchall()
    made = 0
    for f, t, kind, by, at in rows:
        other = t if f == name else f
        if (
            other != name
            and not conn.execute(
                "SELECT 1 FROM entities WHERE bucket=? AND name=?", (bucket, other)
            ).fetchone()
        ):
            continue
        conn.execute(f"INSERT OR IGNORE INTO relations({COLUMNS}) VALUES (?,?,?,?,?,?)",
                     (bucket, f, t, kind, by, at))  # fmt: skip
        conn.execute(
            "DELETE FROM pending_relations WHERE bucket=? AND from_name=? AND to_name=? "
            "AND relation_type=?",
            (bucket, f, t, kind),
        )
        made += 1
    return made


def drop(conn: sqlite3.Connection, bucket: str, names: Sequence[str]) -> None:
    """Forget the relations pending from or to ``names`` (entities being deleted)."""
    for start in range(0, len(names), CHUNK):
        part = list(names[start : start + CHUNK])
        marks = ",".join("?" * len(part))
        conn.execute(
            f"DELETE FROM pending_relations WHERE bucket=? AND (from_name IN ({marks}) "
            f"OR to_name IN ({marks}))",
            [bucket, *part, *part],
        )


def forget(conn: sqlite3.Connection, bucket: str, triple: tuple[str, str, str]) -> int:
    """Forget one pending relation (``delete_relations``); returns 1 if it was there."""
    return conn.execute(
        "DELETE FROM pending_relations WHERE bucket=? AND from_name=? AND to_name=? "
        "AND relation_type=?",
        (bucket, *triple),
    ).rowcount


def of(reader: sqlite3.Connection, bucket: str) -> list[tuple[str, str, str]]:
    """The relations pending in ``bucket``: (from, to, type), oldest first."""
    return [
        (r[0], r[1], r[2])
        for r in reader.execute(
            "SELECT from_name, to_name, relation_type FROM pending_relations WHERE bucket=? "
            "ORDER BY created_at, from_name, to_name, relation_type",
            (bucket,),
        )
    ]
