"""The canonical SQLite store (WAL): records, tags, FTS5 rows, embeddings, change log, outbox.

Every mutation is one transaction that writes the record, its FTS row, its tags, a change-log
row and a vector-outbox row; nothing is reported written before COMMIT.

Connections and locks (the store owns both; nothing outside this module touches them):

- **One writer connection, one write lock** (``_write_lock``). :meth:`SQLiteStore.transaction`
  takes the lock and ``BEGIN IMMEDIATE`` (which also excludes other processes), so the
  transaction is *the* coordination point of every write in the process: rule checks (limits,
  revisions, idempotency keys, graph name checks) run inside it and see every committed write.
  Nothing slow may run inside it: embedding happens before, Chroma after.
- **Reader connections from a bounded pool** (:class:`ReaderPool`). A thread borrows one on its
  first read and keeps it until it ends (WAL lets readers run beside the writer); the connection
  then goes back to the pool, which keeps at most ``PATTERN_SQLITE_READERS`` idle ones (their
  page caches stay warm for the next thread) and closes the rest. So short-lived worker threads
  (one per MCP tool call) no longer leave a connection each behind.
"""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from retrieval.errors import NotFound, StoreUnavailable, storage_error
from retrieval.fulltext.analyzer import identifier_parts
from retrieval.ranking import guard
from retrieval.records import Kind, Record, RecordFilter, Scope, parse_ts, ts, utcnow
from retrieval.storage import private
from retrieval.storage.buckets import bucket_token
from retrieval.storage.history import Forget, forget_dropped
from retrieval.storage.schema import migrate
from retrieval.timeline import links

# per-connection page cache and mmap window, in MiB (0 = SQLite's default / no mmap)
SQLITE_CACHE_MB = int(os.environ.get("PATTERN_SQLITE_CACHE_MB", "64"))
SQLITE_MMAP_MB = int(os.environ.get("PATTERN_SQLITE_MMAP_MB", "256"))
# idle reader connections kept for the next threads (each has its own page cache)
SQLITE_READERS = int(os.environ.get("PATTERN_SQLITE_READERS", "4"))
# versions of a memory kept as merge bases (record_revisions)
HISTORY_DEPTH = 64

COLUMNS = (
    "id, kind, project_id, agent_id, scope, bucket, category, content, context, metadata, "
    "priority, entity_name, created_at, updated_at, expires_at, revision, content_hash, "
    "embedding_model"
)


def _metadata(raw: str | None) -> dict:
    """A row's metadata: its JSON object, or {} for a column that holds anything else (a
    damaged or foreign row stays readable; only its metadata is lost to the reader)."""
    try:
        value = json.loads(raw or "{}")
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def readable(row: sqlite3.Row) -> Record | None:
    """The record of ``row``, or None when the row cannot be read as one (a kind or scope no
    version wrote, a date that is not one, a value missing or of another type): one bad row
    never fails a read; it is left out, and logged once an hour per error type
    (:func:`~retrieval.ranking.guard.dropped`), by id, never by its text."""
    try:
        return _row_to_record(row)
    except Exception as exc:  # noqa: BLE001 - any damage: the row is left out, the read answers
        rid = row["id"]
        guard.dropped("record row", exc, record=rid if isinstance(rid, str) else repr(rid)[:80])
        return None


def _row_to_record(row: sqlite3.Row) -> Record:
    return Record(
        id=row["id"],
        kind=Kind(row["kind"]),
        project_id=row["project_id"],
        agent_id=row["agent_id"],
        scope=Scope(row["scope"]),
        category=row["category"],
        content=row["content"],
        context=row["context"],
        metadata=_metadata(row["metadata"]),
        entity_name=row["entity_name"],
        created_at=parse_ts(row["created_at"]),
        updated_at=parse_ts(row["updated_at"]),
        expires_at=parse_ts(row["expires_at"]),
        revision=row["revision"],
        content_hash=row["content_hash"],
        embedding_model=row["embedding_model"],
    )


