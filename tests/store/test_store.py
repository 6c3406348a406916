"""The canonical SQLite store: schema and migrations, transactions, writes, timestamps."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest

from retrieval.errors import NotFound, StoreUnavailable
from retrieval.records import Kind, RecordFilter, Scope, content_hash
from retrieval.storage import schema
from retrieval.storage.store import SQLITE_READERS, SQLiteStore, parse_ts, ts

TABLES = ("records", "records_fts", "record_tags", "embeddings", "changes", "vector_outbox")


def counts(path) -> dict[str, int]:
    """Row counts seen by an independent connection (only committed data)."""
    conn = sqlite3.connect(str(path))
    try:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
    finally:
        conn.close()


def fts_ids(store: SQLiteStore, word: str) -> list[str]:
    rows = store.reader.execute(
        "SELECT r.id FROM records_fts JOIN records r ON r.rowid = records_fts.rowid "
        "WHERE records_fts MATCH ?",
        (f'"{word}"',),
    ).fetchall()
    return [r[0] for r in rows]


pytestmark = pytest.mark.backends("sqlite", "postgres")


@pytest.fixture
def store(tmp_path, store_url):
    """The store; with PostgreSQL, one node's replica whose transactions run in PostgreSQL."""
    s = SQLiteStore(tmp_path / "db.sqlite3")
    cluster = None
    if store_url:
        from retrieval.pg.cluster import Cluster

        cluster = Cluster(store_url, s)
        cluster.start()
    yield s
    if cluster is not None:
        cluster.close()
    s.close()


def add(store: SQLiteStore, *records) -> list[int]:
    with store.transaction() as conn:
        return store.insert(conn, records)


# ---------------------------------------------------------------------- schema / migrations
def test_new_store_is_created_at_current_schema_version(store):
    assert schema.SCHEMA_VERSION == len(schema.MIGRATIONS)
    assert store.reader.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
    names = {r[0] for r in store.reader.execute("SELECT name FROM sqlite_master")}
    assert set(TABLES) | {"meta"} <= names


def test_reopening_does_not_migrate_again(tmp_path, make_record, monkeypatch):
    path = tmp_path / "db.sqlite3"
    first = SQLiteStore(path)
    rec = make_record("survives a reopen")
    add(first, rec)
    first.close()

    found: list[int] = []
    real_migrate = schema.migrate

    def spy(conn):
        found.append(real_migrate(conn))
        return found[-1]

    monkeypatch.setattr("retrieval.storage.store.migrate", spy)
    statements: list[str] = []
    again = SQLiteStore(path)
    again._writer.set_trace_callback(statements.append)
    try:
        assert found == [schema.SCHEMA_VERSION]  # the version on disk: nothing left to apply
        assert again.get_one(rec.id).content == "survives a reopen"
        assert again.reader.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        assert schema.migrate(again._writer) == schema.SCHEMA_VERSION  # must run no statement
        assert not [s for s in statements if s.lstrip().upper().startswith("CREATE")]
    finally:
        again.close()


def test_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "db.sqlite3"
    SQLiteStore(path).close()
    conn = sqlite3.connect(str(path))
    conn.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreUnavailable) as info:
        SQLiteStore(path)
    assert info.value.code == "store_unavailable"
    v = schema.SCHEMA_VERSION
    assert info.value.data == {"found": v + 1, "supported": v}


def test_engine_refuses_a_newer_schema(tmp_path, open_engine):
    open_engine().close()
    conn = sqlite3.connect(str(tmp_path / "store" / "pattern.sqlite3"))
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(StoreUnavailable):
        open_engine()


def test_wal_mode_is_on(store):
    for conn in (store._writer, store.reader):
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# ---------------------------------------------------------------------- transactions
def test_insert_writes_every_row_in_one_transaction(store, make_record):
    rec = make_record("alpha beta gamma", tags=["t1", "t2"])
    with store.transaction() as conn:
        (rowid,) = store.insert(conn, [rec])
        # another connection sees nothing before COMMIT ...
        assert counts(store.path) == dict.fromkeys(TABLES, 0)
    # ... and everything after it
    assert counts(store.path) == {
        "records": 1,
        "records_fts": 1,
        "record_tags": 2,
        "embeddings": 0,
        "changes": 1,
        "vector_outbox": 1,
    }
    change = store.reader.execute(
        "SELECT record_id, op, kind, bucket, revision FROM changes"
    ).fetchone()
    assert tuple(change) == (rec.id, "insert", "memory", rec.bucket, 1)
    outbox = store.outbox()
    assert [(r["record_id"], r["op"], r["bucket"]) for r in outbox] == [
        (rec.id, "insert", rec.bucket)
    ]
    tags = store.reader.execute("SELECT tag, record_rowid FROM record_tags ORDER BY tag").fetchall()
    assert [tuple(t) for t in tags] == [("t1", rowid), ("t2", rowid)]
    assert fts_ids(store, "gamma") == [rec.id]


