"""The exact scan of a small store: every current window of one model in one matrix.

A store below the vector index's threshold (:mod:`retrieval.vector.index_size`) is searched
by meaning by scoring all of its windows. Done record by record (read each record's version,
look up its windows, build a dict of scores) that costs ~40 µs a record in Python: 80 ms at
2,000 records, more than the index's query. Kept as arrays it is a few matrix operations:

- :meth:`ExactScan.search` reads the store's :meth:`~retrieval.storage.store.SQLiteStore.data_version`
  (one pragma). When anything committed since the matrix was loaded, it is loaded again: one
  query for the current windows of the model (the record's row id, its id, the vector), ~1 µs
  a window.
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
from typing import TYPE_CHECKING

import numpy as np

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


class ExactScan:
    """The exact vector search of one store (see the module docstring). Thread-safe."""

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._loaded: tuple[int, str, _Matrix] | None = None  # (data version, model, matrix)
        self.loads = 0  # how many times the matrix was read (tests, benchmarks)

    def matrix(self, model_id: str) -> _Matrix:
        """The current windows of ``model_id``, read again if the store changed."""
        version = self.store.data_version()  # before the read: a later commit reloads again
        with self._lock:
            got = self._loaded
            if got is not None and got[0] == version and got[1] == model_id:
                return got[2]
        rows = self.store.reader.execute(
            "SELECT e.record_rowid, r.id, e.vector FROM embeddings e JOIN records r "
            "ON r.rowid = e.record_rowid AND e.content_hash = r.content_hash "
            "WHERE e.model_id = ? ORDER BY e.record_rowid, e.window",
            (model_id,),
        ).fetchall()
        rows = _readable(rows)
        if rows:
            rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            vectors = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32)
            vectors = vectors.reshape(len(rows), -1)
            finite = np.isfinite(vectors).all(axis=1)  # a damaged window (NaN, inf) is left
            if not finite.all():  # out; the record's other windows still count
                rows = [r for r, ok in zip(rows, finite.tolist(), strict=True) if ok]
                rowids, vectors = rowids[finite], vectors[finite]
        else:
            rowids, vectors = np.zeros(0, np.int64), np.zeros((0, 1), np.float32)
        m = _Matrix(rowids, vectors, [r[1] for r in rows])
        with self._lock:
            self._loaded = (version, model_id, m)
            self.loads += 1
        return m

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
        where, params = where_clause(f)
        allowed = np.fromiter(
            (r[0] for r in self.store.reader.execute(
                f"SELECT r.rowid FROM records r WHERE {where}", params)),
            dtype=np.int64,
        )  # fmt: skip
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
