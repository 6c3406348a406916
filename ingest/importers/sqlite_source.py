"""Reading another server's SQLite database: read-only, and one clear error when it is not one.

The file is opened read-only (``mode=ro``, ``query_only``, an untrusted schema): an import never
writes its source, and nothing the file declares runs. Tables that need an extension this Python
does not have (sqlite-vec's ``vec0``, say) are never touched: only the plain tables an importer
names are read. A value is read only up to :data:`~.bounded.MAX_FIELD_CHARS` bytes: a row holding
a larger one is skipped, and counted, by :func:`rows` (the others are read).
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from ingest.workspace.file_inside import special

from .bounded import MAX_FIELD_CHARS, check_count, size_text
from .items import unreadable

MAGIC = b"SQLite format 3\x00"


def describe(path: Path) -> str:
    """What ``path`` is, in a few words (for an error that says what was found)."""
    try:
        st = path.stat()
    except OSError:
        return "a broken symbolic link" if path.is_symlink() else "nothing at that path"
    if stat.S_ISDIR(st.st_mode):
        try:
            names = sorted(e.name for e in itertools.islice(os.scandir(path), 200))[:5]
        except OSError as exc:
            return f"a folder that cannot be read ({exc.strerror or exc})"
        return f"a folder ({', '.join(names) or 'empty'})"
    if not stat.S_ISREG(st.st_mode):
        return f"{special(st.st_mode)}, not a file"
    try:  # non-blocking: a FIFO swapped in meanwhile must not wait for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        try:
            head = os.read(fd, 16)
        finally:
            os.close(fd)
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
        conn.execute("PRAGMA query_only = ON")
        conn.execute("PRAGMA trusted_schema = OFF")
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_FIELD_CHARS)
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


TOO_BIG = f"a value larger than {size_text(MAX_FIELD_CHARS)} in the source"


def rows(
    conn: sqlite3.Connection, table: str, path: Path, source: str, expected: str,
    skipped: list[tuple[str, str]] | None = None, label: str = "row",
) -> Iterator[sqlite3.Row]:  # fmt: skip
    """The rows of ``table`` in rowid order. A row holding a value over the length limit is
    left out and added to ``skipped`` as ``(f"{label}:{rowid}", reason)``; any other read
    error (a damaged page) is :func:`~.items.unreadable`; more than ``bounded.MAX_ITEMS`` rows
    is :class:`~.bounded.SourceError`."""
    after = None
    seen = 0
    while True:
        where, args = ("", ()) if after is None else (" WHERE rowid > ?", (after,))
        sql = f"SELECT rowid AS _rowid_, * FROM {table}{where} ORDER BY rowid"
        try:
            for row in conn.execute(sql, args):
                after = row["_rowid_"]
                seen += 1
                check_count(seen)
                yield row
            return
        except sqlite3.DataError:
            # a row holds a value over the limit: the next row or the one after it (the
            # cursor reads a row ahead); read the next one alone to tell
            nxt = conn.execute(
                f"SELECT rowid FROM {table} WHERE rowid > ? ORDER BY rowid LIMIT 1",
                (-(1 << 63) if after is None else after,),
            ).fetchone()
            if nxt is None:
                return
            after = nxt[0]
            try:
                one = conn.execute(
                    f"SELECT rowid AS _rowid_, * FROM {table} WHERE rowid = ?", (after,)
                ).fetchone()
            except sqlite3.DataError:
                if skipped is not None:
                    skipped.append((f"{label}:{after}", TOO_BIG))
                continue
            if one is not None:
                yield one
        except sqlite3.DatabaseError as exc:
            raise unreadable(source, path, expected, f"a damaged SQLite file ({exc})") from None
