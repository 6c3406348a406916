"""Record ids and scores of the rows a lexical query scored.

The FTS5-only path and the in-memory postings score rows by rowid; a search wants record ids.
:func:`ids_of` maps the few it keeps; :class:`RowidScores` keeps every matching row's score
for the lookups of score completion (a vector candidate's bm25) without a Python object per
row. Both are read after the rows were scored: a record inserted meanwhile is left out, since a
record deleted may have left its rowid to it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from retrieval.storage import changelog
from retrieval.storage.store import SQLiteStore


def ids_of(
    conn: sqlite3.Connection, rowids: Sequence[int], seq: int | None = None
) -> dict[int, str]:
    """{rowid: record id} for the rowids whose record exists; with ``seq`` (the change log's
    head before the rows were scored), not for the records inserted since: a record deleted
    meanwhile may have left its rowid to one of them."""
    out: dict[int, str] = {}
    for i in range(0, len(rowids), 500):
        part = json.dumps(list(rowids[i : i + 500]))
        out.update(
            conn.execute(
                "SELECT r.rowid, r.id FROM json_each(?) AS v CROSS JOIN records r "
                "ON r.rowid = v.value",
                [part],
            ).fetchall()
        )
    if seq is not None and out:
        new = changelog.inserted_since(conn, seq, out.values())
        if new is None:  # the log cannot tell (compacted meanwhile): trust none of them
            return {}
        out = {k: v for k, v in out.items() if v not in new}
    return out


class RowidScores(Mapping[str, float]):
    """{record id: bm25} as the FTS5-only path produces it: the matching rows' rowids (sorted)
    and scores kept as two arrays, a record id resolved to its rowid when it is looked up (one
    read of the unique id index). No Python object is made per matching row: a common term
    matches hundreds of thousands of records at a million, where a dict of them all cost tens
    of ms per query, and a search looks up only its few hundred candidates.

    ``seq``: the change log's head before the rows were scored. A record inserted since then
    is absent (its score unknown): a record deleted meanwhile may have left its rowid to it,
    and it must not inherit that record's score."""

    def __init__(
        self, store: SQLiteStore, rowids: np.ndarray, scores: np.ndarray, known: dict[str, int],
        seq: int | None = None,
    ) -> None:  # fmt: skip
        rowids = np.asarray(rowids, dtype=np.int64)
        scores = np.asarray(scores, dtype=np.float64)
        if len(rowids) > 1 and not bool((rowids[1:] > rowids[:-1]).all()):  # usually in order
            order = np.argsort(rowids, kind="stable")
            rowids, scores = rowids[order], scores[order]
        self._store = store
        self._rowids, self._scores = rowids, scores
        self._known: dict[str, int | None] = dict(known)
        self._seq = seq

    def _new(self, conn: sqlite3.Connection, ids) -> set[str] | None:
        """Which of ``ids`` were inserted since the rows were scored (None: cannot tell)."""
        return set() if self._seq is None else changelog.inserted_since(conn, self._seq, ids)

    def resolve(self, ids: Sequence[str]) -> None:
        """Look up many record ids at once (one query instead of one per :meth:`get`)."""
        todo = [r for r in dict.fromkeys(ids) if r not in self._known]
        if not todo:
            return
        conn = self._store.reader
        found: dict[str, int] = {}
        for i in range(0, len(todo), 500):
            found.update(
                conn.execute(
                    "SELECT v.value, r.rowid FROM json_each(?) AS v CROSS JOIN records r "
                    "ON r.id = v.value",
                    [json.dumps(todo[i : i + 500])],
                ).fetchall()
            )
        new = self._new(conn, found)  # after the lookups: an insert made meanwhile counts
        self._known.update((r, None if new is None or r in new else found.get(r)) for r in todo)

    def __getitem__(self, rid: str) -> float:
        if rid not in self._known:
            self.resolve([rid])
        rowid = self._known[rid]
        if rowid is not None:
            i = int(np.searchsorted(self._rowids, rowid))
            if i < len(self._rowids) and self._rowids[i] == rowid:
                return float(self._scores[i])
        raise KeyError(rid)

    def __iter__(self) -> Iterator[str]:
        conn = self._store.reader
        ids = list(ids_of(conn, self._rowids.tolist()).values())
        new = self._new(conn, ids)
        return iter([r for r in ids
                     if (new is not None and r not in new) or self._known.get(r) is not None])  # fmt: skip

    def __len__(self) -> int:
        return len(self._rowids)
