"""What PostgreSQL holds, derived from the SQLite schema: no table is declared twice.

The catalog is read from a store migrated to :data:`retrieval.storage.schema.SCHEMA_VERSION` (an
in-memory SQLite built from the same migrations), so a table that a later migration adds is
canonical in PostgreSQL without code of its own:

- every ordinary table becomes a PostgreSQL table with the same columns (types mapped from
  SQLite's affinities, TEXT with the byte-order ``"C"`` collation that SQLite's BINARY uses),
  the same primary key, unique constraints and indexes;
- an FTS5 virtual table becomes a plain table of its rows (``rowid`` + its columns): the text
  the index is built from is canonical and travels with the log, the inverted index itself is
  built by each replica's SQLite; FTS5's shadow tables (``*_data``, ``*_idx``…) are not tables
  of their own here;
- :data:`LOCAL_TABLES` stay in SQLite only (the vector outbox: which vectors this node still has
  to push to its Chroma).

A table whose primary key is one ``INTEGER PRIMARY KEY`` column (SQLite's rowid alias) has its
key *allocated* by the canonical transaction (:mod:`.canonical`), never by PostgreSQL, so the
replicas receive explicit ids.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field

from retrieval.storage.schema import SCHEMA_VERSION, migrate

LOCAL_TABLES = frozenset({"vector_outbox"})
FTS_SHADOWS = ("_data", "_idx", "_content", "_docsize", "_config")


@dataclass
class Table:
    name: str
    columns: list[str]
    types: dict[str, str]  # PostgreSQL column types
    pk: list[str]
    auto_pk: str | None = None  # the INTEGER PRIMARY KEY the writer allocates
    autoincrement: bool = False  # never reuse a key (sqlite_sequence keeps the highest)
    fts: bool = False
    notnull: set[str] = field(default_factory=set)
    defaults: dict[str, str] = field(default_factory=dict)
    uniques: list[list[str]] = field(default_factory=list)
    indexes: list[str] = field(default_factory=list)  # CREATE INDEX statements (PostgreSQL)


def pg_type(declared: str) -> str:
    """SQLite's affinity rules (https://sqlite.org/datatype3.html), as PostgreSQL types."""
    t = (declared or "").upper()
    if "INT" in t:
        return "BIGINT"
    if any(k in t for k in ("CHAR", "CLOB", "TEXT")) or not t:
        return 'TEXT COLLATE "C"'
    if "BLOB" in t:
        return "BYTEA"
    return "DOUBLE PRECISION"  # REAL, FLOA, DOUB and NUMERIC affinity


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class Catalog:
    """The canonical tables of the current schema (see the module docstring)."""

    def __init__(self) -> None:
        conn = sqlite3.connect(":memory:")
        try:
            migrate(conn)
            self.version = SCHEMA_VERSION
            self.tables: dict[str, Table] = {}
            rows = conn.execute(
                "SELECT name, sql FROM sqlite_master WHERE type='table' ORDER BY rowid"
            ).fetchall()
            virtual = {n for n, sql in rows if sql and sql.upper().startswith("CREATE VIRTUAL")}
            shadows = {v + s for v in virtual for s in FTS_SHADOWS}
            for name, sql in rows:
                if name.startswith("sqlite_") or name in shadows or name in LOCAL_TABLES:
                    continue
                self.tables[name] = self._table(conn, name, sql, name in virtual)
        finally:
            conn.close()
        self.local = frozenset(LOCAL_TABLES)

    @staticmethod
    def _table(conn: sqlite3.Connection, name: str, sql: str, fts: bool) -> Table:
        info = conn.execute(f"PRAGMA table_info({_quote(name)})").fetchall()
        if fts:  # the rows of the index, keyed by the rowid FTS5 matches return
            cols = ["rowid", *(r[1] for r in info)]
            types = {c: 'TEXT COLLATE "C"' for c in cols}
            types["rowid"] = "BIGINT"
            return Table(name, cols, types, ["rowid"], auto_pk="rowid", fts=True)
        cols = [r[1] for r in info]
        types = {r[1]: pg_type(r[2]) for r in info}
        pk = [r[1] for r in sorted((r for r in info if r[5]), key=lambda r: r[5])]
        auto = pk[0] if len(pk) == 1 and info[cols.index(pk[0])][2].upper() == "INTEGER" else None
        without_rowid = bool(re.search(r"WITHOUT\s+ROWID\s*$", sql or "", re.I))
        if without_rowid:
            auto = None
        t = Table(
            name, cols, types, pk, auto_pk=auto,
            autoincrement=bool(auto and re.search(r"\bAUTOINCREMENT\b", sql, re.I)),
            notnull={r[1] for r in info if r[3]},
            defaults={r[1]: r[4] for r in info if r[4] is not None},
        )  # fmt: skip
        for _seq, idx, _unique, origin, _partial in conn.execute(
            f"PRAGMA index_list({_quote(name)})"
        ).fetchall():
            if origin == "u":
                t.uniques.append(
                    [r[2] for r in conn.execute(f"PRAGMA index_info({_quote(idx)})").fetchall()]
                )
            elif origin == "c":
                (ddl,) = conn.execute(
                    "SELECT sql FROM sqlite_master WHERE type='index' AND name=?", (idx,)
                ).fetchone()
                t.indexes.append(
                    re.sub(r"^\s*CREATE\s+(UNIQUE\s+)?INDEX\s+", r"CREATE \1INDEX IF NOT EXISTS ",
                           ddl, flags=re.I)
                )  # fmt: skip
        return t

    # ------------------------------------------------------------------ DDL
    def create_table(self, t: Table) -> list[str]:
        cols = []
        for c in t.columns:
            spec = f"{_quote(c)} {t.types[c]}"
            if c in t.notnull or c in t.pk:
                spec += " NOT NULL"
            if c in t.defaults:
                spec += f" DEFAULT {t.defaults[c]}"
            cols.append(spec)
        cols.append(f"PRIMARY KEY ({', '.join(map(_quote, t.pk))})")
        cols += [f"UNIQUE ({', '.join(map(_quote, u))})" for u in t.uniques]
        return [f"CREATE TABLE IF NOT EXISTS {_quote(t.name)} ({', '.join(cols)})"]

    def add_column(self, t: Table, col: str) -> str:
        spec = f"{_quote(col)} {t.types[col]}"
        if col in t.defaults:
            spec += f" DEFAULT {t.defaults[col]}"
            if col in t.notnull:
                spec += " NOT NULL"
        return f"ALTER TABLE {_quote(t.name)} ADD COLUMN IF NOT EXISTS {spec}"

    def ddl(self, existing: dict[str, set[str]]) -> list[str]:
        """Statements that bring a database with ``existing`` {table: columns} to this catalog
        (tables and columns are only ever added, as SQLite migrations do)."""
        out: list[str] = []
        for t in self.tables.values():
            if t.name not in existing:
                out += self.create_table(t)
            else:
                out += [self.add_column(t, c) for c in t.columns if c not in existing[t.name]]
            out += t.indexes
        return out


__all__ = ["Catalog", "LOCAL_TABLES", "Table", "pg_type"]
