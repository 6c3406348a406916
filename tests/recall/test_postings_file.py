"""The in-memory postings are saved beside the store and loaded at the next start instead of
rebuilt, brought up to date by the change log; a file that cannot be (another store's, a
damaged one, a change log pruned past it) is ignored and the postings are built again.
Real SQLite in ``tmp_path``; every comparison is against FTS5's own ranking."""

from __future__ import annotations

import random
import shutil

import numpy as np
import pytest

from retrieval.fulltext.lexical import LexicalIndex
from retrieval.records import RecordFilter
from retrieval.storage.store import SQLiteStore
from tests.recall.test_postings import _assert_same, _records


@pytest.fixture
def path(tmp_path):
    return tmp_path / "s" / "pattern.sqlite3"


def _write(store, recs) -> None:
    with store.transaction() as conn:
        store.insert(conn, recs)


def _ready(store) -> LexicalIndex:
    lx = LexicalIndex(store, postings_min=0)
    lx.search("alpha", RecordFilter(), 3)  # starts the build (or the load)
    assert lx.postings.wait(30)
    return lx


@pytest.fixture
def builds(monkeypatch) -> list[int]:
    """One entry per postings build from FTS5 (a load from the file adds none)."""
    from retrieval.fulltext import postings as postings_mod

    out: list[int] = []
    assemble = postings_mod.Postings._assemble
    monkeypatch.setattr(postings_mod.Postings, "_assemble",
                        lambda self, *a: out.append(1) or assemble(self, *a))  # fmt: skip
    return out


def test_a_restart_loads_the_saved_postings_and_catches_up(path, make_record, builds):
    rng = random.Random(5)
    store = SQLiteStore(path)
    recs = _records(make_record, rng, 120)
    _write(store, recs)
    first = _ready(store)
    assert first.postings.file.is_file()  # saved after the build
    more = _records(make_record, rng, 30)
    _write(store, more)
    with store.transaction() as conn:
        store.delete(conn, [recs[0].id, recs[5].id])
    first.search("alpha", RecordFilter(), 3)  # in step with the writes
    first.postings.close()
    store.close()

    store = SQLiteStore(path)
    _write(store, _records(make_record, rng, 10))  # written while nothing ran
    builds.clear()
    lx = _ready(store)
    assert builds == [] and lx.postings.n_alive == 120 + 30 - 2  # loaded, not built
    lx.search("alpha", RecordFilter(), 3)  # the change log adds the 10 written since
    assert lx.postings.n_alive == 158
    _assert_same(lx, LexicalIndex(store, postings_min=-1), recs + more)
    store.close()


def test_another_stores_file_or_a_damaged_one_is_rebuilt(path, tmp_path, make_record, builds):
    rng = random.Random(9)
    store = SQLiteStore(path)
    _write(store, _records(make_record, rng, 60))
    _ready(store).postings.close()
    store.close()
    other_path = tmp_path / "other" / "pattern.sqlite3"
    other = SQLiteStore(other_path)
    recs = _records(make_record, rng, 80)
    _write(other, recs)
    shutil.copy(path.with_name(path.name + ".postings.npz"),
                other_path.with_name(other_path.name + ".postings.npz"))  # fmt: skip
    builds.clear()
    lx = _ready(other)
    assert builds == [1] and lx.postings.n_alive == 80
    _assert_same(lx, LexicalIndex(other, postings_min=-1), recs)
    lx.postings.file.write_bytes(b"not a postings file")
    again = _ready(other)
    assert builds == [1, 1] and again.postings.n_alive == 80
    _assert_same(again, LexicalIndex(other, postings_min=-1), recs)
    other.close()


def test_a_change_log_pruned_past_the_file_means_a_rebuild(path, make_record, builds):
    rng = random.Random(2)
    store = SQLiteStore(path)
    recs = _records(make_record, rng, 50)
    _write(store, recs)
    _ready(store).postings.close()
    more = _records(make_record, rng, 20)
    _write(store, more)
    with store.transaction() as conn:  # the change log no longer reaches back to the file
        conn.execute("DELETE FROM changes")
    builds.clear()
    lx = _ready(store)
    assert builds == [1] and lx.postings.n_alive == 70
    _assert_same(lx, LexicalIndex(store, postings_min=-1), recs + more)
    store.close()


def test_saving_digests_every_live_id_in_one_pass(path, make_record, monkeypatch):
    """The file keeps a digest of each live entry's record id (checked at load). Computing it
    is one vectorised pass over the ids: a save at a million records holds the postings' lock
    (finding the newest record once per record made it O(n²) once: 500 s)."""
    from retrieval.fulltext import postings_file

    rng = random.Random(3)
    store = SQLiteStore(path)
    recs = _records(make_record, rng, 200)
    _write(store, recs)
    with store.transaction() as conn:
        store.delete(conn, [recs[7].id])
    lx = _ready(store)
    calls: list[int] = []
    digests = postings_file.digests
    monkeypatch.setattr(postings_file, "digests", lambda ids: calls.append(1) or digests(ids))
    assert postings_file.save(lx.postings, path.with_name("again.npz"))
    assert calls == [1]
    saved = np.load(path.with_name("again.npz"))
    live = [r.id for r in recs if r is not recs[7]]
    slots = [lx.postings.slot_of[i] for i in live]
    assert saved["digest"][slots].tolist() == digests(live).tolist()
    assert len(set(saved["digest"][slots].tolist())) == len(live)
    store.close()


def test_another_stores_file_of_the_same_shape_is_rebuilt(tmp_path, make_record, builds):
    """Two stores written alike (same record count, same change sequence, same rowids): the
    ids' digests tell their files apart."""
    stores = []
    for name in ("a", "b"):
        store = SQLiteStore(tmp_path / name / "pattern.sqlite3")
        recs = _records(make_record, random.Random(4), 30)  # same texts, new ids
        _write(store, recs)
        _ready(store).postings.close()
        stores.append((store, recs))
    (a, _), (b, recs_b) = stores
    a.close(), b.close()
    shutil.copy(tmp_path / "a" / "pattern.sqlite3.postings.npz",
                tmp_path / "b" / "pattern.sqlite3.postings.npz")  # fmt: skip
    b = SQLiteStore(tmp_path / "b" / "pattern.sqlite3")
    builds.clear()
    lx = _ready(b)
    assert builds == [1] and "another store" in lx.postings.file_problem
    _assert_same(lx, LexicalIndex(b, postings_min=-1), recs_b)
    b.close()
