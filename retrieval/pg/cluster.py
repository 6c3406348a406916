"""One node of a PostgreSQL cluster: the connection pool, the canonical schema, the log.

``Engine(home, store_url="postgresql://…")`` builds a :class:`Cluster` around the folder's
SQLite store: PostgreSQL becomes canonical (``store.transaction()`` runs there, see
:mod:`.canonical`) and the SQLite store becomes this node's replica (:mod:`.replica`), from
which every read is served. PostgreSQL holds:

- every canonical table of the SQLite schema (:mod:`.catalog`), plus ``sqlite_sequence`` (the
  highest key of each AUTOINCREMENT table, so ``changes``' head survives compaction);
- ``pm_log`` (the replication log) with its sequence ``pm_log_seq``;
- ``pm_cluster``: the cluster id, the schema version, the log's compaction horizon;
- ``pm_tokens``: the daemons' bearer tokens (shared by every node; :mod:`.tokens`).

Joining: an empty folder joins by copying a snapshot. A folder that already holds a
standalone store seeds a new (empty) database with its rows and becomes its first node; it is
refused by a database that already has a cluster (its rows would be lost either way).
"""

from __future__ import annotations

import logging
import os
import re
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from retrieval.storage.schema import MIGRATIONS

from ..errors import StoreUnavailable
from . import polling
from .canonical import LOCK_KEY, Canonical, PgConn, sqlite_error
from .catalog import Catalog
from .dialect import Dialect
from .replica import Replica

logger = logging.getLogger(__name__)

POOL_MAX = int(os.environ.get("PATTERN_PG_POOL", "8"))
BATCH_BYTES = 64 * 2**20  # log entries read per catch-up batch (compressed size)
POOL_TIMEOUT_S = float(os.environ.get("PATTERN_PG_TIMEOUT", "15"))
# psycopg_pool doubles the delay between reconnection attempts until it gives up; a short
# give-up bound keeps that delay small, so writes resume seconds after the server is back
# (the next request starts a fresh attempt) instead of after the next doubled wait.
POOL_RECONNECT_S = 8.0

BASE_DDL = [
    "CREATE TABLE IF NOT EXISTS pm_cluster(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE SEQUENCE IF NOT EXISTS pm_log_seq",
    "CREATE TABLE IF NOT EXISTS pm_log(seq BIGINT PRIMARY KEY, origin TEXT NOT NULL, "
    "entries BYTEA NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT now())",
    "CREATE TABLE IF NOT EXISTS sqlite_sequence(name TEXT PRIMARY KEY, seq BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS pm_tokens(hash TEXT PRIMARY KEY, entry TEXT NOT NULL)",
]


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


