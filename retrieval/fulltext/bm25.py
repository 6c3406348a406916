"""FTS5's bm25() computed in numpy from an in-memory copy of the FTS5 postings.

FTS5 evaluates ``bm25()`` row by row for every row that matches any OR-ed query term (~2 us of
SQLite VM per row plus the per-row auxiliary-function call); at 100k records a filtered recall
scored ~4.7k rows in 13-20 ms (docs/benchmarks.md "Scale"). The same scores come out of a few
vector operations over each query term's postings, so large stores keep a copy of the postings
here and rank with it; small stores, filters beyond visibility, and phrases of several tokens stay
on FTS5. Tokens are FTS5's own (read through ``fts5vocab``), so stemming is identical.

The formula is FTS5's (ext/fts5/fts5_aux.c, ``fts5Bm25Function``), reproduced exactly:

    idf(q)  = ln((N - n(q) + 0.5) / (n(q) + 0.5)),  floored at 1e-6
    f(q, D) = sum over the instances of q in D of the weight of their column
    score   = sum_q idf(q) * f(q, D) * (k1 + 1) / (f(q, D) + k1 * (1 - b + b * |D| / avgdl))

with N the number of rows, n(q) the rows containing q in any column, |D| the row's tokens in all
columns and avgdl the mean of |D|; k1 = 1.2, b = 0.75. FTS5 returns -score.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence

import numpy as np

from retrieval.storage.schema import FTS_TOKENIZER

K1, B = 1.2, 0.75


def idf(n_rows: int, df: np.ndarray | int) -> np.ndarray:
    """ln((N - n + 0.5) / (n + 0.5)), floored at 1e-6 as FTS5 does (never negative)."""
    v = np.log((n_rows - np.asarray(df, dtype=np.float64) + 0.5) / (np.asarray(df) + 0.5))
    return np.where(v <= 0.0, 1e-6, v)


def term_scores(idf_q: float, freq: np.ndarray, dl: np.ndarray, avgdl: float) -> np.ndarray:
    """One term's bm25 contribution for rows with weighted frequency ``freq`` and length ``dl``."""
    return idf_q * (freq * (K1 + 1.0)) / (freq + K1 * (1.0 - B + B * dl / avgdl))


class Tokenizer:
    """Query terms -> FTS5 tokens, through a private in-memory FTS5 table with the store's
    tokenizer (so porter stemming and diacritics folding are exactly the index's)."""

    def __init__(self) -> None:
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        self._conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize='{FTS_TOKENIZER}')")
        self._conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        self._cache: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()

    def tokens(self, terms: Sequence[str]) -> list[tuple[str, ...]]:
        with self._lock:
            new = [t for t in dict.fromkeys(terms) if t not in self._cache]
            if new:
                conn = self._conn
                conn.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)", enumerate(new, 1))
                got: dict[int, list[str]] = {}
                for term, doc in conn.execute("SELECT term, doc FROM v ORDER BY doc, offset"):
                    got.setdefault(doc, []).append(term)
                conn.execute("DELETE FROM t")
                if len(self._cache) > 100_000:
                    self._cache.clear()
                for i, t in enumerate(new, 1):
                    self._cache[t] = tuple(got.get(i, ()))
            return [self._cache[t] for t in terms]

    def columns(self, rows: Sequence[tuple], n_cols: int) -> list[list[tuple[int, int, str]]]:
        """For each row of ``n_cols`` texts, its (column, offset, token) instances."""
        with self._lock:
            conn = self._conn
            conn.execute("DROP TABLE IF EXISTS d")
            cols = ", ".join(f"c{i}" for i in range(n_cols))
            conn.execute(f"CREATE VIRTUAL TABLE d USING fts5({cols}, tokenize='{FTS_TOKENIZER}')")
            conn.execute("CREATE VIRTUAL TABLE temp.dv USING fts5vocab(main, d, 'instance')")
            marks = ",".join("?" * n_cols)
            conn.executemany(
                f"INSERT INTO d(rowid, {cols}) VALUES (?, {marks})",
                [(i, *r) for i, r in enumerate(rows)],
            )
            out: list[list[tuple[int, int, str]]] = [[] for _ in rows]
            for term, doc, col, off in conn.execute("SELECT term, doc, col, offset FROM dv"):
                out[doc].append((int(col[1:]), off, term))
            conn.execute("DROP TABLE temp.dv")
            conn.execute("DROP TABLE d")
            return out
