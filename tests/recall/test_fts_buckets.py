"""Schema v5: the indexed ``bucket`` column of ``records_fts`` and the FTS5-only lexical path.

- migration from v4 (3-column FTS table) rebuilds the FTS rows with bucket tokens, in one
  transaction (a failure leaves the v4 store as it was);
- the bucket clause in the MATCH and the FTS5-only path give the same answers as the records
  join (visibility, expiry, other filters, many buckets);
- bucket tokens are exact (no hash) and cannot leak rows or scores through a query term.
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta

import pytest

from retrieval.fulltext import lexical as lexical_mod
from retrieval.fulltext.lexical import LexicalIndex
from retrieval.fulltext.scores import RowidScores
from retrieval.records import RecordFilter, Scope, utcnow
from retrieval.storage import schema
from retrieval.storage.buckets import bucket_token
from retrieval.storage.store import SQLiteStore

V4_FTS = (
    "CREATE VIRTUAL TABLE records_fts USING fts5("
    f"content, context, terms, tokenize='{schema.FTS_TOKENIZER}')"
)


def _downgrade_to_v4(path) -> None:
    """Turn a current store into the v4 layout (3-column FTS table, same rows)."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("BEGIN")
    conn.execute(
        "CREATE TABLE fts_copy AS SELECT rowid AS rid, content, context, terms FROM records_fts"
    )
    conn.execute("DROP TABLE records_fts")
    conn.execute(V4_FTS)
    conn.execute(
        "INSERT INTO records_fts(rowid, content, context, terms) "
        "SELECT rid, content, context, terms FROM fts_copy"
    )
    conn.execute("DROP TABLE fts_copy")
    # what later versions added that does not re-run as it is (v5-v7 use IF NOT EXISTS)
    conn.execute("DROP TABLE record_revisions")
    conn.execute("ALTER TABLE entities DROP COLUMN revision")
    conn.execute("PRAGMA user_version = 4")
    conn.execute("COMMIT")
    conn.close()


def _fts_columns(path) -> list[str]:
    conn = sqlite3.connect(str(path))
    try:
        return [r[1] for r in conn.execute("PRAGMA table_info(records_fts)")]
    finally:
        conn.close()


def _fill(store: SQLiteStore, make_record) -> list:
    recs = [
        make_record("alpha beta shared words", scope=Scope.private),
        make_record("alpha gamma NullPointerException", scope=Scope.team, tags=["t1"]),
        make_record("beta delta public words", scope=Scope.public),
        make_record("alpha epsilon other agent", scope=Scope.private, agent_id="other"),
    ]
    with store.transaction() as conn:
        store.insert(conn, recs)
    return recs


def test_bucket_token_is_exact_one_token_and_stem_proof():
    buckets = ["public", "team/p", "private/p/a", "private/p/a2", "personal/ä", "x" * 200]
    toks = [bucket_token(b) for b in buckets]
    assert len(set(toks)) == len(toks)
    assert all(t.startswith("bkt") and t[3:].isdigit() for t in toks)
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE v USING fts5(x, tokenize='{schema.FTS_TOKENIZER}')")
    conn.execute("CREATE VIRTUAL TABLE vv USING fts5vocab(v, 'row')")
    conn.executemany("INSERT INTO v(x) VALUES (?)", [(t,) for t in toks])
    assert sorted(r[0] for r in conn.execute("SELECT term FROM vv")) == sorted(toks)


