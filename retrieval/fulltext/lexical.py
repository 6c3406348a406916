"""Lexical retrieval: SQLite FTS5 ``bm25()`` over content, context and extra terms.

Okapi BM25 as FTS5 computes it (k1 = 1.2, b = 0.75), per column with weights
:data:`COLUMN_WEIGHTS` (content, context, identifier parts/tags/names). FTS5 returns lower-is-better
values; we negate them so every score in the engine is higher-is-better.
Queries are OR-ed content terms (stopwords removed, identifiers split, see ``analyzer``).
"""

from __future__ import annotations

import os
import random
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence

import numpy as np

from retrieval.fulltext.analyzer import fts_or_query, query_terms
from retrieval.fulltext.postings import Postings
from retrieval.fulltext.scores import RowidScores, ids_of
from retrieval.records import RecordFilter, utcnow
from retrieval.storage import changelog
from retrieval.storage.buckets import bucket_token
from retrieval.storage.store import SQLiteStore, ts, where_clause

COLUMN_WEIGHTS = (1.0, 0.6, 0.8)
# A filter on at most this many buckets is ANDed into the MATCH as ``bucket : (...)`` (FTS5
# intersects the doclists, so only visible rows are scored); more buckets are filtered by the
# records join alone.
MAX_MATCH_BUCKETS = 16
# The FTS5-only path (no records join) leaves out expired records by rowid; with more expired
# records than this (maintenance normally purges them) the records join filters instead.
MAX_EXPIRED_SET = 5000
# Stores with at least this many records rank visibility-filtered queries with the in-memory
# postings (same scores as FTS5's bm25, see retrieval/fulltext/postings.py); -1 = never.
POSTINGS_MIN = 20_000


def _bm25_expr(weights: Sequence[float]) -> str:
    # the bucket column (schema v5) weighs 0: its token never changes a score
    return "bm25(records_fts, " + ", ".join(f"{w:g}" for w in (*weights, 0.0)) + ")"


_PRINTF_EXACT: list[bool] = []  # the answer of printf_exact, once per process


def printf_exact(conn: sqlite3.Connection) -> bool:
    """Whether this SQLite prints a double with ``printf('%!.17g')`` as text that reads back as
    the same double, for a sample of bm25's range (0 to -1,000, down to 1e-12 from zero).
    Asked once per process: how exact the conversion is depends on the SQLite version and
    the platform (a ``long double`` as wide as a double), and far outside that range some
    doubles come back one step off."""
    if not _PRINTF_EXACT:
        rng = random.Random(0)
        probes = [-0.1, -1 / 3, -2 / 3, -1e-12, -1e-6, -1000.0,
                  *(-rng.uniform(0, 1) * 10.0 ** rng.randint(-12, 3) for _ in range(256)),
                  *(-rng.uniform(0, 40) for _ in range(256))]  # fmt: skip
        try:
            exact = all(float(conn.execute("SELECT printf('%!.17g', ?)", (v,)).fetchone()[0]) == v
                        for v in probes)  # fmt: skip
        except (sqlite3.Error, ValueError):
            exact = False
        _PRINTF_EXACT.append(exact)
    return _PRINTF_EXACT[0]


def scored_rows(conn: sqlite3.Connection, sql: str, params: Sequence) -> np.ndarray:
    """The ``[r, s]`` rows (a row id, a score) of ``sql``, in its order, read as one row.

    A cursor hands each row over with the GIL released and taken again; while another thread
    runs Python, each taking waits up to the interpreter's switch interval, so thousands of
    matching rows cost seconds. Aggregated, SQLite makes one step: the row ids and the scores
    as text, each score with 17 significant digits (``printf('%!.17g')``), which read back as
    the same double (:func:`printf_exact`), a zero as FTS5's bm25 gives it (-0.0). Should the
    two lists not line up with the row count, the rows are read one by one."""
    if printf_exact(conn):
        # the middle query's LIMIT keeps ``sql`` from being flattened into the aggregate,
        # where FTS5's bm25() cannot be called; a NULL score is left out (the lists differ)
        wrapped = ("SELECT count(*), group_concat(r), "
                   "group_concat(iif(s IS NULL, NULL, printf('%!.17g', s))) "
                   f"FROM (SELECT r, s FROM ({sql}) LIMIT -1)")  # fmt: skip
        n, ids, scores = conn.execute(wrapped, params).fetchone()
        if not n:
            return np.zeros((0, 2), dtype=np.float64)
        ids, scores = (ids or "").split(","), (scores or "").split(",")
        if len(ids) == len(scores) == n:
            try:
                rows = np.array([ids, scores], dtype=np.float64).T.copy()
            except ValueError:  # not numbers: read them as SQLite gives them
                pass
            else:  # SQLite prints -0.0 as 0.0; FTS5's bm25 is -1 x a score: its zero is -0.0
                rows[rows[:, 1] == 0, 1] = -0.0
                return rows
    cur = conn.cursor()
    cur.row_factory = None
    return np.array(cur.execute(sql, params).fetchall(), dtype=np.float64).reshape(-1, 2)


