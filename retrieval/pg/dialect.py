"""The project's SQLite-flavoured SQL, as PostgreSQL runs it: every dialect difference in one
place.

The write paths (store, engine, services, graph, ingest file table) keep writing SQLite SQL;
inside a canonical transaction each statement is parsed once (cached) into a
:class:`Statement` that knows its verb and target table and carries its PostgreSQL text:

- ``?`` placeholders become ``%s`` (a literal ``%`` is doubled), outside quoted strings;
- ``INSERT OR IGNORE`` becomes ``ON CONFLICT DO NOTHING``; ``INSERT OR REPLACE`` an upsert on
  the primary key that sets every other column (those not listed to their default), which is
  what SQLite's delete-and-insert leaves for a row keyed by its primary key;
- ``a IS ?`` / ``a IS NOT ?`` become ``IS [NOT] DISTINCT FROM``;
- column names that PostgreSQL reserves (``window``) are quoted;
- data-changing statements get ``RETURNING`` (every column for inserts and updates, the key for
  deletes): those rows are the replication log's row images (:mod:`.canonical`).

Anything the translation does not understand is refused with a clear error instead of being
run differently on the two databases.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .catalog import Catalog

# PostgreSQL's reserved key words that the schema uses as column names (pg_get_keywords(),
# catcode 'R'); quoted wherever they appear as a bare word
RESERVED = frozenset({"window", "offset", "limit", "order", "user", "table", "column", "default"})

_VERB = re.compile(r"\s*(INSERT|REPLACE|UPDATE|DELETE|SELECT|WITH)\b", re.I)
_INSERT = re.compile(
    r"\s*(?:INSERT(?:\s+OR\s+(?P<conflict>IGNORE|REPLACE))?|(?P<replace>REPLACE))\s+INTO\s+"
    r"(?P<table>\w+)\s*\((?P<cols>[^)]*)\)\s*(?P<rest>.*)$",
    re.I | re.S,
)
_UPDATE = re.compile(
    r"\s*UPDATE\s+(?:OR\s+\w+\s+)?(?P<table>\w+)\s+SET\s+(?P<set>.*)$", re.I | re.S
)
_DELETE = re.compile(r"\s*DELETE\s+FROM\s+(?P<table>\w+)\b", re.I)


class UnsupportedSQL(Exception):
    """A statement the PostgreSQL translation does not handle (a programming error)."""


@dataclass(frozen=True)
class Statement:
    verb: str  # insert | update | delete | select
    table: str | None
    local: bool  # touches only a node-local table: logged, not run in PostgreSQL
    pg: str | None  # PostgreSQL text (None for local statements)
    inject_pk: str | None = None  # insert: the allocated key column to prepend


def _split_strings(sql: str) -> list[tuple[bool, str]]:
    """[(is_quoted, text)] — single-quoted literals and double-quoted names kept intact."""
    out: list[tuple[bool, str]] = []
    i, start, n = 0, 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in ("'", '"'):
            if start < i:
                out.append((False, sql[start:i]))
            j = i + 1
            while j < n:
                if sql[j] == ch:
                    if j + 1 < n and sql[j + 1] == ch:
                        j += 2
                        continue
                    break
                j += 1
            out.append((True, sql[i : j + 1]))
            i = start = j + 1
            continue
        i += 1
    if start < n:
        out.append((False, sql[start:]))
    return out


def _plain(text: str, reserved: frozenset[str]) -> str:
    text = text.replace("%", "%%").replace("?", "%s")
    text = re.sub(r"\bIS\s+NOT\s+%s", "IS DISTINCT FROM %s", text, flags=re.I)
    text = re.sub(r"\bIS\s+%s", "IS NOT DISTINCT FROM %s", text, flags=re.I)
    if reserved:
        text = re.sub(
            r"(?<![\w\"])(" + "|".join(sorted(reserved)) + r")\b(?!\s*\()",
            lambda m: f'"{m.group(1)}"',
            text,
        )
    return text


def to_pg(sql: str, reserved: frozenset[str] = frozenset()) -> str:
    """Placeholders, null-safe comparisons and reserved column names, outside literals."""
    return "".join(t if quoted else _plain(t, reserved) for quoted, t in _split_strings(sql))


class Dialect:
    """Translates statements for one :class:`Catalog` (cached per SQL text)."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        used = {c.lower() for t in catalog.tables.values() for c in t.columns}
        self.reserved = frozenset(w for w in RESERVED if w in used)
        self._cache: dict[str, Statement] = {}

    def statement(self, sql: str) -> Statement:
        found = self._cache.get(sql)
        if found is None:
            found = self._translate(sql)
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[sql] = found
        return found

    def _table(self, name: str, sql: str):
        if name in self.catalog.local:
            return None
        t = self.catalog.tables.get(name)
        if t is None:
            raise UnsupportedSQL(f"no canonical table {name!r} in: {sql.strip()[:200]}")
        return t

    def _parsed(self, pattern: re.Pattern[str], sql: str):
        """(``pattern``'s match of ``sql``, the table it names: None for a node-local one)."""
        m = pattern.match(sql)
        if m is None:
            raise UnsupportedSQL(f"cannot parse: {sql[:200]}")
        return m, self._table(m.group("table"), sql)

    def _translate(self, sql: str) -> Statement:
        m = _VERB.match(sql)
        if m is None:
            raise UnsupportedSQL(f"not a data statement: {sql.strip()[:200]}")
        verb = m.group(1).upper()
        if verb in ("SELECT", "WITH"):
            for name in self.catalog.local:
                if re.search(rf"\b{name}\b", sql):
                    raise UnsupportedSQL(f"a write transaction cannot read node-local {name}")
            return Statement("select", None, False, to_pg(sql, self.reserved))
        if re.search(r"\bRETURNING\b", sql, re.I):
            raise UnsupportedSQL(f"RETURNING is added by the log, not the caller: {sql[:200]}")
        if verb in ("INSERT", "REPLACE"):
            return self._insert(sql)
        if verb == "UPDATE":
            u, t = self._parsed(_UPDATE, sql)
            if t is None:
                return Statement("update", u.group("table"), True, None)
            sets = re.split(r"\bWHERE\b", u.group("set"), maxsplit=1, flags=re.I)[0]
            assigned = {a.lower() for a in re.findall(r"(\w+)\s*=", sets)}
            if any(p.lower() in assigned for p in t.pk):
                raise UnsupportedSQL(f"an UPDATE may not change the key of {t.name}: {sql[:200]}")
            return Statement("update", t.name, False, to_pg(sql, self.reserved) + " RETURNING *")
        d, t = self._parsed(_DELETE, sql)
        if t is None:
            return Statement("delete", d.group("table"), True, None)
        keys = ", ".join(f'"{c}"' for c in t.pk)
        return Statement("delete", t.name, False, to_pg(sql, self.reserved) + f" RETURNING {keys}")

    def _insert(self, sql: str) -> Statement:
        m, t = self._parsed(_INSERT, sql)
        if t is None:
            return Statement("insert", m.group("table"), True, None)
        conflict = (m.group("conflict") or ("REPLACE" if m.group("replace") else "")).upper()
        cols = [c.strip().strip('"') for c in m.group("cols").split(",")]
        rest = m.group("rest").strip()
        inject = None
        if t.auto_pk and t.auto_pk not in cols:
            if not re.match(r"VALUES\s*\((?:[^()]|\([^()]*\))*\)\s*$", rest, re.I | re.S):
                raise UnsupportedSQL(
                    f"an INSERT into {t.name} without its key must be one VALUES row: {sql[:200]}"
                )
            inject = t.auto_pk
            cols = [inject, *cols]
            rest = re.sub(r"^VALUES\s*\(", "VALUES (?, ", rest, flags=re.I)
        head = f'INSERT INTO "{t.name}" ({", ".join(chr(34) + c + chr(34) for c in cols)}) '
        body = to_pg(rest, self.reserved)
        if conflict == "IGNORE":
            body += " ON CONFLICT DO NOTHING"
        elif conflict == "REPLACE":
            sets = [f'"{c}" = EXCLUDED."{c}"' for c in cols if c not in t.pk]
            sets += [f'"{c}" = DEFAULT' for c in t.columns if c not in cols and c not in t.pk]
            keys = ", ".join(f'"{c}"' for c in t.pk)
            body += f" ON CONFLICT ({keys}) " + (
                f"DO UPDATE SET {', '.join(sets)}" if sets else "DO NOTHING"
            )
        return Statement("insert", t.name, False, head + body + " RETURNING *", inject)


__all__ = ["Dialect", "Statement", "UnsupportedSQL", "to_pg"]
