"""The exact scan of a small store: every current window of one model in one matrix.

A store below the vector index's threshold (:mod:`retrieval.vector.index_size`) is searched
by meaning by scoring all of its windows. Done record by record (read each record's version,
look up its windows, build a dict of scores) that costs ~40 µs a record in Python: 80 ms at
2,000 records, more than the index's query. Kept as arrays it is a few matrix operations:

- :meth:`ExactScan.search` reads the store's :meth:`~retrieval.storage.store.SQLiteStore.data_version`
  (one pragma). When anything committed since the matrix was loaded, it is brought up to date:
  when every change since is a new record (the change log says ``insert`` and nothing else,
  and the model's window count grew by exactly the new records' windows), only their windows
  are read and appended (a recall while other agents write read the whole matrix again each
  time: 6 ms of processor time of its 11 at 1,600 records); otherwise it is loaded again:
  one query for the current windows of the model (the record's row id, its id, the vector),
  a few µs a window. A matrix that left out a damaged row is always loaded again, and so is
  one after ``FULL_EVERY`` appends, so an edit that no change row records (another tool's) is
  seen within that many writes.
- The query's filter is the same SQL every ranker applies (``where_clause``), asked for row
  ids only; the matrix rows of the records it lets through are scored with one product, and
  each record keeps its best window (``np.maximum.reduceat`` over its rows, which are
  adjacent).

Cosine is the dot product: stored windows and query vectors are unit length.
The matrix is dropped with the engine; it holds at most the threshold's windows plus the last
write's (a store that outgrows it is given an index by the next outbox run).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from retrieval.storage import changelog
from retrieval.storage.store import where_clause

if TYPE_CHECKING:  # pragma: no cover
    from retrieval.records import RecordFilter
    from retrieval.storage.store import SQLiteStore


def _readable(rows: list) -> list:
    """The rows a matrix can hold: a vector of the length most rows have (a whole number of
    float32), and a record id that is text. A row damaged by a foreign tool or a disk error is
    left out (one bad record never fails a query)."""
    lengths: dict[int, int] = {}
    for r in rows:
        if isinstance(r[2], bytes) and len(r[2]) and len(r[2]) % 4 == 0:
            lengths[len(r[2])] = lengths.get(len(r[2]), 0) + 1
    if not lengths:
        return []
    size = max(lengths, key=lambda n: (lengths[n], n))
    return [r for r in rows if isinstance(r[2], bytes) and len(r[2]) == size
            and isinstance(r[1], str) and isinstance(r[0], int)]  # fmt: skip


FULL_EVERY = 256  # appends before the matrix is loaded whole again
MAX_APPEND = 256  # change rows an append may cover; more: loaded whole


class _Matrix:
    """One load: the windows (rows), each row's record row id, and per record its id and
    first row (records in row id order)."""

    def __init__(self, rowids: np.ndarray, vectors: np.ndarray, row_ids: list[str]) -> None:
        self.rowids = rowids  # row id of each window's record, ascending
        self.vectors = vectors  # windows x dim
        first = np.flatnonzero(np.r_[True, rowids[1:] != rowids[:-1]]) if len(rowids) else rowids
        self.starts = first.astype(np.int64)  # each record's first row
        self.record_rowids = rowids[self.starts] if len(rowids) else rowids
        self.ids = [row_ids[i] for i in self.starts.tolist()]  # per record (in row id order)

    def extended(self, rowids: np.ndarray, vectors: np.ndarray, row_ids: list[str]) -> _Matrix:
        """This matrix with the windows of later records (row ids above its last) after it."""
        tail = _Matrix(rowids, vectors, row_ids)
        if not len(self.rowids):
            return tail
        out = _Matrix.__new__(_Matrix)
        out.rowids = np.concatenate([self.rowids, rowids])
        out.vectors = np.vstack([self.vectors, vectors])
        out.starts = np.concatenate([self.starts, tail.starts + len(self.rowids)])
        out.record_rowids = np.concatenate([self.record_rowids, tail.record_rowids])
        out.ids = [*self.ids, *tail.ids]
        return out


WINDOWS = (
    "SELECT e.record_rowid, r.id, e.vector FROM embeddings e JOIN records r "
    "ON r.rowid = e.record_rowid AND e.content_hash = r.content_hash "
    "WHERE e.model_id = ? AND e.record_rowid > ? ORDER BY e.record_rowid, e.window"
)


@dataclass(frozen=True)
class _State:
    """A loaded matrix and what it was loaded at: the data version, the change log's last
    seq, the model's stored window count; ``clean``: no row was left out; ``appends`` since
    the last whole load."""

    matrix: _Matrix
    model_id: str
    version: int
    seq: int
    count: int
    clean: bool
    appends: int = 0


@contextmanager
def _snapshot(conn) -> Iterator[None]:
    """One read transaction on ``conn`` (WAL: every read inside sees the same commit)."""
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")  # nothing was written: it ends the snapshot


def _count(conn, model_id: str) -> int:
    """The model's stored windows, every row (readable or not)."""
    row = conn.execute("SELECT count(*) FROM embeddings WHERE model_id = ?", (model_id,)).fetchone()
    return int(row[0])


