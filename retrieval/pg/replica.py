"""The node's SQLite store as a replica of PostgreSQL: applied from the log, in seq order.

- **Catch-up**: read ``pm_log`` rows after the applied seq (in one REPEATABLE READ snapshot
  with the log's horizon) and apply them, each batch in one local SQLite transaction that also
  records the applied seq (``replica_state``), so a crash never applies a row twice or skips
  one. Log seqs are allocated under the write lock, so when seq ``n`` is visible every smaller
  seq has committed or rolled back for good: applying "everything after the applied seq, in
  order" never skips a row that commits later.
- **Wake-ups**: a LISTEN connection (``pattern_log``; the payload is only the seq, NOTIFY
  payloads are limited to 8000 bytes) wakes the applier; it also polls every
  :data:`POLL_S` (``PATTERN_PG_POLL_MS``) and reconnects with backoff when the database restarts.
- **Snapshot**: a replica whose applied seq is below the horizon (the log was compacted past
  it), or that belongs to another cluster, copies every canonical table in one REPEATABLE
  READ transaction (which also reads the seq the copy is at), replaces its local rows in one
  SQLite transaction, queues every record for its Chroma, and continues from that seq.
- After each apply the ``on_applied(buckets)`` callback runs (the engine pushes the outbox to
  Chroma and learns new buckets).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from . import log, polling
from .node import ClusterNode

logger = logging.getLogger(__name__)

POLL_S = polling.DEFAULT_MS / 1000  # PATTERN_PG_POLL_MS (polling.py)
# the longest a follower waits before it looks at its stop flag again, whatever its polling
# period: a node closes within this, not at its poll's end
STOP_CHECK_S = 0.1
BATCH = 500
STATE_DDL = "CREATE TABLE IF NOT EXISTS replica_state(key TEXT PRIMARY KEY, value TEXT NOT NULL)"


class Replica:
    def __init__(self, cluster: ClusterNode, poll_s: float) -> None:
        self.cluster = cluster
        self.store = cluster.store
        self._lock = threading.RLock()
        self._stop = threading.Event()
        # the polling fallback's period (PATTERN_PG_POLL_MS, read and checked by the cluster before
        # it connects: polling.py); PATTERN_PG_LISTEN=0: poll only
        self.poll_s = poll_s
        self.listen = os.environ.get("PATTERN_PG_LISTEN", "1") != "0"
        self._thread: threading.Thread | None = None
        self.on_applied: Callable[[set[str]], None] | None = None
        self.rebuilds = 0
        self.last_error: str | None = None
        with self.store.local_transaction() as conn:
            conn.execute(STATE_DDL)

    # ------------------------------------------------------------------ state
    def _state(self, key: str) -> str | None:
        row = self.store.reader.execute(
            "SELECT value FROM replica_state WHERE key=?", (key,)
        ).fetchone()
        return None if row is None else row[0]

    @property
    def applied(self) -> int:
        return int(self._state("seq") or 0)

    @property
    def cluster_id(self) -> str | None:
        return self._state("cluster")

    # ------------------------------------------------------------------ catch-up
    def catch_up(
        self, through: int | None = None, own=None, pg=None, known_head: int | None = None
    ) -> int:
        """Apply the log (up to ``through``, else to its head). ``own``: (seq, entries) of the
        caller's own transaction, applied from memory; ``known_head``: the log's head when
        that transaction took the lock (no row can lie between it and ``own``). Returns the
        applied seq."""
        if pg is None:  # take a connection before the lock: never wait for the pool holding it
            pg = self.cluster.getconn()
            try:
                return self.catch_up(through, own, pg, known_head)
            finally:
                self.cluster.putconn(pg)
        buckets: set[str] = set()
        with self._lock:
            applied = self.applied
            if through is not None and applied >= through:
                return applied
            if self.cluster_id != self.cluster.cluster_id:
                applied = self.rebuild()
                buckets.add("*")
            while True:
                upto = through if own is None else own[0] - 1
                if own is not None and known_head is not None and applied >= known_head:
                    rows, horizon, more = [], 0, False  # nothing between ours and the applied
                else:
                    rows, horizon, more = self.cluster.log_after(applied, BATCH, upto, pg=pg)
                if applied < horizon:
                    applied = self.rebuild()
                    buckets.add("*")
                    continue
                if own is not None and not more and own[0] > applied:
                    rows.append((own[0], own[1]))
                if not rows:
                    break
                with self.store.local_transaction() as conn:
                    # another process on this folder may have applied some meanwhile
                    done = conn.execute("SELECT value FROM replica_state WHERE key='seq'")
                    done = int((done.fetchone() or [0])[0])
                    for seq, entries in rows:
                        if seq > done:
                            buckets |= log.apply(conn, entries)
                        applied = max(seq, done)
                    conn.execute(
                        "INSERT OR REPLACE INTO replica_state(key, value) VALUES ('seq', ?)",
                        (str(applied),),
                    )
                if not more or (through is not None and applied >= through):
                    break
        if buckets and self.on_applied is not None:
            self.on_applied(buckets)
        return applied

    def catch_up_quietly(self) -> None:
        try:
            self.catch_up()
        except Exception as exc:  # the caller's own error matters more
            logger.warning("replica catch-up failed: %s", exc)

    # ------------------------------------------------------------------ snapshot
    def rebuild(self) -> int:
        """Replace the local canonical rows with a consistent copy of PostgreSQL's."""
        cat = self.cluster.catalog
        with self.cluster.snapshot() as (pg, seq):
            with self.store.local_transaction() as conn:
                before = dict(conn.execute("SELECT id, bucket FROM records").fetchall())
                for t in cat.tables.values():
                    conn.execute(f'DELETE FROM "{t.name}"')
                conn.execute("DELETE FROM vector_outbox")
                conn.execute("DELETE FROM sqlite_sequence")
                for t in cat.tables.values():
                    cols = ", ".join(f'"{c}"' for c in t.columns)
                    marks = ",".join("?" * len(t.columns))
                    insert = f'INSERT INTO "{t.name}"({cols}) VALUES ({marks})'
                    with pg.cursor(name=f"snap_{t.name}") as cur:
                        cur.itersize = 2000
                        cur.execute(f'SELECT {cols} FROM "{t.name}"')
                        while part := cur.fetchmany(2000):
                            conn.executemany(insert, [[_plain(v) for v in r] for r in part])
                for name, top in pg.execute("SELECT name, seq FROM sqlite_sequence").fetchall():
                    conn.execute("DELETE FROM sqlite_sequence WHERE name=?", (name,))
                    conn.execute(
                        "INSERT INTO sqlite_sequence(name, seq) VALUES (?, ?)", (name, top)
                    )
                now = dict(conn.execute("SELECT id, bucket FROM records").fetchall())
                gone = [(i, b) for i, b in before.items() if now.get(i) != b]
                conn.executemany(
                    "INSERT INTO vector_outbox(record_id, op, bucket) VALUES (?, 'delete', ?)",
                    gone,
                )
                conn.execute(
                    "INSERT INTO vector_outbox(record_id, op, bucket) "
                    "SELECT id, 'upsert', bucket FROM records ORDER BY rowid"
                )
                for key, value in (("seq", str(seq)), ("cluster", self.cluster.cluster_id)):
                    conn.execute(
                        "INSERT OR REPLACE INTO replica_state(key, value) VALUES (?, ?)",
                        (key, value),
                    )
        self.rebuilds += 1
        logger.info("replica rebuilt from a snapshot at seq %d", seq)
        return seq

    # ------------------------------------------------------------------ follower thread
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._follow, name="pg-replica", daemon=True)
            self._thread.start()

    def _follow(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            listener = None
            try:
                listener = self.cluster.connect(autocommit=True)
                if self.listen:
                    listener.execute("LISTEN pattern_log")
                backoff = 0.1
                self.catch_up(pg=listener)  # whatever committed while we were not listening
                self.last_error = None
                last = time.monotonic()
                while not self._stop.is_set():
                    # wait for another node's notification (this node's writers apply their
                    # own rows); after poll_s catch up anyway: the polling fallback (a NOTIFY
                    # lost with a connection, a follower without LISTEN)
                    foreign = False
                    if self.listen:
                        wait = min(self.poll_s, STOP_CHECK_S)
                        for note in listener.notifies(timeout=wait, stop_after=1):
                            foreign = (
                                foreign or note.payload.partition(" ")[2] != self.cluster.node_id
                            )
                    else:
                        self._stop.wait(self.poll_s)
                    if foreign or time.monotonic() - last >= self.poll_s:
                        self.catch_up(pg=listener)  # its own connection: never the pool's
                        last = time.monotonic()
            except Exception as exc:
                if self._stop.is_set():
                    break
                self.last_error = f"{type(exc).__name__}: {exc}"
                logger.warning("replica follower: %s (retrying in %.1f s)", exc, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
            finally:
                if listener is not None:
                    try:
                        listener.close()
                    except Exception:  # pragma: no cover
                        pass

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None


def _plain(v):
    return bytes(v) if isinstance(v, memoryview) else v


__all__ = ["POLL_S", "Replica"]