def test_migration_from_v4_rebuilds_fts_with_buckets(tmp_path, make_record):
    path = tmp_path / "db.sqlite3"
    store = SQLiteStore(path)
    recs = _fill(store, make_record)
    before = dict(
        (r[0], tuple(r[1:]))
        for r in store.reader.execute("SELECT rowid, content, context, terms FROM records_fts")
    )
    store.close()
    _downgrade_to_v4(path)
    assert _fts_columns(path) == ["content", "context", "terms"]

    store = SQLiteStore(path)  # migrates 4 -> 5
    try:
        assert store.reader.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        assert _fts_columns(path) == ["content", "context", "terms", "bucket"]
        rows = store.reader.execute(
            "SELECT f.rowid, f.content, f.context, f.terms, f.bucket, r.bucket "
            "FROM records_fts f JOIN records r ON r.rowid = f.rowid"
        ).fetchall()
        assert {r[0]: tuple(r[1:4]) for r in rows} == before
        assert all(r[4] == bucket_token(r[5]) for r in rows)
        assert store.integrity_check() == []
        names = {r[0] for r in store.reader.execute("SELECT name FROM sqlite_master")}
        assert "records_fts_v5" not in names
        # ranking works on the migrated table, buckets included
        lex = LexicalIndex(store)
        f = RecordFilter(buckets=[recs[0].bucket, recs[2].bucket])
        got = lex.search("alpha beta", f, 10)
        assert {rid for rid, _ in got} == {recs[0].id, recs[2].id}
        # and new writes index their bucket
        rec = make_record("alpha after migration", scope=Scope.public)
        with store.transaction() as conn:
            store.insert(conn, [rec])
        assert rec.id in {rid for rid, _ in lex.search("migration", f, 10)}
    finally:
        store.close()


def test_failed_migration_leaves_v4_untouched(tmp_path, make_record, monkeypatch):
    path = tmp_path / "db.sqlite3"
    store = SQLiteStore(path)
    _fill(store, make_record)
    store.close()
    _downgrade_to_v4(path)
    broken = [*schema.MIGRATIONS[4], "SELECT no_such_function()"]
    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS[:4], broken])
    with pytest.raises(sqlite3.OperationalError):
        SQLiteStore(path)
    conn = sqlite3.connect(str(path))
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 4
        assert _fts_columns(path) == ["content", "context", "terms"]
        assert conn.execute("SELECT count(*) FROM records_fts").fetchone()[0] == 4
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert "records_fts_v5" not in names
    finally:
        conn.close()
    monkeypatch.undo()
    SQLiteStore(path).close()  # a fixed version migrates the same file
    assert _fts_columns(path) == ["content", "context", "terms", "bucket"]


def test_replace_moves_the_bucket_token(engine, make_record):
    (rec,) = engine.add([make_record("zebra crossing", scope=Scope.private)])
    old = rec.bucket
    rec.scope = Scope.public
    engine.update(rec)
    lex = engine.lexical
    assert lex.search("zebra", RecordFilter(buckets=[old]), 5) == []
    assert [r for r, _ in lex.search("zebra", RecordFilter(buckets=["public"]), 5)] == [rec.id]


def _join_only(monkeypatch):
    """Force the records-join path (the reference the FTS5-only path must equal)."""
    monkeypatch.setattr(LexicalIndex, "_fts_only", lambda self, *a, **k: None)


FILTERS = [
    RecordFilter(),
    RecordFilter(buckets=["private/p/a0", "public"]),
    RecordFilter(buckets=["team/p"]),
    RecordFilter(buckets=["nobody"]),
    RecordFilter(buckets=["private/p/a0", "public"], min_priority=1),
    RecordFilter(buckets=["public"], include_expired=True),
]