def _arrays(rows: list) -> tuple[np.ndarray, np.ndarray, list, bool]:
    """(record row ids, vectors, the rows kept, whether every row was kept) of readable,
    finite windows."""
    kept = _readable(rows)
    clean = len(kept) == len(rows)
    if not kept:
        return np.zeros(0, np.int64), np.zeros((0, 1), np.float32), [], clean
    rowids = np.fromiter((r[0] for r in kept), dtype=np.int64, count=len(kept))
    vectors = np.frombuffer(b"".join(r[2] for r in kept), dtype=np.float32)
    vectors = vectors.reshape(len(kept), -1)
    finite = np.isfinite(vectors).all(axis=1)  # a damaged window (NaN, inf) is left
    if not finite.all():  # out; the record's other windows still count
        kept = [r for r, ok in zip(kept, finite.tolist(), strict=True) if ok]
        rowids, vectors, clean = rowids[finite], vectors[finite], False
    return rowids, vectors, kept, clean


def _loaded(conn, model_id: str, version: int, seq: int, count: int) -> _State:
    """The whole matrix, read now."""
    rows = conn.execute(WINDOWS, (model_id, -(2**63))).fetchall()
    rowids, vectors, kept, clean = _arrays(rows)
    matrix = _Matrix(rowids, vectors, [r[1] for r in kept])
    return _State(matrix, model_id, version, seq, count, clean and len(rows) == count)


def _appended(conn, got: _State, version: int, seq: int, count: int) -> _State | None:
    """``got`` with the windows of the records inserted since, or None when anything else
    changed (a record updated or deleted, windows stored for an older record, a damaged row):
    then the caller reads it whole."""
    if seq < got.seq or seq - got.seq > MAX_APPEND:
        return None
    rows_since, other = conn.execute(
        "SELECT count(*), coalesce(sum(op != 'insert'), 0) FROM changes WHERE seq > ?",
        (got.seq,),
    ).fetchone()
    if other or rows_since != seq - got.seq:
        return None  # a change that is not an insert, or rows compacted away: unknown
    m = got.matrix
    last = int(m.rowids[-1]) if len(m.rowids) else -(2**63)
    if len(m.rowids):  # the last record still holds its row id (a freed one is given again)
        row = conn.execute("SELECT id FROM records WHERE rowid = ?", (last,)).fetchone()
        if row is None or row[0] != m.ids[-1]:
            return None
    rows = conn.execute(WINDOWS, (got.model_id, last)).fetchall()
    if count != got.count + len(rows):
        return None  # windows came or went elsewhere (an older record's, a deleted one's)
    rowids, vectors, kept, clean = _arrays(rows)
    if not clean or (len(m.rowids) and len(kept) and vectors.shape[1] != m.vectors.shape[1]):
        return None
    if not len(kept):
        return replace(got, version=version, seq=seq, count=count, appends=got.appends + 1)
    matrix = m.extended(rowids, vectors, [r[1] for r in kept])
    return replace(got, matrix=matrix, version=version, seq=seq, count=count,
                   appends=got.appends + 1)  # fmt: skip


