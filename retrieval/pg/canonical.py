"""A canonical write: the store's transaction, executed in PostgreSQL, decided under one lock.

``SQLiteStore.transaction()`` hands the write paths a :class:`PgConn` instead of the SQLite
writer connection when PostgreSQL is canonical. The same code (records, tags, FTS rows,
embeddings, change log, idempotency claims, limits, revision checks, graph rows, cursors, file
table) then runs against PostgreSQL:

1. ``BEGIN`` + ``pg_advisory_xact_lock(LOCK_KEY)``: canonical writes are serial cluster-wide,
   exactly as SQLite's ``BEGIN IMMEDIATE`` makes them serial per store. Counts taken for the
   limits, the revision read by an ``expectedRevision`` check, an idempotency key's presence
   and an entity name's uniqueness are all read after every earlier write committed and
   before any later one starts.
2. Each statement is translated (:mod:`.dialect`) and returns its row images, which are kept
   in order with the node-local statements (vector outbox) that PostgreSQL does not run.
   Rowid-alias keys (``records.rowid``, ``changes.seq``, graph ids) are allocated here under
   the lock, so every replica receives explicit values and ``changes.seq`` is commit order.
3. The entries become one ``pm_log`` row whose ``seq`` (also allocated under the lock) is the
   commit order; ``NOTIFY pattern_log, '<seq> <node>'`` wakes the other nodes; ``COMMIT``.
4. The writer applies the log up to its own seq to its replica before returning
   (read-your-writes), then the engine pushes the outbox to Chroma as before.

If the connection breaks during ``COMMIT``, the outcome is resolved, not guessed: once the
database answers again, the writer takes the lock (so the old transaction has finished) and
looks for its own log seq.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

from ..errors import StoreUnavailable
from . import log
from .dialect import Statement
from .node import ClusterNode

logger = logging.getLogger(__name__)

LOCK_KEY = 0x70617474  # "patt": the one advisory lock that serializes canonical writes
COMMIT_RESOLVE_S = 30.0


class Row(tuple):
    """A result row readable by position and by column name, like ``sqlite3.Row``."""

    _names: dict[str, int]

    def __new__(cls, values, names: dict[str, int]):
        row = super().__new__(cls, values)
        row._names = names
        return row

    def __getitem__(self, key):  # type: ignore[override]
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def _value(v: Any) -> Any:
    if isinstance(v, Decimal):  # sum()/avg() of integers
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, memoryview):
        return bytes(v)
    return v


def _param(v: Any) -> Any:
    if isinstance(v, bool):  # SQLite stores booleans as integers
        return int(v)
    return v


class Cursor:
    """What ``PgConn.execute`` returns: the sqlite3 cursor surface the write paths use."""

    def __init__(self, rows: list[Row], rowcount: int = -1, lastrowid: int | None = None):
        self._rows = rows
        self._i = 0
        self.rowcount = rowcount
        self.lastrowid = lastrowid

    def fetchone(self) -> Row | None:
        if self._i >= len(self._rows):
            return None
        self._i += 1
        return self._rows[self._i - 1]

    def fetchmany(self, n: int = 1) -> list[Row]:
        out = self._rows[self._i : self._i + n]
        self._i += len(out)
        return out

    def fetchall(self) -> list[Row]:
        out = self._rows[self._i :]
        self._i = len(self._rows)
        return out

    def __iter__(self) -> Iterator[Row]:
        return iter(self.fetchall())


def _rows(cur) -> list[Row]:
    if cur.description is None:
        return []
    names = {d.name: i for i, d in enumerate(cur.description)}
    return [Row([_value(v) for v in r], names) for r in cur.fetchall()]


class PgConn:
    """One canonical transaction's connection (see the module docstring)."""

    in_transaction = True

    def __init__(self, cluster: ClusterNode, pg) -> None:
        self.cluster = cluster
        self.pg = pg
        self.entries: list[list] = []
        self._next: dict[str, int] = {}  # table -> next key to allocate
        self._top: dict[str, int] = {}  # autoincrement table -> highest key inserted

    # ------------------------------------------------------------------ keys
    def _allocate(self, table: str, n: int) -> list[int]:
        """Keys for ``n`` new rows (the counters were read with the lock, see BEGIN)."""
        first = self._next[table]
        self._next[table] = first + n
        return list(range(first, first + n))

    # ------------------------------------------------------------------ statements
    def execute(self, sql: str, params: Sequence | None = ()) -> Cursor:
        st = self.cluster.dialect.statement(sql)
        params = [_param(p) for p in (params or ())]
        if st.local:
            self.entries.append(["s", sql, params])
            return Cursor([], 0)
        return self._run(st, [params])

    def executemany(self, sql: str, seq: Sequence[Sequence]) -> Cursor:
        st = self.cluster.dialect.statement(sql)
        many = [[_param(p) for p in ps] for ps in seq]
        if not many:
            return Cursor([], 0)
        if st.local:
            self.entries.append(["m", sql, many])
            return Cursor([], 0)
        return self._run(st, many)

    def _run(self, st: Statement, many: list[list]) -> Cursor:
        lastrowid = None
        if st.inject_pk:
            ids = self._allocate(st.table, len(many))
            many = [[k, *ps] for k, ps in zip(ids, many, strict=True)]
            lastrowid = ids[-1]
        try:
            with self.pg.cursor() as cur:
                if len(many) == 1:
                    cur.execute(st.pg, many[0])
                    rows = _rows(cur)
                else:
                    cur.executemany(st.pg, many, returning=st.verb != "select")
                    rows = []
                    while True:
                        rows += _rows(cur)
                        if not cur.nextset():
                            break
        except Exception as exc:
            raise self.cluster.translate_error(exc) from exc
        if st.verb == "select":
            return Cursor(rows)
        if rows:
            cols = rows[0].keys()
            if st.verb == "delete":
                self.entries.append(["d", st.table, cols, [list(r) for r in rows]])
            else:
                self.entries.append(["r", st.table, cols, [list(r) for r in rows]])
                t = self.cluster.catalog.tables[st.table]
                if t.autoincrement:
                    i = cols.index(t.auto_pk)
                    self._top[st.table] = max(self._top.get(st.table, 0), *(r[i] for r in rows))
        return Cursor([], len(rows), lastrowid)

    # ------------------------------------------------------------------ commit
    def finish(self) -> int | None:
        """Inside the transaction: key counters, the log row and the wake-up (one statement);
        the log row's seq."""
        if not self.entries:
            return None
        params: list = []
        counters = ""
        if self._top:
            counters = (
                "q AS (INSERT INTO sqlite_sequence(name, seq) VALUES "
                + ", ".join("(%s, %s)" for _ in self._top)
                + " ON CONFLICT (name) DO UPDATE SET seq = "
                "GREATEST(sqlite_sequence.seq, EXCLUDED.seq)), "
            )
            for table, top in self._top.items():
                params += [table, top]
        params += [self.cluster.node_id, log.encode(self.entries), self.cluster.node_id]
        seq = self.pg.execute(
            f"WITH {counters}s AS (INSERT INTO pm_log(seq, origin, entries) "
            "VALUES (nextval('pm_log_seq'), %s, %s) RETURNING seq) "
            "SELECT seq, pg_notify('pattern_log', seq::text || ' ' || %s) FROM s",
            params,
        ).fetchone()[0]
        return int(seq)