def where_clause(f: RecordFilter, alias: str = "r") -> tuple[str, list]:
    """SQL conditions for a filter; shared by the lexical retriever, the vector post-filter and
    plain listing, so all of them apply exactly the same rules."""
    conds: list[str] = []
    params: list = []

    def inlist(col: str, values: Sequence) -> None:
        conds.append(f"{alias}.{col} IN ({','.join('?' * len(values))})")
        params.extend(values)

    if f.buckets is not None:
        if not f.buckets:
            return "0", []
        inlist("bucket", f.buckets)
    if f.kinds:
        inlist("kind", [str(k) for k in f.kinds])
    if f.categories:
        inlist("category", f.categories)
    if f.exclude_categories:
        conds.append(f"{alias}.category NOT IN ({','.join('?' * len(f.exclude_categories))})")
        params.extend(f.exclude_categories)
    for tag in f.tags or []:
        conds.append(
            f"EXISTS (SELECT 1 FROM record_tags t WHERE t.tag = ? AND t.record_rowid = {alias}.rowid)"
        )
        params.append(tag)
    for col, op, value in (
        ("priority", ">=", f.min_priority),
        ("priority", "<=", f.max_priority),
        ("created_at", ">", ts(f.created_after)),
        ("created_at", "<", ts(f.created_before)),
        ("updated_at", ">", ts(f.updated_after)),
        ("updated_at", "<", ts(f.updated_before)),
    ):
        if value is not None:
            conds.append(f"{alias}.{col} {op} ?")
            params.append(value)
    if not f.include_expired:
        conds.append(f"({alias}.expires_at IS NULL OR {alias}.expires_at > ?)")
        params.append(ts(f.now or utcnow()))
    return (" AND ".join(conds) or "1"), params


class _Lease:
    """A reader connection lent to one thread, held in that thread's local storage: when the
    thread ends, its locals are dropped and the connection goes back to the pool."""

    __slots__ = ("conn", "pool")

    def __init__(self, conn: sqlite3.Connection, pool: ReaderPool) -> None:
        self.conn = conn
        self.pool = pool

    def __del__(self) -> None:
        try:
            self.pool.give_back(self.conn)
        except Exception:  # pragma: no cover - interpreter shutdown
            pass


class ReaderPool:
    """Reader connections: one per reading thread while it lives, at most ``idle_max`` kept
    idle between threads (the rest are closed). Thread-safe."""

    def __init__(self, connect, idle_max: int = SQLITE_READERS) -> None:
        self._connect = connect
        self.idle_max = max(0, idle_max)
        self._lock = threading.Lock()
        self._idle: list[sqlite3.Connection] = []
        self._open: set[sqlite3.Connection] = set()
        self._local = threading.local()
        self._closed = False

    def get(self) -> sqlite3.Connection:
        """This thread's reader connection (borrowed on its first read)."""
        if self._closed:
            raise StoreUnavailable("the store is closed")
        lease = getattr(self._local, "lease", None)
        if lease is None:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                conn = self._connect()
                with self._lock:
                    self._open.add(conn)
            lease = self._local.lease = _Lease(conn, self)
        return lease.conn

    def give_back(self, conn: sqlite3.Connection) -> None:
        with self._lock:
            if conn not in self._open:  # closed with the pool
                return
            if not self._closed and len(self._idle) < self.idle_max:
                self._idle.append(conn)
                return
            self._open.discard(conn)
        conn.close()

    @property
    def open_count(self) -> int:
        """Reader connections open now (lent to live threads or idle)."""
        with self._lock:
            return len(self._open)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns = list(self._open)
            self._open.clear()
            self._idle.clear()
        for conn in conns:
            try:
                conn.close()
            except sqlite3.Error:  # pragma: no cover
                pass


