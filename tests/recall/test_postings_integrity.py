"""A postings file saved beside the store either matches the store exactly or is rebuilt:
a record deleted before the file was written never comes back (not even under a rowid that a
later record reuses), and a file that cannot be read (truncated, empty, garbage) is replaced by
a build from FTS5. Real SQLite in ``tmp_path``; every comparison is against FTS5 itself."""

from __future__ import annotations

import random

import pytest

from retrieval.fulltext.lexical import LexicalIndex
from retrieval.records import RecordFilter
from retrieval.storage.store import SQLiteStore
from tests.recall.test_postings import _assert_same, _records
from tests.recall.test_postings_file import _ready, _write


@pytest.fixture
def path(tmp_path):
    return tmp_path / "s" / "pattern.sqlite3"


def _hits(lx: LexicalIndex, query: str) -> list[str]:
    return [rid for rid, _ in lx.search(query, RecordFilter(), 10)]


def test_a_record_deleted_before_the_save_stays_deleted_after_restarts(path, make_record):
    rng = random.Random(11)
    store = SQLiteStore(path)
    recs = _records(make_record, rng, 40)
    ghost = make_record("zebra billing postgres migration plan")
    _write(store, [*recs, ghost])  # the newest: its rowid is the next one handed out
    lx = _ready(store)
    assert _hits(lx, "zebra billing postgres") == [ghost.id]
    (rowid,) = store.reader.execute("SELECT rowid FROM records WHERE id=?", (ghost.id,)).fetchone()
    with store.transaction() as conn:
        store.delete(conn, [ghost.id])
    lx.postings.close()  # a clean stop right after the delete, no search in between
    store.close()

    store = SQLiteStore(path)
    fts = LexicalIndex(store, postings_min=-1)
    lx = _ready(store)
    assert _hits(lx, "zebra billing postgres") == _hits(fts, "zebra billing postgres") == []
    standup = make_record("stand-up note: the team met at nine")
    _write(store, [standup])  # takes the deleted record's rowid
    assert (
        store.reader.execute("SELECT rowid FROM records WHERE id=?", (standup.id,)).fetchone()[0]
        == rowid
    )
    assert _hits(lx, "zebra billing postgres") == []
    assert lx.postings.n_alive == len(recs) + 1
    _assert_same(lx, fts, [*recs, standup])
    lx.postings.close()
    store.close()

    store = SQLiteStore(path)  # and after another restart
    lx = _ready(store)
    assert _hits(lx, "zebra billing postgres") == []
    _assert_same(lx, LexicalIndex(store, postings_min=-1), [*recs, standup])
    store.close()


@pytest.mark.parametrize("damage", ["truncated", "empty", "garbage"])
def test_a_damaged_postings_file_is_rebuilt_and_replaced(path, make_record, damage):
    rng = random.Random(13)
    store = SQLiteStore(path)
    recs = _records(make_record, rng, 60)
    _write(store, recs)
    first = _ready(store)
    first.postings.close()
    store.close()
    file = first.postings.file
    data = file.read_bytes()
    file.write_bytes({"truncated": data[: len(data) // 2], "empty": b"",
                      "garbage": b"PK\x03\x04" + bytes(200)}[damage])  # fmt: skip

    store = SQLiteStore(path)
    lx = _ready(store)  # built from FTS5 instead
    assert lx.postings.state == "ready" and lx.postings.n_alive == len(recs)
    assert "rebuilt" in lx.postings.file_problem
    _assert_same(lx, LexicalIndex(store, postings_min=-1), recs)
    store.close()

    store = SQLiteStore(path)  # the file was replaced: the next start loads it
    again = _ready(store)
    assert again.postings.file_problem is None and again.postings.n_alive == len(recs)
    assert again.postings._saved_seq == again.postings.seq  # loaded, not built and saved
    store.close()