class Canonical:
    """``store.transaction()`` in PostgreSQL mode (attached to the store as ``canonical``)."""

    def __init__(self, cluster: ClusterNode) -> None:
        self.cluster = cluster
        self._local = threading.local()
        self.held_ms: deque[float] = deque(maxlen=2000)  # the serial section of recent writes
        # BEGIN, the lock, then (one round trip) every allocated key's counter and the log's
        # head: nobody else can move them until COMMIT
        self._auto = [t for t in cluster.catalog.tables.values() if t.auto_pk]
        parts = []
        for t in self._auto:
            q = f'(SELECT coalesce(max("{t.auto_pk}"), 0) FROM "{t.name}")'
            if t.autoincrement:
                q = (f"GREATEST({q}, coalesce((SELECT seq FROM sqlite_sequence "
                     f"WHERE name = '{t.name}'), 0))")  # fmt: skip
            parts.append(q)
        parts.append("(SELECT coalesce(max(seq), 0) FROM pm_log)")
        self._begin = f"BEGIN; SELECT pg_advisory_xact_lock({LOCK_KEY}); SELECT {', '.join(parts)}"

    def _start(self) -> tuple:
        cluster = self.cluster
        for attempt in range(2):
            pg = cluster.getconn()
            try:
                cur = pg.execute(self._begin)
                while cur.nextset():  # BEGIN; the lock; the counters
                    pass
                return pg, cur.fetchone()
            except Exception as exc:
                cluster.putconn(pg, broken=True)
                if attempt:
                    raise cluster.translate_error(exc) from exc
                cluster.pool.check()  # the database restarted: drop the dead connections
        raise AssertionError("unreachable")  # pragma: no cover

    @contextmanager
    def transaction(self) -> Iterator[PgConn]:
        current = getattr(self._local, "tx", None)
        if current is not None:  # nested: join the outer transaction
            yield current
            return
        cluster = self.cluster
        pg, counters = self._start()
        locked_at = time.perf_counter()
        tx = PgConn(cluster, pg)
        tx._next = {t.name: int(v) + 1 for t, v in zip(self._auto, counters, strict=False)}
        log_head = int(counters[-1])
        self._local.tx = tx
        seq = None
        try:
            yield tx
            seq = tx.finish()
        except BaseException:
            self._local.tx = None
            cluster.putconn(pg, rollback=True)
            cluster.replica.catch_up_quietly()  # a retry (stale read) must see what won
            raise
        self._local.tx = None
        try:
            pg.execute("COMMIT")
            self.held_ms.append((time.perf_counter() - locked_at) * 1000)
        except Exception as exc:
            cluster.putconn(pg, broken=True)
            if seq is None or not self._committed(seq):
                raise StoreUnavailable(
                    f"PostgreSQL failed during COMMIT and the write was not stored: {exc}"
                ) from exc
            cluster.replica.catch_up(through=seq, own=(seq, tx.entries))
            return
        try:
            if seq is not None:  # read-your-writes: the replica applies up to our seq
                cluster.replica.catch_up(
                    through=seq, own=(seq, tx.entries), pg=pg, known_head=log_head
                )
        except Exception as exc:  # committed: durable whatever the replica does; the
            # follower retries and pattern_health reports it
            cluster.replica.last_error = f"{type(exc).__name__}: {exc}"
            logger.warning("write %s committed; applying it to this replica failed: %s", seq, exc)
        finally:
            cluster.putconn(pg)

    def _committed(self, seq: int) -> bool:
        """After a broken COMMIT: wait for the database, let the old transaction end (take the
        lock), then look for the log row."""
        deadline = time.monotonic() + COMMIT_RESOLVE_S
        while True:
            try:
                with self.cluster.connect() as pg:
                    pg.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
                    found = pg.execute("SELECT 1 FROM pm_log WHERE seq = %s", (seq,)).fetchone()
                    horizon = self.cluster.horizon(pg)
                    return found is not None or seq <= horizon
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)


def sqlite_error(exc: Exception) -> Exception:
    """psycopg's integrity errors as sqlite3's, so callers keep one except clause."""
    import psycopg

    if isinstance(exc, psycopg.errors.IntegrityError):
        return sqlite3.IntegrityError(str(exc))
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return StoreUnavailable(f"PostgreSQL is unavailable: {exc}")
    return exc


__all__ = ["Canonical", "LOCK_KEY", "PgConn", "Row", "sqlite_error"]
