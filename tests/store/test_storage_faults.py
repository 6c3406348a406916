"""A failing disk, as the store's callers see it: SQLite's storage errors become
``StoreUnavailable`` naming the fault (a full disk, a read-only store, a damaged file), the
failed write leaves nothing behind, and the store remembers the failure for health until a
write succeeds. Real SQLite: ``max_page_count`` makes it full, ``query_only`` read-only."""

from __future__ import annotations

import errno
import shutil
import sqlite3

import pytest

from retrieval.errors import StoreUnavailable, low_disk, reason_of, storage_error
from retrieval.records import RecordFilter
from retrieval.storage.store import SQLiteStore


@pytest.fixture
def store(tmp_path):
    s = SQLiteStore(tmp_path / "pattern.sqlite3")
    yield s
    s.close()


def _insert(store: SQLiteStore, recs) -> None:
    with store.transaction() as conn:
        store.insert(conn, recs)


def test_a_full_disk_is_named_and_leaves_nothing(store, make_record):
    _insert(store, [make_record("kept before the disk filled")])
    (pages,) = store._writer.execute("PRAGMA page_count").fetchone()
    store._writer.execute(f"PRAGMA max_page_count={pages}")  # SQLITE_FULL from here on
    with pytest.raises(StoreUnavailable) as err:  # not "cannot rollback": SQLite rolled back
        _insert(store, [make_record("x" * 20_000) for _ in range(20)])
    assert err.value.message.startswith("the disk holding the store is full")
    assert err.value.message.endswith("nothing was written")
    assert err.value.data["reason"] == "disk_full" and err.value.data["path"] == store.path
    assert store.write_failure == err.value.message
    assert store.count(RecordFilter()) == 1
    store._writer.execute("PRAGMA max_page_count=1073741823")
    _insert(store, [make_record("written once space came back")])
    assert store.write_failure is None and store.count(RecordFilter()) == 2


def test_a_read_only_store_is_named(store, make_record):
    store._writer.execute("PRAGMA query_only=1")
    with pytest.raises(StoreUnavailable) as err:
        _insert(store, [make_record("refused")])
    assert err.value.data["reason"] == "read_only"
    assert "cannot be written (read-only)" in store.write_failure


def test_other_errors_stay_what_they_are(store, make_record):
    rec = make_record("once")
    _insert(store, [rec])
    with pytest.raises(sqlite3.IntegrityError):  # a bug, not a disk: not renamed
        _insert(store, [rec])
    assert store.write_failure is None
    assert storage_error(ValueError("no"), "p", "x") is None


def test_a_file_that_is_not_a_database_cannot_be_opened(tmp_path):
    path = tmp_path / "pattern.sqlite3"
    path.write_bytes(b"this is not a database file" * 200)
    with pytest.raises(StoreUnavailable) as err:
        SQLiteStore(path)
    assert err.value.data["reason"] == "damaged"
    assert err.value.message.endswith("the store cannot be opened")


def test_file_system_errors_map_by_errno():
    assert reason_of(OSError(errno.ENOSPC, "No space left on device")) == "disk_full"
    assert reason_of(OSError(errno.EROFS, "Read-only file system")) == "read_only"
    assert reason_of(OSError(errno.EIO, "Input/output error")) == "io_error"
    assert reason_of(OSError(errno.ENOENT, "No such file")) is None


def test_low_disk_is_a_warning_below_the_threshold(tmp_path, monkeypatch):
    from retrieval import errors

    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage",
                        lambda p: usage._replace(free=3 * 2**20))  # fmt: skip
    assert low_disk(tmp_path) == (
        "the disk holding the store has 3.0 MB free: writes fail once it is full"
    )
    monkeypatch.setattr(shutil, "disk_usage",
                        lambda p: usage._replace(free=errors.LOW_DISK_BYTES))  # fmt: skip
    assert low_disk(tmp_path) is None
