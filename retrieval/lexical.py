"""Lexical retrieval: SQLite FTS5 ``bm25()`` over content, context and extra terms.

Okapi BM25 as FTS5 computes it (k1 = 1.2, b = 0.75), per column with weights
:data:`COLUMN_WEIGHTS` (content, context, identifier parts/tags/names). FTS5 returns lower-is-better
values; we negate them so every score in the engine is higher-is-better.
Queries are OR-ed content terms (stopwords removed, identifiers split, see ``analyzer``).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Sequence

import numpy as np

from .analyzer import fts_or_query, query_terms
from .records import RecordFilter
from .store import SQLiteStore, where_clause

COLUMN_WEIGHTS = (1.0, 0.6, 0.8)


def _bm25_expr(weights: Sequence[float]) -> str:
    return "bm25(records_fts, " + ", ".join(f"{w:g}" for w in weights) + ")"


class LexicalIndex:
    """FTS5 ranking over the canonical store (the FTS rows are written with the records)."""

    def __init__(
        self,
        store: SQLiteStore,
        weights: Sequence[float] = COLUMN_WEIGHTS,
        max_terms: int = 32,
        max_df: float | None = None,
        min_terms: int = 3,
    ) -> None:
        """``max_df``: query-term pruning by document frequency (None = off; default from
        ``PATTERN_FTS_MAX_DF``). FTS5 scores every row that contains any OR-ed term, so the cost
        of a query is the sum of its terms' document frequencies, and one very common term
        ("cells", "patients") dominates it while adding little to bm25 (its IDF is low). With
        ``max_df`` = f, terms occurring in more than f of the records are left out of the MATCH
        expression, except that the ``min_terms`` rarest terms are always kept (a query made
        only of common words still finds something); terms that occur nowhere are dropped, and
        at most ``max_terms`` terms are kept, rarest first. Document frequencies are exact
        (FTS5 counts) and cached per term; the cache is cleared when the record count has
        moved by more than 10 %. Effect measured in docs/benchmarks.md ("Scale")."""
        self.store = store
        self.weights = tuple(weights)
        self.max_terms = max_terms
        if max_df is None and os.environ.get("PATTERN_FTS_MAX_DF"):
            max_df = float(os.environ["PATTERN_FTS_MAX_DF"])
        self.max_df = max_df if max_df and max_df > 0 else None
        self.min_terms = min_terms
        self._df: dict[str, int] = {}
        self._df_n = 0
        self._df_checked = 0.0
        self._df_lock = threading.Lock()

    def _doc_count(self, conn: sqlite3.Connection) -> int:
        now = time.monotonic()
        if now - self._df_checked > 30.0 or not self._df_n:
            n = conn.execute("SELECT count(*) FROM records").fetchone()[0]
            with self._df_lock:
                if not self._df_n or abs(n - self._df_n) > 0.1 * self._df_n:
                    self._df.clear()
                    self._df_n = n
                self._df_checked = now
        return self._df_n

    def doc_freqs(self, terms: Sequence[str], conn: sqlite3.Connection | None = None) -> dict:
        """{term: number of records containing it} (cached; FTS5 stems the same way it indexes)."""
        conn = conn or self.store.reader
        self._doc_count(conn)
        out = {}
        for t in terms:
            df = self._df.get(t)
            if df is None:
                try:
                    df = conn.execute(
                        "SELECT count(*) FROM records_fts WHERE records_fts MATCH ?",
                        [fts_or_query([t])],
                    ).fetchone()[0]
                except sqlite3.OperationalError:
                    df = 0
                with self._df_lock:
                    if len(self._df) > 200_000:
                        self._df.clear()
                    self._df[t] = df
            out[t] = df
        return out

    def prune_terms(self, terms: list[str], conn: sqlite3.Connection | None = None) -> list[str]:
        """The terms that reach FTS5 under ``max_df`` (see ``__init__``); order kept."""
        if self.max_df is None or not terms:
            return terms[: self.max_terms]
        dfs = self.doc_freqs(terms, conn)
        n = max(1, self._df_n)
        present = sorted((t for t in terms if dfs[t] > 0), key=lambda t: dfs[t])
        keep = [t for i, t in enumerate(present) if i < self.min_terms or dfs[t] <= self.max_df * n]
        keep = set(keep[: self.max_terms])
        return [t for t in terms if t in keep]

    def match_expr(self, query: str, conn: sqlite3.Connection | None = None) -> str | None:
        if self.max_df is None:
            terms = query_terms(query, self.max_terms)
        else:
            terms = self.prune_terms(query_terms(query, 10_000), conn)
        return fts_or_query(terms) if terms else None

    def search(
        self, query: str, f: RecordFilter, limit: int, conn: sqlite3.Connection | None = None
    ) -> list[tuple[str, float]]:
        """Top ``limit`` (record id, bm25) pairs among the records that satisfy ``f``."""
        expr = self.match_expr(query)
        if expr is None or limit <= 0:
            return []
        where, params = where_clause(f)
        bm25 = _bm25_expr(self.weights)
        sql = (
            f"SELECT r.id, {bm25} AS s FROM records_fts CROSS JOIN records r "
            f"ON r.rowid = records_fts.rowid "
            f"WHERE records_fts MATCH ? AND {where} ORDER BY s LIMIT ?"
        )
        # CROSS JOIN keeps FTS5 as the outer loop. With a plain JOIN and a one-bucket filter,
        # SQLite walked the bucket's records and ran the MATCH once per record (the score_ids
        # pattern), e.g. 5183 MATCHes per query on SciFact (docs/benchmarks.md "Scale").
        conn = conn or self.store.reader
        try:
            rows = conn.execute(sql, [expr, *params, limit]).fetchall()
        except sqlite3.OperationalError:
            return []
        return [(r[0], -float(r[1])) for r in rows]

    def search_all(
        self, query: str, f: RecordFilter, limit: int, conn: sqlite3.Connection | None = None
    ) -> tuple[list[tuple[str, float]], dict[str, float]]:
        """(top ``limit`` pairs as :meth:`search` gives them, {id: bm25} of *every* record that
        satisfies ``f`` and contains a query term). FTS5 computes bm25 for every matching row
        anyway; returning them all costs a few ms more than ``ORDER BY ... LIMIT`` and makes the
        lexical score of any other candidate a dict lookup (0.0 when absent, as in
        :meth:`score_ids`), where ``score_ids`` re-runs the MATCH once per id (measured at 100k
        records: ~24 ms CPU per 100 ids, docs/benchmarks.md "Scale")."""
        expr = self.match_expr(query)
        if expr is None or limit <= 0:
            return [], {}
        where, params = where_clause(f)
        bm25 = _bm25_expr(self.weights)
        sql = (
            f"SELECT r.id, {bm25} FROM records_fts CROSS JOIN records r "
            f"ON r.rowid = records_fts.rowid WHERE records_fts MATCH ? AND {where}"
        )
        conn = conn or self.store.reader
        try:
            rows = conn.execute(sql, [expr, *params]).fetchall()
        except sqlite3.OperationalError:
            return [], {}
        if not rows:
            return [], {}
        ids = [r[0] for r in rows]
        scores = -np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows))
        if len(rows) > limit:
            top = np.argpartition(-scores, limit - 1)[:limit]
        else:
            top = np.arange(len(rows))
        top = top[np.argsort(-scores[top], kind="stable")]
        every = dict(zip(ids, scores.tolist(), strict=True))
        return [(ids[i], float(scores[i])) for i in top], every

    def score_ids(
        self, query: str, ids: Sequence[str], conn: sqlite3.Connection | None = None
    ) -> dict[str, float]:
        """bm25 of specific records (0.0 where no query term occurs): used to complete the
        lexical side of candidates found only by the vector retriever."""
        expr = self.match_expr(query)
        if expr is None or not ids:
            return {}
        bm25 = _bm25_expr(self.weights)
        conn = conn or self.store.reader
        out: dict[str, float] = {}
        ids = list(ids)
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            sql = (
                f"SELECT r.id, {bm25} FROM records_fts JOIN records r ON r.rowid = records_fts.rowid "
                f"WHERE records_fts MATCH ? AND r.id IN ({','.join('?' * len(part))})"
            )
            try:
                out.update((r[0], -float(r[1])) for r in conn.execute(sql, [expr, *part]))
            except sqlite3.OperationalError:
                return out
        return out
