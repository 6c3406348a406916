"""Lexical retrieval: SQLite FTS5 ``bm25()`` over content, context and extra terms.

Okapi BM25 as FTS5 computes it (k1 = 1.2, b = 0.75), per column with weights
:data:`COLUMN_WEIGHTS` (content, context, identifier parts/tags/names). FTS5 returns lower-is-better
values; we negate them so every score in the engine is higher-is-better.
Queries are OR-ed content terms (stopwords removed, identifiers split, see ``analyzer``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

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
    ) -> None:
        self.store = store
        self.weights = tuple(weights)
        self.max_terms = max_terms

    def match_expr(self, query: str) -> str | None:
        terms = query_terms(query, self.max_terms)
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
            f"SELECT r.id, {bm25} AS s FROM records_fts JOIN records r ON r.rowid = records_fts.rowid "
            f"WHERE records_fts MATCH ? AND {where} ORDER BY s LIMIT ?"
        )
        conn = conn or self.store.reader
        try:
            rows = conn.execute(sql, [expr, *params, limit]).fetchall()
        except sqlite3.OperationalError:
            return []
        return [(r[0], -float(r[1])) for r in rows]

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