def test_an_exception_inside_a_transaction_leaves_nothing(store, make_record):
    keep = make_record("the original text", tags=["old"])
    add(store, keep)
    with store.transaction() as conn:
        store.put_embeddings(conn, "m", [(keep.id, keep.content_hash, np.ones((1, 4)))])
    before = counts(store.path)
    outbox_before = [tuple(r) for r in store.outbox()]

    with pytest.raises(RuntimeError, match="boom"):
        with store.transaction() as conn:
            store.insert(conn, [make_record("a brand new record", tags=["new"])])
            store.replace(conn, keep.model_copy(update={"content": "rewritten", "metadata": {}}))
            store.delete(conn, [keep.id])
            raise RuntimeError("boom")

    assert counts(store.path) == before
    assert [tuple(r) for r in store.outbox()] == outbox_before
    assert store.get_one(keep.id).content == "the original text"
    assert store.get_one(keep.id).tags == ["old"]
    assert fts_ids(store, "original") == [keep.id]
    assert fts_ids(store, "rewritten") == []
    assert store.integrity_check() == []
    # the writer is usable again afterwards
    add(store, make_record("after the failure"))
    assert counts(store.path)["records"] == 2


def test_a_failed_engine_batch_leaves_nothing(open_engine, make_record):
    eng = open_engine()  # no embedder: the batch is one SQLite transaction
    first = make_record("one")
    dup = make_record("two", id=first.id)  # UNIQUE(id) fails on the second row
    with pytest.raises(sqlite3.IntegrityError):
        eng.add([first, dup])
    assert counts(eng.store.path) == dict.fromkeys(TABLES, 0)


# ---------------------------------------------------------------------- replace / delete
def test_replace_keeps_rowid_reindexes_and_drops_stale_embeddings(store, make_record):
    rec = make_record("apples and pears", tags=["fruit"])
    (rowid,) = add(store, rec)
    with store.transaction() as conn:
        store.put_embeddings(conn, "m", [(rec.id, rec.content_hash, np.ones((2, 4)))])
    assert counts(store.path)["embeddings"] == 2

    # metadata-only change: same content hash, embeddings stay
    with store.transaction() as conn:
        assert store.replace(conn, rec.model_copy(update={"metadata": {"tags": ["food"]}})) == rowid
    assert counts(store.path)["embeddings"] == 2
    assert store.embeddings([rec.id], "m")[rec.id].shape == (2, 4)
    assert store.get_one(rec.id).tags == ["food"]
    assert [r[0] for r in store.reader.execute("SELECT tag FROM record_tags")] == ["food"]

    # content change through model_copy (the usual way to edit a record): the copied
    # content_hash is stale, the store must notice anyway
    changed = rec.model_copy(update={"content": "bananas and kiwis", "revision": 2})
    with store.transaction() as conn:
        assert store.replace(conn, changed) == rowid
    row = store.reader.execute(
        "SELECT rowid, content_hash FROM records WHERE id=?", (rec.id,)
    ).fetchone()
    assert row[0] == rowid
    assert row[1] == content_hash("bananas and kiwis\x00")
    assert counts(store.path)["embeddings"] == 0
    assert store.embeddings([rec.id], "m") == {}
    assert fts_ids(store, "bananas") == [rec.id]
    assert fts_ids(store, "apples") == []
    assert counts(store.path)["records_fts"] == 1
    ops = [tuple(r) for r in store.reader.execute("SELECT op, revision FROM changes ORDER BY seq")]
    # every replacement bumps the revision (the store's, whatever the copy carried)
    assert ops == [("insert", 1), ("update", 2), ("update", 3)]
    assert store.integrity_check() == []


