"""The stored vectors a search rescores, kept between searches: the same windows as the store
holds for the record's current version, never a replaced or deleted record's, bounded; and
the ranker's rescored search reads them there."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.records import Record, RecordFilter, Scope
from retrieval.vector.stored_vectors import StoredVectors

pytestmark = pytest.mark.usefixtures("vector_index")  # tests of the vector index itself

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron".split()


def text(i: int, n: int = 60) -> str:
    return " ".join(WORDS[(i * 7 + j) % len(WORDS)] + str(j % 5) for j in range(n))


@pytest.fixture
def eng(tmp_path):
    e = Engine(tmp_path / "store", HashEmbedder(32), window_words=20, window_overlap=4)
    yield e
    e.close()


def add(eng: Engine, n: int) -> list[Record]:
    return eng.add([Record(project_id="p", agent_id="a", scope=Scope.private, category="note",
                           content=text(i)) for i in range(n)])  # fmt: skip


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_kept_vectors_are_the_stored_ones_of_the_current_version(eng, monkeypatch):
    recs = add(eng, 6)
    ids = [r.id for r in recs]
    model = eng.embedder.model_id
    kept = StoredVectors(eng.store)
    first = kept.get(ids, model)
    assert same(first, eng.store.embeddings(ids, model))
    assert all(len(v) > 1 for v in first.values())  # several windows per record
    assert not any(v.flags.writeable for v in first.values())

    read = []
    real = eng.store.embeddings
    monkeypatch.setattr(eng.store, "embeddings", lambda i, m: read.append(list(i)) or real(i, m))
    assert same(kept.get(ids, model), first) and read == []  # nothing read again

    changed = recs[2].model_copy(update={"content": text(40)})
    eng.apply(replace=[changed])
    eng.delete([ids[4]])
    read.clear()  # the writes' own reads
    again = kept.get(ids, model)
    assert read == [[ids[2]]]  # only the replaced record is read again
    assert ids[4] not in again
    assert same(again, eng.store.embeddings([i for i in ids if i != ids[4]], model))
    assert not np.array_equal(again[ids[2]], first[ids[2]])


def test_a_metadata_change_reads_the_record_again(eng):
    rec = add(eng, 1)[0]
    model = eng.embedder.model_id
    kept = StoredVectors(eng.store)
    kept.get([rec.id], model)
    eng.apply(replace=[rec.model_copy(update={"tags": ["x"]})])  # a new revision
    assert kept._kept[(rec.id, model)][0][0] == 1
    kept.get([rec.id], model)
    assert kept._kept[(rec.id, model)][0][0] == 2


def test_kept_windows_are_bounded_least_recently_used_first_out(eng):
    recs = add(eng, 8)
    model = eng.embedder.model_id
    per = len(eng.store.embeddings([recs[0].id], model)[recs[0].id])
    kept = StoredVectors(eng.store, max_windows=3 * per)
    kept.get([r.id for r in recs[:3]], model)
    kept.get([recs[0].id], model)  # used again: the newest
    kept.get([recs[5].id], model)
    assert {k[0] for k in kept._kept} == {recs[0].id, recs[2].id, recs[5].id}
    assert kept._windows <= 3 * per


def test_a_rescored_search_reads_stored_vectors_once(eng, monkeypatch):
    add(eng, 30)
    f = RecordFilter(buckets=None)
    assert eng.ranker.vectors.wait_ready(60)  # rescored only once the index answers
    before = eng.search(text(3), f, k=10, mode="vector")
    read = []
    real = eng.store.embeddings
    monkeypatch.setattr(eng.store, "embeddings", lambda i, m: read.append(len(i)) or real(i, m))
    after = eng.search(text(3), f, k=10, mode="vector")
    assert [(h.record.id, h.score) for h in after] == [(h.record.id, h.score) for h in before]
    assert read == []