class SQLiteStore:
    """Owns one SQLite database file. Thread-safe: one writer connection behind the write
    lock, reader connections from a :class:`ReaderPool` (see the module docstring)."""

    def __init__(self, path: str | Path, *, readers: int = SQLITE_READERS) -> None:
        self.path = str(path)
        if self.path != ":memory:":  # private (retrieval/storage/private.py); SQLite gives its -wal
            private.folder(Path(self.path).parent)  # and -shm the file's own mode
            private.touch(self.path)
        self._write_lock = threading.RLock()
        self.write_failure: str | None = None  # the last write that failed on storage
        try:
            self._writer = self._connect()
            migrate(self._writer)
        except sqlite3.Error as exc:  # a read-only folder, a full disk, a damaged file
            failed = storage_error(exc, self.path, "the store cannot be opened")
            if failed is None:
                raise
            raise failed from exc
        self._readers = ReaderPool(self._connect, readers)
        self._stamp: sqlite3.Connection | None = None  # see data_version()
        self._stamp_lock = threading.Lock()

    def data_version(self) -> int:
        """A number that changes whenever anything commits to the file (any connection, any
        process) between two calls: SQLite's ``PRAGMA data_version`` on a connection of its own,
        which never writes. For copies of stored data kept in memory (the exact scan's matrix:
        retrieval/vector/exact_scan.py)."""
        with self._stamp_lock:
            if self._stamp is None:
                if self._readers._closed:
                    raise StoreUnavailable("the store is closed")
                self._stamp = self._connect()
            return int(self._stamp.execute("PRAGMA data_version").fetchone()[0])

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=30.0
            )
        except sqlite3.Error as exc:  # pragma: no cover - depends on the filesystem
            raise StoreUnavailable(f"cannot open store {self.path}: {exc}", path=self.path) from exc
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=30000")
        # Page cache per connection (SQLite's default is 2 MB) and memory-mapped reads of the
        # file's first PATTERN_SQLITE_MMAP_MB: a recall touches FTS doclists and ~100-300
        # record/embedding rows by id; with the defaults each page is a read() syscall into a
        # small cache. Every connection maps on its own and RSS counts each map: at 1M records
        # a 1 GB window put 1.3 GB of file pages in the daemon's RSS, and recall was no faster
        # than with 256 MB (docs/scale.md).
        if SQLITE_CACHE_MB > 0:
            conn.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_MB * 1024}")
        conn.execute(f"PRAGMA mmap_size={max(0, SQLITE_MMAP_MB) * 2**20}")
        return conn

    @property
    def reader(self) -> sqlite3.Connection:
        """This thread's reader connection (committed data only; see :class:`ReaderPool`)."""
        return self._readers.get()

    @property
    def open_readers(self) -> int:
        return self._readers.open_count

    def catch_up(self) -> None:
        """PostgreSQL mode: apply what the cluster committed so far (a no-op otherwise)."""
        if self.cluster is not None:
            self.cluster.replica.catch_up()

    def close(self) -> None:
        self._readers.close()
        with self._stamp_lock:
            if self._stamp is not None:
                self._stamp.close()
                self._stamp = None
        try:
            self._writer.close()
        except sqlite3.Error:  # pragma: no cover
            pass

    def checkpoint(self) -> None:
        with self._write_lock:
            self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def integrity_check(self) -> list[str]:
        """SQLite's integrity check plus records vs FTS rows. It reads every page, so it runs
        on a connection of its own without memory mapping, closed after: through the writer's
        mmap window the whole file stayed resident in the process (a daemon's RSS grew by the
        file's size at start, 57 MB at 10k memories; docs/benchmarks.md, "lean serving")."""
        own = self.path != ":memory:"
        conn = (
            sqlite3.connect(self.path, isolation_level=None, timeout=30.0) if own else self._writer
        )
        try:
            conn.execute("PRAGMA mmap_size=0")
            rows = conn.execute("PRAGMA integrity_check").fetchall()
            problems = [r[0] for r in rows if r[0] != "ok"]
            fts = conn.execute(
                "SELECT (SELECT count(*) FROM records) - (SELECT count(*) FROM records_fts)"
            ).fetchone()[0]
        finally:
            if own:
                conn.close()
        if fts:
            problems.append(f"records and FTS rows differ by {fts}")
        return problems

    def purge_text_index(self) -> None:
        """Merge the full-text index into one segment with SQLite's ``secure_delete`` on: FTS5
        keeps the tokens of a replaced or deleted text in its older segments until they merge,
        so a text redacted after the fact (a secret) is gone from the file only after this. It
        rewrites the whole index: a one-time step, not one for every write."""
        with self.local_transaction() as conn:
            before = int(conn.execute("PRAGMA secure_delete").fetchone()[0])
            conn.execute("PRAGMA secure_delete = ON")
            conn.execute("INSERT INTO records_fts(records_fts) VALUES('optimize')")
            conn.execute(f"PRAGMA secure_delete = {before}")

    # ------------------------------------------------------------------ transactions
    # PostgreSQL mode (retrieval/pg): set to the node's Canonical / Cluster, else None
    canonical = None
    cluster = None
    detached: str | None = None  # PostgreSQL mode, after the node left its cluster: why

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic unit of work on canonical state. SQLite alone: the writer connection
        (BEGIN IMMEDIATE … COMMIT). PostgreSQL mode: the same statements run in PostgreSQL
        under the cluster-wide write lock, and this store, the node's replica, has applied
        them when the block returns (retrieval/pg/canonical.py). A replica whose node has
        left its cluster refuses (``StoreUnavailable``): a write to it alone would never reach
        PostgreSQL nor the other nodes."""
        if self.canonical is not None:
            with self.canonical.transaction() as conn:
                yield conn
            return
        if self.detached is not None:
            raise StoreUnavailable(
                f"this node has left its PostgreSQL cluster ({self.detached}); nothing was written"
            )
        with self.local_transaction() as conn:
            yield conn

    def in_write(self) -> bool:
        """True when this thread holds the write lock (it is inside a transaction)."""
        return self._write_lock._is_owned()  # noqa: SLF001 - RLock's own test

    @contextmanager
    def local_transaction(self) -> Iterator[sqlite3.Connection]:
        """A transaction on this SQLite file only: node-local state (the vector outbox), and
        the replica applier. Without PostgreSQL it is :meth:`transaction`."""
        with self._write_lock:
            conn = self._writer
            if conn.in_transaction:  # nested: join the outer transaction
                yield conn
                return
            try:
                conn.execute("BEGIN IMMEDIATE")
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                if conn.in_transaction:  # SQLite rolls back by itself on a full disk
                    conn.execute("ROLLBACK")
                failed = (storage_error(exc, self.path, "nothing was written")
                          if isinstance(exc, sqlite3.Error) else None)  # fmt: skip
                if failed is None:
                    raise
                self.write_failure = failed.message
                raise failed from exc
            self.write_failure = None

    # ------------------------------------------------------------------ writes
    def _log(self, conn: sqlite3.Connection, rec: Record, op: str) -> None:
        now = ts(utcnow())
        conn.execute(
            "INSERT INTO changes(record_id, op, kind, bucket, revision, at) VALUES (?,?,?,?,?,?)",
            (rec.id, op, str(rec.kind), rec.bucket, rec.revision, now),
        )
        # outbox ops: insert (a new record: no vectors to clear first), upsert, delete
        conn.execute(
            "INSERT INTO vector_outbox(record_id, op, bucket) VALUES (?,?,?)",
            (rec.id, {"insert": "insert", "delete": "delete"}.get(op, "upsert"), rec.bucket),
        )
        if rec.kind is Kind.memory:
            self._history(conn, rec, op, now)

    def _history(self, conn: sqlite3.Connection, rec: Record, op: str, now: str) -> None:
        """A memory's recent versions (``record_revisions``): the base a stale update merges
        from (server/service/memories/merge.py). Kept from a memory's first update on (:meth:`replace`
        keeps the version it replaces, then this the new one), so a memory never updated costs
        nothing; the last :data:`HISTORY_DEPTH` are kept."""
        if op == "delete":
            conn.execute("DELETE FROM record_revisions WHERE record_id=?", (rec.id,))
            return
        if op == "insert":
            return
        conn.execute(
            "INSERT OR REPLACE INTO record_revisions(record_id, revision, content, metadata, "
            "category, parents, at) VALUES (?,?,?,?,?,?,?)",
            (rec.id, rec.revision, rec.content, json.dumps(rec.metadata, ensure_ascii=False),
             rec.category, None, now),
        )  # fmt: skip
        if rec.revision > HISTORY_DEPTH:
            conn.execute(
                "DELETE FROM record_revisions WHERE record_id=? AND revision<=?",
                (rec.id, rec.revision - HISTORY_DEPTH),
            )

    def log_change(
        self,
        conn: sqlite3.Connection,
        record_id: str,
        op: str,
        kind: str,
        bucket: str,
        revision: int,
    ) -> None:
        """A change-log row alone, no vector work: an event about a record whose own row did
        not change (``citations``: the status of its cited code changed)."""
        conn.execute(
            "INSERT INTO changes(record_id, op, kind, bucket, revision, at) VALUES (?,?,?,?,?,?)",
            (record_id, op, kind, bucket, revision, ts(utcnow())),
        )  # fmt: skip

    def _index(self, conn: sqlite3.Connection, rowid: int, rec: Record) -> None:
        self._index_many(conn, [(rowid, rec)])

    def _index_many(self, conn: sqlite3.Connection, items: list[tuple[int, Record]]) -> None:
        """The FTS rows and tags of (rowid, record) pairs."""
        rows = []
        for rowid, rec in items:
            terms = " ".join(filter(None, [identifier_parts(rec.content), " ".join(rec.tags),
                                           rec.entity_name or ""]))  # fmt: skip
            rows.append((rowid, rec.content, rec.context, terms, bucket_token(rec.bucket)))
        conn.executemany(
            "INSERT INTO records_fts(rowid, content, context, terms, bucket) VALUES (?,?,?,?,?)",
            rows,
        )
        conn.executemany(
            "INSERT OR IGNORE INTO record_tags(tag, record_rowid) VALUES (?,?)",
            [(t, rowid) for rowid, rec in items for t in rec.tags],
        )

    def _values(self, rec: Record) -> tuple:
        rec.content_hash = rec.current_hash()  # never trust a hash copied from an older version
        return (
            rec.id, str(rec.kind), rec.project_id, rec.agent_id, str(rec.scope), rec.bucket,
            rec.category, rec.content, rec.context, json.dumps(rec.metadata, ensure_ascii=False),
            rec.priority, rec.entity_name, ts(rec.created_at), ts(rec.updated_at),
            ts(rec.expires_at), rec.revision, rec.content_hash, rec.embedding_model,
        )  # fmt: skip

    def insert(self, conn: sqlite3.Connection, records: Iterable[Record]) -> list[int]:
        """Insert records (inside the caller's transaction); returns their rowids. A few
        statements per 500 records, not per record: with PostgreSQL each is a round trip."""
        recs = list(records)
        rowids: list[int] = []
        for i in range(0, len(recs), 500):
            part = recs[i : i + 500]
            conn.executemany(
                f"INSERT INTO records({COLUMNS}) VALUES ({','.join('?' * 18)})",
                [self._values(rec) for rec in part],
            )
            marks = ",".join("?" * len(part))
            found = conn.execute(
                f"SELECT id, rowid FROM records WHERE id IN ({marks})", [r.id for r in part]
            ).fetchall()
            rowid = {r[0]: int(r[1]) for r in found}
            keys = [rowid[rec.id] for rec in part]
            self._index_many(conn, list(zip(keys, part, strict=True)))
            now = ts(utcnow())
            conn.executemany(
                "INSERT INTO changes(record_id, op, kind, bucket, revision, at) "
                "VALUES (?,?,?,?,?,?)",
                [(r.id, "insert", str(r.kind), r.bucket, r.revision, now) for r in part],
            )
            conn.executemany(  # a new record has no vectors to clear first (see _log)
                "INSERT INTO vector_outbox(record_id, op, bucket) VALUES (?,?,?)",
                [(r.id, "insert", r.bucket) for r in part],
            )
            rowids += keys
        return rowids

    def replace(self, conn: sqlite3.Connection, rec: Record, forget: Forget | None = None) -> int:
        """Overwrite an existing record (same id), re-indexing it; keeps its rowid.

        Every replacement bumps the revision to the stored one + 1, whatever ``rec`` carries
        (an import or a stale copy can never move it back): expected-revision checks and
        change-stream consumers see each version exactly once. ``forget`` (the write policy's):
        what the replaced version of a memory held and ``rec`` does not (a secret) is redacted
        from its kept versions too (:mod:`.history`)."""
        row = conn.execute(
            "SELECT rowid, content_hash, bucket, revision, content, metadata FROM records "
            "WHERE id=?",
            (rec.id,),
        ).fetchone()
        if row is None:
            raise NotFound(f"record {rec.id} not found", id=rec.id)
        rowid = row["rowid"]
        rec.revision = row["revision"] + 1
        if rec.kind is Kind.memory:  # the version replaced, kept as a merge base (_history)
            conn.execute(
                "INSERT OR IGNORE INTO record_revisions(record_id, revision, content, metadata, "
                "category, at) SELECT id, revision, content, metadata, category, updated_at "
                "FROM records WHERE id=?",
                (rec.id,),
            )
        sets = ", ".join(f"{c.strip()}=?" for c in COLUMNS.split(","))
        conn.execute(f"UPDATE records SET {sets} WHERE rowid=?", (*self._values(rec), rowid))
        conn.execute("DELETE FROM records_fts WHERE rowid=?", (rowid,))
        conn.execute("DELETE FROM record_tags WHERE record_rowid=?", (rowid,))
        if row["content_hash"] != rec.content_hash:
            conn.execute("DELETE FROM embeddings WHERE record_rowid=?", (rowid,))
        self._index(conn, rowid, rec)
        if row["bucket"] != rec.bucket:  # moved (scope change): leave the old collection too
            conn.execute(
                "INSERT INTO vector_outbox(record_id, op, bucket) VALUES (?,?,?)",
                (rec.id, "delete", row["bucket"]),
            )
        self._log(conn, rec, "update")
        if forget is not None and rec.kind is Kind.memory:
            was = (row["content"], _metadata(row["metadata"]))  # damaged: read without it
            forget_dropped(conn, rec.id, was, (rec.content, rec.metadata), forget)
        return rowid

    def delete(self, conn: sqlite3.Connection, ids: Sequence[str]) -> list[Record]:
        """Delete records by id; returns the records that existed."""
        gone = []
        for rec_id in ids:
            row = conn.execute(
                f"SELECT rowid, {COLUMNS} FROM records WHERE id=?", (rec_id,)
            ).fetchone()
            if row is None:
                continue
            rec = readable(row)  # a row that cannot be read is deleted all the same
            rowid = row["rowid"]
            for table, col in (
                ("records_fts", "rowid"),
                ("record_tags", "record_rowid"),
                ("embeddings", "record_rowid"),
                ("records", "rowid"),
            ):
                conn.execute(f"DELETE FROM {table} WHERE {col}=?", (rowid,))
            conn.execute("DELETE FROM citations WHERE record_id=?", (rec_id,))
            links.forget(conn, rec_id)
            if rec is None:
                self._log_unreadable(conn, row)
                continue
            self._log(conn, rec, "delete")
            gone.append(rec)
        return gone

    def _log_unreadable(self, conn: sqlite3.Connection, row: sqlite3.Row) -> None:
        """The change-log and outbox rows of deleting a row that cannot be read as a record:
        its stored bucket, kind and revision as they are (a stream reader sees it go)."""
        revision = row["revision"] if isinstance(row["revision"], int) else 0
        self.log_change(conn, row["id"], "delete", str(row["kind"]), str(row["bucket"]), revision)
        conn.execute(
            "INSERT INTO vector_outbox(record_id, op, bucket) VALUES (?,?,?)",
            (row["id"], "delete", str(row["bucket"])),
        )

    def put_embeddings(
        self, conn: sqlite3.Connection, model_id: str, items: Iterable[tuple[str, str, np.ndarray]]
    ) -> None:
        """Store (record_id, content_hash, windows x dim matrix) for a model (the last item of
        a record wins). A few statements per 500 records, not per record: with PostgreSQL each
        statement is a round trip."""
        last = {rec_id: (chash, matrix) for rec_id, chash, matrix in items}
        ids = list(last)
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            marks = ",".join("?" * len(part))
            rows = conn.execute(
                f"SELECT id, rowid FROM records WHERE id IN ({marks})", part
            ).fetchall()
            rowid = {r[0]: r[1] for r in rows}
            keys = [rowid[r] for r in part if r in rowid]
            if not keys:
                continue
            marks = ",".join("?" * len(keys))
            conn.execute(
                f"DELETE FROM embeddings WHERE model_id=? AND record_rowid IN ({marks})",
                [model_id, *keys],
            )
            conn.executemany(
                "INSERT INTO embeddings(record_rowid, model_id, window, content_hash, vector) "
                "VALUES (?,?,?,?,?)",
                [
                    (rowid[r], model_id, w, last[r][0], np.asarray(v, dtype=np.float32).tobytes())
                    for r in part
                    if r in rowid
                    for w, v in enumerate(last[r][1])
                ],
            )
            conn.execute(
                f"UPDATE records SET embedding_model=? WHERE rowid IN ({marks})", [model_id, *keys]
            )

    # ------------------------------------------------------------------ reads
    def get(self, ids: Sequence[str]) -> dict[str, Record]:
        out: dict[str, Record] = {}
        ids = list(ids)
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            rows = self.reader.execute(
                f"SELECT {COLUMNS} FROM records WHERE id IN ({','.join('?' * len(part))})", part
            ).fetchall()
            out.update((rec.id, rec) for r in rows if (rec := readable(r)) is not None)
        return self._marked(out)

    def _marked(self, records: dict[str, Record]) -> dict[str, Record]:
        """``records`` with ``updated_by`` set where a newer record updates them."""
        if records:
            found = guard.guarded("update links", links.updaters, self.reader, list(records),
                                  default={})  # fmt: skip
            for rid, by in found.items():
                if rid in records:
                    records[rid].updated_by = by
        return records

    def get_one(self, rec_id: str) -> Record:
        found = self.get([rec_id])
        if rec_id not in found:
            raise NotFound(f"record {rec_id} not found", id=rec_id)
        return found[rec_id]

    def list(
        self,
        f: RecordFilter,
        *,
        order: str = "r.updated_at DESC",
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Record]:
        where, params = where_clause(f)
        sql = f"SELECT {', '.join('r.' + c.strip() for c in COLUMNS.split(','))} FROM records r WHERE {where} ORDER BY {order}"
        if limit is not None:
            sql += " LIMIT ? OFFSET ?"
            params = [*params, limit, offset]
        rows = self.reader.execute(sql, params).fetchall()
        found = [rec for r in rows if (rec := readable(r)) is not None]
        return list(self._marked({r.id: r for r in found}).values()) if found else found

    def filter_ids(self, f: RecordFilter, ids: Sequence[str]) -> list[str]:
        """The subset of ``ids`` that satisfies ``f`` (the vector retriever's post-filter)."""
        if not ids:
            return []
        where, params = where_clause(f)
        keep: set[str] = set()
        ids = list(ids)
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            # CROSS JOIN pins the loop order: look each id up by its unique index. Without it,
            # and without ANALYZE statistics, SQLite preferred the records_bucket index for
            # "bucket IN (4 buckets)" and scanned every visible record (74 ms at 100k records
            # instead of < 1 ms; docs/benchmarks.md "Scale").
            rows = self.reader.execute(
                f"SELECT r.id FROM json_each(?) AS v CROSS JOIN records r ON r.id = v.value "
                f"WHERE {where}",
                [json.dumps(part), *params],
            ).fetchall()
            keep.update(r[0] for r in rows)
        return [i for i in ids if i in keep]

    def count(self, f: RecordFilter, group_by: str | None = None) -> dict[str, int] | int:
        where, params = where_clause(f)
        if group_by is None:
            return self.reader.execute(
                f"SELECT count(*) FROM records r WHERE {where}", params
            ).fetchone()[0]
        rows = self.reader.execute(
            f"SELECT r.{group_by}, count(*) FROM records r WHERE {where} GROUP BY r.{group_by}",
            params,
        ).fetchall()
        return {r[0]: r[1] for r in rows}

    def versions(self, ids: Sequence[str]) -> dict[str, tuple[int, str, str]]:
        """(revision, bucket, content hash) per existing record: enough to tell whether a copy
        held in memory is the stored version (no JSON, timestamps or models built)."""
        out: dict[str, tuple[int, str, str]] = {}
        ids = list(ids)
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            rows = self.reader.execute(
                "SELECT id, revision, bucket, content_hash FROM records "
                f"WHERE id IN ({','.join('?' * len(part))})",
                part,
            ).fetchall()
            out.update((r[0], (r[1], r[2], r[3])) for r in rows)
        return out

    def embeddings(self, ids: Sequence[str], model_id: str) -> dict[str, np.ndarray]:
        """Stored vectors (windows x dim) per record id for a model, where current. A record's
        windows are read as one buffer (a search rescores hundreds of records: one array per
        window, stacked, cost more than the query)."""
        out: dict[str, np.ndarray] = {}
        ids = list(ids)
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            rows = self.reader.execute(
                "SELECT r.id, e.vector FROM records r JOIN embeddings e ON e.record_rowid = r.rowid "
                f"AND e.model_id = ? AND e.content_hash = r.content_hash "
                f"WHERE r.id IN ({','.join('?' * len(part))}) ORDER BY r.id, e.window",
                [model_id, *part],
            ).fetchall()
            for rid, group in itertools.groupby(rows, key=lambda row: row[0]):
                blobs = [blob for _, blob in group]
                size = len(blobs[0]) if isinstance(blobs[0], bytes) else 0
                if (
                    not size
                    or size % 4
                    or any(not isinstance(b, bytes) or len(b) != size for b in blobs)
                ):
                    continue  # a damaged vector row: the record has no vector (never fails a read)
                out[rid] = np.frombuffer(bytearray(b"".join(blobs)), dtype=np.float32).reshape(
                    len(blobs), -1
                )
        return out

    # ------------------------------------------------------------------ outbox
    def outbox(self, limit: int = 1000) -> list[sqlite3.Row]:
        # Read committed rows only: the shared writer connection would also show another
        # thread's open transaction, whose records sync cannot read yet but would then clear.
        return self.reader.execute(
            "SELECT seq, record_id, op, bucket FROM vector_outbox ORDER BY seq LIMIT ?", (limit,)
        ).fetchall()

    def clear_outbox(self, up_to_seq: int, record_ids: Sequence[str] | None = None) -> None:
        with self.local_transaction() as conn:
            if record_ids is None:
                conn.execute("DELETE FROM vector_outbox WHERE seq <= ?", (up_to_seq,))
            else:
                conn.executemany(
                    "DELETE FROM vector_outbox WHERE seq <= ? AND record_id = ?",
                    [(up_to_seq, r) for r in record_ids],
                )

    def clear_outbox_while(self, up_to_seq: int, key: str, value: str) -> bool:
        """Clear the outbox up to ``up_to_seq`` in one transaction with reading ``meta[key]``,
        only while it is ``value``; False (nothing cleared) otherwise."""
        with self.local_transaction() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
            if row is None or row[0] != value:
                return False
            conn.execute("DELETE FROM vector_outbox WHERE seq <= ?", (up_to_seq,))
        return True

    def all_ids_by_bucket(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for rid, bucket in self.reader.execute("SELECT id, bucket FROM records ORDER BY rowid"):
            out.setdefault(bucket, []).append(rid)
        return out

    def all_buckets(self) -> list[str]:
        return [r[0] for r in self.reader.execute("SELECT DISTINCT bucket FROM records")]

    def meta(self, key: str, default: str | None = None) -> str | None:
        row = self.reader.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return default if row is None else row[0]

    def set_meta(self, conn: sqlite3.Connection, key: str, value: str) -> None:
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?,?)", (key, value))


def list_ids(store: SQLiteStore, f: RecordFilter, limit: int) -> list[str]:
    """Ids of the records satisfying ``f`` (at most ``limit``), newest first."""
    where, params = where_clause(f)
    rows = store.reader.execute(
        f"SELECT r.id FROM records r WHERE {where} ORDER BY r.rowid DESC LIMIT ?", [*params, limit]
    ).fetchall()
    return [r[0] for r in rows]