def test_replace_of_a_missing_record_raises_not_found(store, make_record):
    with pytest.raises(NotFound) as info:
        with store.transaction() as conn:
            store.replace(conn, make_record("nobody"))
    assert info.value.code == "not_found"
    assert counts(store.path) == dict.fromkeys(TABLES, 0)


def test_delete_removes_fts_tags_embeddings_and_logs_a_change(store, make_record):
    gone, stays = make_record("delete me please", tags=["x"]), make_record("keep me", tags=["x"])
    add(store, gone, stays)
    with store.transaction() as conn:
        store.put_embeddings(
            conn, "m", [(r.id, r.content_hash, np.ones((3, 4))) for r in (gone, stays)]
        )
    with store.transaction() as conn:
        deleted = store.delete(conn, [gone.id, "no-such-id"])
    assert [r.id for r in deleted] == [gone.id]
    assert deleted[0].content == "delete me please"
    assert counts(store.path) == {
        "records": 1,
        "records_fts": 1,
        "record_tags": 1,
        "embeddings": 3,
        "changes": 3,
        "vector_outbox": 3,
    }
    assert fts_ids(store, "delete") == []
    assert store.get([gone.id, stays.id]).keys() == {stays.id}
    last = store.reader.execute(
        "SELECT record_id, op, bucket FROM changes ORDER BY seq DESC"
    ).fetchone()
    assert tuple(last) == (gone.id, "delete", gone.bucket)
    assert tuple(store.outbox()[-1])[1:] == (gone.id, "delete", gone.bucket)
    with pytest.raises(NotFound):
        store.get_one(gone.id)
    assert store.integrity_check() == []


def test_a_record_round_trips_every_field(store, make_record):
    rec = make_record(
        "full record",
        kind=Kind.observation,
        scope=Scope.team,
        category="architecture",
        context="said in the design review",
        tags=["a", "b"],
        priority=3,
        metadata={"source": "unit", "relatedTo": ["x"]},
        entity_name="FooService",
        expires_at=datetime(2030, 5, 6, 7, 8, 9, 123456, tzinfo=UTC),
        revision=4,
    )
    add(store, rec)
    back = store.get_one(rec.id)
    assert back.model_dump() == rec.model_dump()
    assert back.bucket == f"team/{rec.project_id}"


# ---------------------------------------------------------------------- timestamps
def test_timestamps_round_trip_in_utc(store, make_record):
    plus2 = timezone(timedelta(hours=2))
    created = datetime(2024, 3, 10, 12, 30, 15, 654321, tzinfo=plus2)
    naive = datetime(2024, 3, 11, 8, 0, 0)  # naive means UTC
    rec = make_record("when", created_at=created, updated_at=naive, expires_at=None)
    add(store, rec)
    back = store.get_one(rec.id)
    assert back.created_at == created
    assert back.created_at.utcoffset() == timedelta(0)
    assert back.created_at.hour == 10  # 12:30 at +02:00 is 10:30 UTC
    assert back.created_at.microsecond == 654321
    assert back.updated_at == naive.replace(tzinfo=UTC)
    assert back.expires_at is None
    stored = store.reader.execute("SELECT created_at FROM records").fetchone()[0]
    assert stored == "2024-03-10T10:30:15.654321Z"


def test_timestamp_text_sorts_like_time():
    a = datetime(2024, 1, 1, 23, 59, tzinfo=timezone(timedelta(hours=-5)))  # 04:59 next day UTC
    b = datetime(2024, 1, 2, 3, 0, tzinfo=UTC)
    assert a > b and ts(a) > ts(b)
    assert parse_ts(ts(a)) == a
    assert ts(None) is None and parse_ts(None) is None