def _allowed(conn, f: RecordFilter) -> np.ndarray:
    """The row ids of the records ``f`` lets through, read as one row: a cursor hands each
    row over with the GIL released and taken again, and while another thread runs Python
    each taking waits up to the interpreter's switch interval (thousands of rows: seconds)."""
    where, params = where_clause(f)
    row = conn.execute(f"SELECT group_concat(r.rowid) FROM records r WHERE {where}", params)
    text = row.fetchone()[0]
    if not text:
        return np.zeros(0, dtype=np.int64)
    return np.array(text.split(","), dtype=np.int64)


class ExactScan:
    """The exact vector search of one store (see the module docstring). Thread-safe."""

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._loaded: _State | None = None
        self.loads = 0  # how many times the matrix was read whole (tests, benchmarks)
        self.appended = 0  # how many times new records were appended to it

    def matrix(self, model_id: str) -> _Matrix:
        """The current windows of ``model_id``: appended to, or read again, if the store changed."""
        version = self.store.data_version()  # before the read: a later commit reloads again
        with self._lock:
            got = self._loaded
            if got is not None and got.version == version and got.model_id == model_id:
                return got.matrix
        conn = self.store.reader
        outer = conn.in_transaction  # a caller's snapshot: maybe older than ``version``
        with _snapshot(conn):  # the log, the count and the windows as of one commit
            seq, count = changelog.head(conn), _count(conn, model_id)
            state = None
            same = got is not None and got.model_id == model_id and got.clean
            if same and got.appends < FULL_EVERY:
                state = _appended(conn, got, version, seq, count)
            if state is None:
                state = _loaded(conn, model_id, version, seq, count)
        if outer:
            return state.matrix  # answered from the caller's snapshot, not kept
        with self._lock:
            self._loaded = state
            if state.appends:
                self.appended += 1
            else:
                self.loads += 1
        return state.matrix

    def search(
        self, qvec: np.ndarray, f: RecordFilter, depth: int, model_id: str
    ) -> list[tuple[str, float]]:
        """The ``depth`` records passing ``f`` whose best window is closest to ``qvec``:
        (record id, cosine), best first, ties by record id."""
        m = self.matrix(model_id)
        if not len(m.ids) or depth <= 0:
            return []
        q = np.asarray(qvec, dtype=np.float32).reshape(-1)
        if q.shape[0] != m.vectors.shape[1]:
            return []  # another model's vectors under this id (a damaged store): no match
        allowed = _allowed(self.store.reader, f)
        with np.errstate(all="ignore"):
            best = np.maximum.reduceat(m.vectors @ q, m.starts)  # per record: its best window
        # per record: let through by the filter, and not a damaged vector (NaN, inf)
        keep = np.isin(m.record_rowids, allowed) & np.isfinite(best)
        if not keep.any():
            return []
        idx = np.flatnonzero(keep)
        scores = best[idx]
        if len(idx) > depth:  # the top depth, and every record tied with the last of them
            kth = np.partition(scores, len(scores) - depth)[len(scores) - depth]
            sel = scores >= kth
            idx, scores = idx[sel], scores[sel]
        out = [(m.ids[i], float(s)) for i, s in zip(idx.tolist(), scores.tolist(), strict=True)]
        return sorted(out, key=lambda kv: (-kv[1], kv[0]))[:depth]


__all__ = ["ExactScan"]
