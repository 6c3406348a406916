"""Reads that return many rows are made in one SQLite step (a cursor gives the GIL up and takes
it back at every row: beside a thread running Python, each row waited up to the switch
interval). The rows read at once are the rows read one by one, in the same order, to the bit."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.fulltext import lexical
from retrieval.fulltext.lexical import _bm25_expr, printf_exact, scored_rows
from retrieval.records import Record, RecordFilter, Scope
from retrieval.vector.exact_scan import _allowed

WORDS = [f"w{i}" for i in range(40)] + ["deploy", "retry", "cache", "build"]


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    rng = random.Random(7)
    eng = Engine(tmp_path_factory.mktemp("rows") / "store", HashEmbedder())
    eng.add([Record(project_id="p", agent_id=f"a{i % 3}", scope=Scope.team if i % 2 else Scope.private,
                    content=" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 30))))
             for i in range(400)])  # fmt: skip
    yield eng
    eng.close()


def one_by_one(conn, sql, params) -> np.ndarray:
    return np.array(conn.execute(sql, params).fetchall(), dtype=np.float64).reshape(-1, 2)


def fts(engine, limit):
    sql = (f"SELECT rowid AS r, {_bm25_expr(engine.ranker.lexical.weights)} AS s "
           "FROM records_fts WHERE records_fts MATCH ?")  # fmt: skip
    return sql + (" ORDER BY s LIMIT ?" if limit is not None else "")


def same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.tobytes() == b.tobytes()


@settings(max_examples=150, deadline=None)
@given(terms=st.lists(st.sampled_from(WORDS + ["absent"]), min_size=1, max_size=4),
       limit=st.one_of(st.none(), st.integers(1, 500)))  # fmt: skip
def test_the_scores_read_at_once_are_the_scores_read_row_by_row(engine, terms, limit):
    conn = engine.store.reader
    sql, params = fts(engine, limit), [" OR ".join(terms), *([limit] if limit else [])]
    assert same(scored_rows(conn, sql, params), one_by_one(conn, sql, params))


def test_this_sqlite_prints_bm25_scores_exactly(engine):
    """Where it does not (another SQLite, another platform), every read is row by row: the
    test above still holds, this one says the rows are not read at once there."""
    assert printf_exact(engine.store.reader)


def test_a_zero_score_keeps_its_sign(engine):
    """A term found only in the bucket column (weight 0) scores -0.0 in FTS5's bm25; SQLite
    prints it as 0.0."""
    from retrieval.storage.buckets import bucket_token

    conn = engine.store.reader
    token = bucket_token(engine.store.get_one(conn.execute(
        "SELECT id FROM records LIMIT 1").fetchone()[0]).bucket)  # fmt: skip
    sql, params = fts(engine, None), [f'"{token}"']
    got, expected = scored_rows(conn, sql, params), one_by_one(conn, sql, params)
    assert len(got) and same(got, expected) and np.signbit(got[:, 1]).all()


def test_without_an_exact_printf_the_rows_are_read_one_by_one(engine, monkeypatch):
    conn = engine.store.reader
    sql, params = fts(engine, 20), ["deploy OR cache", 20]
    expected = one_by_one(conn, sql, params)
    monkeypatch.setattr(lexical, "_PRINTF_EXACT", [False])
    assert same(scored_rows(conn, sql, params), expected) and len(expected) == 20


def test_a_null_score_is_read_as_sqlite_gives_it(engine):
    conn = engine.store.reader
    sql = "SELECT rowid AS r, iif(rowid % 2, NULL, -1.5) AS s FROM records WHERE rowid <= 4"
    got = scored_rows(conn, sql, [])
    assert same(got, one_by_one(conn, sql, [])) and np.isnan(got[:, 1]).sum() == 2


@pytest.mark.parametrize("f", [
    RecordFilter(),
    RecordFilter(agent_ids=["a1"]),
    RecordFilter(scopes=[Scope.team]),
    RecordFilter(agent_ids=["nobody"]),
])  # fmt: skip
def test_the_exact_scan_reads_the_records_a_filter_lets_through_at_once(engine, f):
    from retrieval.storage.store import where_clause

    where, params = where_clause(f)
    rows = engine.store.reader.execute(f"SELECT r.rowid FROM records r WHERE {where}", params)
    expected = np.array([r[0] for r in rows], dtype=np.int64)
    got = _allowed(engine.store.reader, f)
    assert got.dtype == np.int64 and np.array_equal(np.sort(got), np.sort(expected))
