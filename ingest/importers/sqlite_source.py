"""Reading another server's SQLite database: read-only, and one clear error when it is not one.

The file is opened read-only (``mode=ro``): an import never writes its source. Tables that need
an extension this Python does not have (sqlite-vec's ``vec0``, say) are never touched: only
the plain tables an importer names are read.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

from .items import unreadable

MAGIC = b"SQLite format 3\x00"


def describe(path: Path) -> str:
    """What ``path`` is, in a few words (for an error that says what was found)."""
    if not path.exists():
        return "nothing at that path"
    if path.is_dir():
        names = sorted(p.name for p in path.iterdir())[:5]
        return f"a folder ({', '.join(names) or 'empty'})"
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError as exc:
        return f"a file that cannot be read ({exc.strerror or exc})"
    if not head:
        return "an empty file"
    if head == MAGIC:
        return "an SQLite database"
    return f"a file starting with {head[:12]!r}"


def open_readonly(path: Path, source: str, expected: str) -> sqlite3.Connection:
    """``path`` as a read-only SQLite connection (rows as ``sqlite3.Row``); anything that is not
    a readable SQLite database is :func:`~.items.unreadable`."""
    if not path.is_file():
        raise unreadable(source, path, expected, describe(path))
    if describe(path) != "an SQLite database":
        raise unreadable(source, path, expected, describe(path))
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        raise unreadable(source, path, expected, f"a damaged SQLite file ({exc})") from None
    return conn


def tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}


def require(
    conn: sqlite3.Connection,
    path: Path,
    source: str,
    expected: str,
    needed: dict[str, Iterable[str]],
) -> None:
    """Every table of ``needed`` exists with its columns, else :func:`~.items.unreadable`
    naming the first table or columns missing (and the tables that are there)."""
    have = tables(conn)
    for table, cols in needed.items():
        if table not in have:
            listed = ", ".join(sorted(t for t in have if not t.startswith("sqlite_"))[:8])
            raise unreadable(
                source, path, expected,
                f"an SQLite database without a {table} table (tables: {listed or 'none'})",
            )  # fmt: skip
        missing = sorted(set(cols) - columns(conn, table))
        if missing:
            raise unreadable(
                source, path, expected,
                f"a {table} table without the column(s) {', '.join(missing)}",
            )  # fmt: skip


def rows(conn: sqlite3.Connection, sql: str, path: Path, source: str, expected: str) -> list:
    """All rows of ``sql``; a read error (a damaged page) is :func:`~.items.unreadable`."""
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.DatabaseError as exc:
        raise unreadable(source, path, expected, f"a damaged SQLite file ({exc})") from None