class LexicalIndex:
    """FTS5 ranking over the canonical store (the FTS rows are written with the records)."""

    def __init__(
        self,
        store: SQLiteStore,
        weights: Sequence[float] = COLUMN_WEIGHTS,
        max_terms: int = 32,
        max_df: float | None = None,
        min_terms: int = 3,
        postings_min: int | None = None,
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
        if postings_min is None:
            postings_min = int(os.environ.get("PATTERN_BM25_MEMORY_MIN", str(POSTINGS_MIN)))
        self.postings = Postings(store, self.weights, postings_min) if postings_min >= 0 else None

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

    def doc_count(self, conn: sqlite3.Connection | None = None) -> int:
        """Records in the store (cached for 30 s; what :meth:`doc_freqs` is relative to)."""
        return self._doc_count(conn or self.store.reader)

    def terms(self, query: str, conn: sqlite3.Connection | None = None) -> list[str]:
        """The query's terms as they reach the ranker (``max_df`` pruning applied)."""
        if self.max_df is None:
            return query_terms(query, self.max_terms)
        return self.prune_terms(query_terms(query, 10_000), conn)

    def match_expr(self, query: str, conn: sqlite3.Connection | None = None) -> str | None:
        terms = self.terms(query, conn)
        return fts_or_query(terms) if terms else None

    def _match(self, expr: str, f: RecordFilter | None = None) -> str:
        """The MATCH for a term expression, AND the caller's buckets when they are few
        (``MAX_MATCH_BUCKETS``). The terms are not restricted to the text columns: a bucket
        token typed as a query term would only match a record's bucket column, whose weight
        is 0 (score 0.0 = no lexical match), and a column filter costs FTS5 time."""
        if f is not None and f.buckets and len(f.buckets) <= MAX_MATCH_BUCKETS:
            toks = " OR ".join(f'"{bucket_token(b)}"' for b in dict.fromkeys(f.buckets))
            return f"({expr}) AND (bucket : ({toks}))"
        return expr

    def _fts_only(
        self,
        expr: str,
        f: RecordFilter,
        limit: int | None,
        conn: sqlite3.Connection,
        terms: list[str] | None = None,
    ) -> np.ndarray | None:
        """[rowid, bm25] rows (FTS5's lower-is-better bm25) of the matching records satisfying
        ``f``, best first when ``limit`` is given, from FTS5 alone: the buckets are in the MATCH
        and expiry is a set of expired rowids. None when ``f`` needs the records table (other
        conditions, many buckets, many expired records)."""
        if not f.is_visibility_only():
            return None
        if f.buckets is not None and len(f.buckets) > MAX_MATCH_BUCKETS:
            return None
        expired: list[int] = []
        if not f.include_expired:
            expired = [
                r[0]
                for r in conn.execute(
                    "SELECT rowid FROM records WHERE expires_at IS NOT NULL AND expires_at <= ? "
                    "LIMIT ?",
                    [ts(f.now or utcnow()), MAX_EXPIRED_SET + 1],
                )
            ]
            if len(expired) > MAX_EXPIRED_SET:
                return None
        want = None if limit is None else limit + len(expired)
        rows = self._from_postings(terms, f, want, conn)
        if rows is None:
            sql = (f"SELECT rowid AS r, {_bm25_expr(self.weights)} AS s FROM records_fts "
                   "WHERE records_fts MATCH ?")  # fmt: skip
            params: list = [self._match(expr, f)]
            if want is not None:
                sql += " ORDER BY s LIMIT ?"
                params.append(want)
            rows = scored_rows(conn, sql, params)
        if expired:
            rows = rows[~np.isin(rows[:, 0], np.asarray(expired, dtype=np.float64))]
        return rows

    def _from_postings(
        self, terms: list[str] | None, f: RecordFilter, limit: int | None, conn: sqlite3.Connection
    ) -> np.ndarray | None:
        """The same rows from the in-memory postings (:mod:`retrieval.fulltext.postings`), or None
        when they are off, not built yet, or do not cover the query."""
        if terms is None or self.postings is None:
            return None
        if not self.postings.ensure(conn, self._doc_count(conn)):
            return None
        tokens = None if f.buckets is None else [bucket_token(b) for b in f.buckets]
        return self.postings.rows(terms, tokens, limit)

    def _joined(
        self, expr: str, f: RecordFilter, limit: int | None, conn: sqlite3.Connection
    ) -> list[tuple[str, float]]:
        """(record id, FTS5 bm25) rows of the matching records satisfying ``f``, through the
        records table (any filter), best first when ``limit`` is given."""
        where, params = where_clause(f)
        sql = (
            f"SELECT r.id, {_bm25_expr(self.weights)} AS s FROM records_fts CROSS JOIN records r "
            f"ON r.rowid = records_fts.rowid WHERE records_fts MATCH ? AND {where}"
        )
        # CROSS JOIN keeps FTS5 as the outer loop. With a plain JOIN and a one-bucket filter,
        # SQLite walked the bucket's records and ran the MATCH once per record (the score_ids
        # pattern), e.g. 5183 MATCHes per query on SciFact (docs/benchmarks.md).
        params = [self._match(expr, f), *params]
        if limit is not None:
            sql += " ORDER BY s LIMIT ?"
            params.append(limit)
        return conn.execute(sql, params).fetchall()

    def search(
        self, query: str, f: RecordFilter, limit: int, conn: sqlite3.Connection | None = None,
        terms: list[str] | None = None,
    ) -> list[tuple[str, float]]:  # fmt: skip
        """Top ``limit`` (record id, bm25) pairs among the records that satisfy ``f``.
        ``terms``: the query's terms when the caller chose them (a long query's views)."""
        conn = conn or self.store.reader
        terms = self.terms(query, conn) if terms is None else terms
        if not terms or limit <= 0 or f.buckets == []:
            return []
        expr = fts_or_query(terms)
        try:
            seq = changelog.head(conn)  # before the rows are scored (see ids_of)
            fast = self._fts_only(expr, f, limit, conn, terms)
            if fast is not None:
                top = [(int(r), -float(s)) for r, s in fast[:limit]]
                ids = ids_of(conn, [r for r, _ in top], seq)
                return [(ids[r], s) for r, s in top if r in ids]
            rows = self._joined(expr, f, limit, conn)
        except sqlite3.OperationalError:
            return []
        return [(r[0], -float(r[1])) for r in rows]

    def search_all(
        self, query: str, f: RecordFilter, limit: int, conn: sqlite3.Connection | None = None,
        terms: list[str] | None = None,
    ) -> tuple[list[tuple[str, float]], Mapping[str, float]]:  # fmt: skip
        """(top ``limit`` pairs as :meth:`search` gives them, {id: bm25} of *every* record that
        satisfies ``f`` and contains a query term). FTS5 computes bm25 for every matching row
        anyway; returning them all costs a few ms more than ``ORDER BY ... LIMIT`` and makes the
        lexical score of any other candidate a lookup (0.0 when absent, as in
        :meth:`score_ids`), where ``score_ids`` re-runs the MATCH once per id (measured at 100k
        records: ~24 ms CPU per 100 ids, docs/benchmarks.md "Scale"). With a visibility-only
        filter the mapping is a :class:`RowidScores` (no records read per matching row)."""
        conn = conn or self.store.reader
        terms = self.terms(query, conn) if terms is None else terms
        if not terms or limit <= 0 or f.buckets == []:
            return [], {}
        expr = fts_or_query(terms)
        try:
            seq = changelog.head(conn)  # before the rows are scored: see RowidScores
            fast = self._fts_only(expr, f, None, conn, terms)
            if fast is None:
                rows = self._joined(expr, f, None, conn)
                keys = [r[0] for r in rows]
                scores = -np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows))
            else:
                keys = fast[:, 0].astype(np.int64)
                scores = -fast[:, 1]
        except sqlite3.OperationalError:
            return [], {}
        if not len(keys):
            return [], {}
        if len(keys) > limit:
            top = np.argpartition(-scores, limit - 1)[:limit]
        else:
            top = np.arange(len(keys))
        top = top[np.argsort(-scores[top], kind="stable")]
        if fast is None:
            values = scores.tolist()
            return [(keys[i], values[i]) for i in top], dict(zip(keys, values, strict=True))
        if conn.in_transaction:  # (a writer's own view: its later lookups could not share it)
            every = ids_of(conn, keys.tolist())
            values = scores.tolist()
            pairs = [(every[r], values[i]) for i in top.tolist() if (r := int(keys[i])) in every]
            rows = zip(keys.tolist(), values, strict=True)
            return pairs, {every[r]: v for r, v in rows if r in every}
        top_rowids = keys[top].tolist()
        ids = ids_of(conn, top_rowids, seq)
        pairs = [(ids[r], float(v)) for r, v in zip(top_rowids, scores[top].tolist(), strict=True)
                 if r in ids]  # fmt: skip
        return pairs, RowidScores(self.store, keys, scores, {v: k for k, v in ids.items()}, seq)

    def score_ids(
        self, query: str, ids: Sequence[str], conn: sqlite3.Connection | None = None,
        terms: list[str] | None = None,
    ) -> dict[str, float]:  # fmt: skip
        """bm25 of specific records (0.0 where no query term occurs): used to complete the
        lexical side of candidates found only by the vector retriever."""
        expr = self.match_expr(query) if terms is None else (fts_or_query(terms) if terms else None)
        if expr is None or not ids:
            return {}
        bm25 = _bm25_expr(self.weights)
        conn = conn or self.store.reader
        out: dict[str, float] = {}
        ids = list(ids)
        match = self._match(expr)
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            sql = (
                f"SELECT r.id, {bm25} FROM records_fts JOIN records r ON r.rowid = records_fts.rowid "
                f"WHERE records_fts MATCH ? AND r.id IN ({','.join('?' * len(part))})"
            )
            try:
                out.update((r[0], -float(r[1])) for r in conn.execute(sql, [match, *part]))
            except sqlite3.OperationalError:
                return out
        return out