def test_timestamp_text_reads_back_exactly_and_a_damaged_one_is_refused():
    for dt in (datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=UTC),
               datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 1, 2, 3, 4, tzinfo=UTC)):  # fmt: skip
        back = parse_ts(ts(dt))
        assert back == dt and back.tzinfo == UTC
    assert parse_ts("999-01-02T03:04:05.000006Z") == datetime(999, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
    for bad in ("2024-13-06T07:08:09.123456Z", "2024-05-06T07:08:09.12345xZ",
                "2024-05-06T24:00:00.000000Z", "2024-05-06 07:08:09.123456Z",
                "2024-05-06T07:08:09.123456+", "2024-05-06T07:08:09Z", "yesterday"):  # fmt: skip
        with pytest.raises(ValueError):
            parse_ts(bad)


# ---------------------------------------------------------------------- checks and reads
def test_integrity_check_is_clean_and_notices_a_missing_fts_row(store, make_record):
    recs = [make_record(f"record {i}") for i in range(5)]
    add(store, *recs)
    assert store.integrity_check() == []
    store._writer.execute("DELETE FROM records_fts WHERE rowid = (SELECT min(rowid) FROM records)")
    assert store.integrity_check() == ["records and FTS rows differ by 1"]


def test_list_and_count_apply_the_filter(store, make_record):
    recs = [
        make_record("a", category="recent"),
        make_record("b", category="longterm"),
        make_record("c", category="longterm", scope=Scope.team),
    ]
    add(store, *recs)
    f = RecordFilter(categories=["longterm"])
    assert [r.id for r in store.list(f)] == [recs[2].id, recs[1].id]  # newest update first
    assert store.count(f) == 2
    assert store.count(RecordFilter(), group_by="scope") == {"private": 2, "team": 1}
    assert store.filter_ids(f, [recs[0].id, recs[1].id, "nope"]) == [recs[1].id]


def test_embeddings_are_returned_only_while_current(store, make_record):
    rec = make_record("vectors")
    add(store, rec)
    vec = np.arange(8, dtype=np.float32).reshape(2, 4)
    with store.transaction() as conn:
        store.put_embeddings(conn, "m", [(rec.id, rec.content_hash, vec)])
        store.put_embeddings(conn, "other", [(rec.id, "stale-hash", vec)])
    got = store.embeddings([rec.id], "m")
    np.testing.assert_array_equal(got[rec.id], vec)
    assert store.embeddings([rec.id], "other") == {}
    assert store.get_one(rec.id).embedding_model == "other"


# ---------------------------------------------------------------------- reader connections
def open_fds() -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
    return sorted(out)


@pytest.mark.backends("sqlite")  # the reader pool itself (a follower holds one more)
def test_short_lived_threads_do_not_leak_reader_connections(store, make_record):
    """MCP tool calls run on short-lived worker threads: 1,000 reads from threads that end
    leave at most the pool's idle connections open, and the descriptor count stays flat."""
    rec = make_record("read me from many threads")
    add(store, rec)
    seen: list[str] = []

    def read(together: threading.Barrier) -> None:
        together.wait()  # every thread of a wave reads while the others are alive
        seen.append(store.get_one(rec.id).content)
        together.wait()

    def wave(n: int) -> None:
        together = threading.Barrier(n)
        threads = [threading.Thread(target=read, args=(together,)) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    wave(10)  # warm up: the pool's idle connections exist from here on (and SQLite keeps the
    fds = open_fds()  # descriptors of closed connections for reuse while others are open)
    for _ in range(99):
        wave(10)
    assert len(seen) == 1000 and set(seen) == {"read me from many threads"}
    assert Counter(open_fds()) - Counter(fds) == Counter()  # nothing more is open
    assert store.open_readers <= SQLITE_READERS


@pytest.mark.backends("sqlite")  # the reader pool itself (a follower holds one more)
def test_a_reader_lent_to_a_live_thread_is_its_own(store, make_record):
    """While a thread lives it keeps its connection; concurrent threads get distinct ones."""
    add(store, make_record("x"))
    got: list[int] = []
    barrier = threading.Barrier(3)

    def hold() -> None:
        mine = store.reader
        got.append(id(mine))
        barrier.wait()  # all three alive at once
        assert store.reader is mine

    threads = [threading.Thread(target=hold) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 3
    assert store.open_readers <= max(SQLITE_READERS, 1)


def test_closing_the_store_closes_every_reader(tmp_path, make_record):
    s = SQLiteStore(tmp_path / "db.sqlite3")
    add(s, make_record("y"))
    ready, release = threading.Event(), threading.Event()

    def hold() -> None:
        s.reader.execute("SELECT 1").fetchone()
        ready.set()
        release.wait(5)

    t = threading.Thread(target=hold)
    t.start()
    ready.wait(5)
    s.reader.execute("SELECT 1").fetchone()
    assert s.open_readers == 2
    s.close()
    assert s.open_readers == 0
    release.set()
    t.join()
    assert s.open_readers == 0
    with pytest.raises(StoreUnavailable):
        s.reader  # noqa: B018 - a closed store lends nothing