class Cluster:
    def __init__(self, url: str, store, *, node_id: str | None = None) -> None:
        try:
            import psycopg  # noqa: F401  (PostgreSQL mode only: SQLite never imports it)
            from psycopg_pool import ConnectionPool
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise StoreUnavailable(
                "PATTERN_STORE_URL needs psycopg 3 and psycopg-pool: pip install "
                "'pattern-memory[postgres]'"
            ) from exc
        self.url = url
        self.store = store
        self.catalog = Catalog()
        self.dialect = Dialect(self.catalog)
        self.node_id = node_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.cluster_id = ""
        poll_s = polling.poll_seconds()  # a bad PATTERN_PG_POLL_MS fails before a connection
        self.pool = ConnectionPool(
            url, min_size=1, max_size=POOL_MAX, timeout=POOL_TIMEOUT_S, open=False,
            reconnect_timeout=POOL_RECONNECT_S,
            kwargs={"autocommit": True},  # transactions are explicit (BEGIN … COMMIT)
            name="pattern-memory",
        )  # fmt: skip
        try:
            self.pool.open(wait=True, timeout=POOL_TIMEOUT_S)
        except Exception as exc:
            self.pool.close()
            raise StoreUnavailable(f"cannot reach PostgreSQL at {redact(url)}: {exc}") from exc
        self.canonical = Canonical(self)
        self.replica = Replica(self, poll_s)
        try:
            self._join()
        except BaseException:
            self.pool.close()
            raise
        store.canonical = self.canonical
        store.cluster = self

    # ------------------------------------------------------------------ connections
    def connect(self, autocommit: bool = False):
        import psycopg

        return psycopg.connect(self.url, autocommit=autocommit, connect_timeout=10)

    def getconn(self):
        try:
            return self.pool.getconn()
        except Exception as exc:
            raise StoreUnavailable(
                f"PostgreSQL is unavailable ({redact(self.url)}): {exc}; nothing was written"
            ) from exc

    def putconn(self, pg, *, rollback: bool = False, broken: bool = False) -> None:
        if rollback and not broken:
            try:
                pg.execute("ROLLBACK")
            except Exception:
                broken = True
        if broken:
            try:
                pg.close()
            except Exception:  # pragma: no cover
                pass
        try:
            self.pool.putconn(pg)
        except Exception:  # pragma: no cover - the pool is closing
            pass

    @staticmethod
    def translate_error(exc: Exception) -> Exception:
        return sqlite_error(exc)

    @contextmanager
    def locked(self) -> Iterator:
        """A PostgreSQL transaction holding the write lock (schema, compaction, tokens)."""
        pg = self.getconn()
        try:
            pg.execute(f"BEGIN; SELECT pg_advisory_xact_lock({LOCK_KEY})")
            yield pg
            pg.execute("COMMIT")
        except BaseException:
            self.putconn(pg, rollback=True)
            raise
        self.putconn(pg)

    # ------------------------------------------------------------------ schema and joining
    def _existing(self, pg) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for table, col in pg.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema()"
        ).fetchall():
            out.setdefault(table, set()).add(col)
        return out

    def _join(self) -> None:
        local_rows = self._local_rows()
        with self.locked() as pg:
            for stmt in BASE_DDL:
                pg.execute(stmt)
            meta = dict(pg.execute("SELECT key, value FROM pm_cluster").fetchall())
            found = int(meta.get("schema", 0))
            if found > self.catalog.version:
                raise StoreUnavailable(
                    f"the PostgreSQL store is at schema v{found}, newer than this "
                    f"pattern-memory (v{self.catalog.version}); upgrade this node",
                    found=found,
                    supported=self.catalog.version,
                )
            for stmt in self.catalog.ddl(self._existing(pg)):
                if stmt.upper().startswith("CREATE INDEX") or stmt.upper().startswith(
                    "CREATE UNIQUE INDEX"
                ):
                    self._index(pg, stmt)
                else:
                    pg.execute(stmt)
            if meta.get("id") and found < self.catalog.version:
                self._migrate_rows(pg, found)
            self._set(pg, "schema", str(self.catalog.version))
            self.cluster_id = meta.get("id") or ""
            mine = self.replica.cluster_id
            if not self.cluster_id:
                self.cluster_id = uuid.uuid4().hex
                self._set(pg, "id", self.cluster_id)
                self._set(pg, "horizon", "0")
                if local_rows:
                    self._seed(pg)
                self._adopt(0)
            elif mine != self.cluster_id and local_rows:
                raise StoreUnavailable(
                    f"{self.store.path} holds a store that is not a replica of the cluster at "
                    f"{redact(self.url)}; use an empty folder for a new node (or export and "
                    "import its memories)",
                    path=self.store.path,
                )

    def _migrate_rows(self, pg, found: int) -> None:
        """The data steps (``UPDATE`` / ``DELETE``) of the migrations after v``found``, run in
        PostgreSQL as one logged write: each node's SQLite runs them on its own replica when it
        opens, but a node that joins later copies PostgreSQL's rows, and every node must rank
        from the same rows (a link turned into a candidate pair stays one everywhere)."""
        steps = [
            sql
            for version in range(found, self.catalog.version)
            for sql in MIGRATIONS[version]
            if re.match(r"\s*(UPDATE|DELETE)\b", sql, re.I)
        ]
        if not steps:
            return
        tx = PgConn(self, pg)
        for sql in steps:
            tx.execute(sql)
        seq = tx.finish()
        logger.info("schema v%d -> v%d: %d data steps (log seq %s)", found,
                    self.catalog.version, len(steps), seq)  # fmt: skip

    @staticmethod
    def _index(pg, stmt: str) -> None:
        """An index of the SQLite schema, if PostgreSQL can build it. Indexes only speed up
        the reads inside write transactions; one on a SQLite expression (``json_extract``…)
        is left out rather than failing the join."""
        pg.execute("SAVEPOINT pm_index")
        try:
            pg.execute(stmt)
        except Exception as exc:
            pg.execute("ROLLBACK TO SAVEPOINT pm_index")
            logger.info("index not built in PostgreSQL (%s): %s", exc, stmt)
        pg.execute("RELEASE SAVEPOINT pm_index")

    def _local_rows(self) -> bool:
        r = self.store.reader
        return any(
            r.execute(f'SELECT 1 FROM "{t}" LIMIT 1').fetchone() for t in self.catalog.tables
        )

    def _seed(self, pg) -> None:
        """The first node's standalone rows become the canonical ones."""
        r = self.store.reader
        for t in self.catalog.tables.values():
            cols = ", ".join(f'"{c}"' for c in t.columns)
            sel = ", ".join(["rowid", *t.columns[1:]]) if t.fts else cols
            with pg.cursor() as cur:
                with cur.copy(f'COPY "{t.name}" ({cols}) FROM STDIN') as copy:
                    for row in r.execute(f'SELECT {sel} FROM "{t.name}"'):
                        copy.write_row(tuple(row))
        for name, top in r.execute("SELECT name, seq FROM sqlite_sequence").fetchall():
            pg.execute(
                "INSERT INTO sqlite_sequence(name, seq) VALUES (%s, %s) ON CONFLICT (name) "
                "DO UPDATE SET seq = EXCLUDED.seq",
                (name, top),
            )

    def _adopt(self, seq: int) -> None:
        with self.store.local_transaction() as conn:
            for key, value in (("seq", str(seq)), ("cluster", self.cluster_id)):
                conn.execute(
                    "INSERT OR REPLACE INTO replica_state(key, value) VALUES (?, ?)", (key, value)
                )

    @staticmethod
    def _set(pg, key: str, value: str) -> None:
        pg.execute(
            "INSERT INTO pm_cluster(key, value) VALUES (%s, %s) "
            "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            (key, value),
        )

    # ------------------------------------------------------------------ the log
    @staticmethod
    def horizon(pg) -> int:
        row = pg.execute("SELECT value FROM pm_cluster WHERE key = 'horizon'").fetchone()
        return int(row[0]) if row else 0

    def log_after(self, applied: int, n: int, upto: int | None, pg=None):
        """([(seq, entries)] after ``applied`` (at most ``n``, up to ``upto``), horizon, whether
        more rows wait). The
        rows are read before the horizon: if the horizon read is <= applied, no row after
        ``applied`` had been compacted when the rows were read."""
        from . import log

        own = pg is not None
        if pg is None:
            pg = self.getconn()
        try:
            q = "FROM pm_log WHERE seq > %s"
            params: list = [applied]
            if upto is not None:
                q += " AND seq <= %s"
                params.append(upto)
            # at most BATCH_BYTES per batch (a bulk ingest's row can hold megabytes)
            sizes = pg.execute(
                f"SELECT seq, pg_column_size(entries) {q} ORDER BY seq LIMIT %s", [*params, n]
            ).fetchall()
            rows, more = [], len(sizes) == n
            if sizes:
                total, cut = 0, sizes[0][0]
                for seq, size in sizes:
                    total += int(size or 0)
                    if total > BATCH_BYTES and seq != sizes[0][0]:
                        break
                    cut = seq
                more = more or cut != sizes[-1][0]
                rows = pg.execute(
                    f"SELECT seq, entries {q} AND seq <= %s ORDER BY seq", [*params, cut]
                ).fetchall()
            horizon = self.horizon(pg)  # autocommit: a later statement, see the docstring
        except BaseException:
            if not own:
                self.putconn(pg, rollback=True)
            raise
        if not own:
            self.putconn(pg)
        return [(int(s), log.decode(bytes(e))) for s, e in rows], horizon, more

    @contextmanager
    def snapshot(self) -> Iterator:
        """(connection, seq): one REPEATABLE READ transaction; its tables are exactly the
        result of the log up to seq."""
        from psycopg import IsolationLevel

        with self.connect() as pg:
            pg.isolation_level = IsolationLevel.REPEATABLE_READ
            pg.read_only = True
            top = pg.execute("SELECT coalesce(max(seq), 0) FROM pm_log").fetchone()[0]
            seq = max(int(top), self.horizon(pg))
            yield pg, seq
            pg.commit()

    def head(self) -> int:
        pg = self.getconn()
        try:
            top = pg.execute("SELECT coalesce(max(seq), 0) FROM pm_log").fetchone()[0]
            seq = max(int(top), self.horizon(pg))
        finally:
            self.putconn(pg)
        return seq

    def compact_log(
        self, *, before_seq: int | None = None, older_than: timedelta | None = None
    ) -> int:
        """Delete log rows (seq < before_seq, or older than an age) and raise the horizon to the
        highest deleted seq; a replica behind it rebuilds from a snapshot. Returns the horizon."""
        with self.locked() as pg:
            old = self.horizon(pg)
            if older_than is not None:
                row = pg.execute(
                    "SELECT max(seq) FROM pm_log WHERE at < now() - %s", (older_than,)
                ).fetchone()
                upto = int(row[0] or 0)
            else:
                upto = int(before_seq or 0) - 1
            if upto > old:
                pg.execute("DELETE FROM pm_log WHERE seq <= %s", (upto,))
                self._set(pg, "horizon", str(upto))
            return max(old, upto)

    # ------------------------------------------------------------------ lifecycle
    def start(self, on_applied=None) -> None:
        """Catch up now, then follow the log in the background."""
        self.replica.on_applied = on_applied
        self.replica.catch_up()
        self.replica.start()

    def status(self) -> dict:
        """For ``pattern_health``: where this node's replica stands (lag = log rows behind)."""
        try:
            head = self.head()
        except Exception:
            head = None
        applied = self.replica.applied
        held = sorted(self.canonical.held_ms)

        def q(p: float) -> float | None:
            return round(held[min(len(held) - 1, int(p * len(held)))], 2) if held else None

        return {
            "lock_held_ms_p50": q(0.5),
            "lock_held_ms_p95": q(0.95),
            "head": head,
            "lag": None if head is None else max(0, head - applied),
            "backend": "postgresql",
            "url": redact(self.url),
            "node": self.node_id,
            "cluster": self.cluster_id,
            "applied_seq": applied,
            "rebuilds": self.replica.rebuilds,
            "follower_error": self.replica.last_error,
        }

    def close(self) -> None:
        """Leave the cluster: the follower stops and the replica refuses writes from now on
        (the engine drains its background writers first)."""
        self.replica.stop()
        self.store.detached = "closed"
        self.store.canonical = None
        self.pool.close()


__all__ = ["Cluster", "redact"]