@pytest.mark.parametrize("fi", range(len(FILTERS)))
def test_fts_only_path_equals_the_join(engine, make_record, monkeypatch, fi):
    now = utcnow()
    recs = []
    for i in range(40):
        scope = [Scope.private, Scope.team, Scope.public][i % 3]
        recs.append(
            make_record(
                f"common word{i % 7} extra{i % 5} " + ("rare" if i % 9 == 0 else ""),
                scope=scope,
                agent_id=f"a{i % 2}",
                project_id="p",
                # every 4th record expired an hour ago
                expires_at=now - timedelta(hours=1) if i % 4 == 0 else None,
                priority=i % 3,
            )
        )
    engine.add(recs)
    f = FILTERS[fi]
    lex = engine.lexical
    q = "common word3 rare extra1"
    fast_top = lex.search(q, f, 7)
    fast_top_all, fast_every = lex.search_all(q, f, 7)
    fast_every = dict(fast_every)
    with monkeypatch.context() as m:
        _join_only(m)
        ref_top = lex.search(q, f, 7)
        ref_top_all, ref_every = lex.search_all(q, f, 7)
    assert fast_every.keys() == ref_every.keys()
    for rid, s in ref_every.items():
        assert fast_every[rid] == pytest.approx(s)
    for fast, ref in ((fast_top, ref_top), (fast_top_all, ref_top_all)):
        assert [s for _, s in fast] == pytest.approx([s for _, s in ref])
    visible = {r.id for r in engine.store.list(f)}
    assert set(fast_every) <= visible
    expired = {r.id for r in recs if r.expires_at is not None}
    assert bool(fast_every) == (f.buckets != ["nobody"])
    if not f.include_expired:
        assert not expired & set(fast_every)
    else:
        assert expired & set(fast_every)


def test_many_buckets_and_many_expired_fall_back_to_the_join(engine, make_record, monkeypatch):
    engine.add([make_record(f"word shared {i}", agent_id=f"a{i}") for i in range(5)])
    lex = engine.lexical
    calls = []
    real = LexicalIndex._fts_only

    def spy(self, expr, f, limit, conn, terms=None):
        out = real(self, expr, f, limit, conn, terms)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(LexicalIndex, "_fts_only", spy)
    every_bucket = sorted(engine.store.all_buckets())
    f = RecordFilter(buckets=every_bucket + [f"b{i}" for i in range(20)])
    assert len(lex.search("shared", f, 10)) == 5
    monkeypatch.setattr(lexical_mod, "MAX_EXPIRED_SET", -1)
    assert len(lex.search("shared", RecordFilter(buckets=every_bucket), 10)) == 5
    assert calls == [False, False]
    assert lex._match('"x"', f) == '"x"'  # > MAX_MATCH_BUCKETS: no bucket clause


def test_a_bucket_token_as_query_term_reveals_nothing(engine, make_record):
    mine = make_record("visible text", scope=Scope.private)
    other = make_record("secret text", scope=Scope.private, agent_id="other")
    engine.add([mine, other])
    f = RecordFilter(buckets=[mine.bucket])
    q = f"{bucket_token(other.bucket)} {bucket_token(mine.bucket)}"
    top, every = engine.lexical.search_all(q, f, 10)
    assert other.id not in dict(every)
    assert all(s == 0.0 for _, s in top)  # the bucket column weighs 0: no lexical match
    hits = engine.search(q, f, k=10)
    assert {h.record.id for h in hits} <= {mine.id}
    assert all(h.explanation.lexical_rank is None for h in hits)


def test_rowid_scores_mapping(engine, make_record):
    recs = engine.add([make_record(f"alpha {w}") for w in ("one", "two", "three")])
    f = RecordFilter(buckets=[recs[0].bucket])
    top, every = engine.lexical.search_all("alpha two", f, 1)
    assert isinstance(every, RowidScores)
    assert len(every) == 3 and set(every) == {r.id for r in recs}
    assert top[0][0] == recs[1].id and every[recs[1].id] == pytest.approx(top[0][1])
    assert every.get("no-such-id", 0.0) == 0.0 and "no-such-id" not in every


def test_rowid_scores_resolve_in_one_query(engine, make_record):
    recs = engine.add([make_record(f"alpha {w}") for w in ("one", "two", "three", "four")])
    f = RecordFilter(buckets=[recs[0].bucket])
    _, every = engine.lexical.search_all("alpha", f, 1)
    every.resolve([r.id for r in recs] + ["no-such-id"])
    conn = engine.store.reader
    seen = []
    conn.set_trace_callback(seen.append)
    try:
        got = {r.id: every.get(r.id) for r in recs}
        assert every.get("no-such-id", 0.0) == 0.0
    finally:
        conn.set_trace_callback(None)
    assert seen == [] and all(v is not None for v in got.values())
