"""The exact scan of a small store (retrieval/vector/exact_scan.py): the same ranking as
scoring each record's stored windows one by one, the query's filter applied, the matrix read
again after any commit (another connection's, another process's), and a damaged vector row
left out instead of failing the search."""

from __future__ import annotations

import sqlite3

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.records import Kind, Record, RecordFilter, Scope
from retrieval.vector.exact_scan import ExactScan

MODEL = HashEmbedder().model_id
WORDS = "amber birch cedar delta ember fjord glade heron iris juniper kelp lotus".split()


def rec(i: int, text: str, kind: Kind = Kind.memory, project: str = "p") -> Record:
    return Record(id=f"r{i:03d}", kind=kind, scope=Scope.team, project_id=project,
                  agent_id="a", content=text)  # fmt: skip


def one_by_one(eng: Engine, q: np.ndarray, f: RecordFilter) -> dict[str, float]:
    """Each record's best window, read record by record (what the scan must equal)."""
    ids = [r.id for r in eng.store.list(f)]
    return {rid: float(np.max(m @ q)) for rid, m in eng.store.embeddings(ids, MODEL).items()}


def qvec(text: str) -> np.ndarray:
    return np.asarray(HashEmbedder().embed_query(text), dtype=np.float32).reshape(-1)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    texts=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=150).map(" ".join),
                   min_size=1, max_size=25),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
    depth=st.integers(1, 30),
)  # fmt: skip
def test_the_scan_ranks_as_each_records_best_window_does(tmp_path_factory, texts, query, depth):
    eng = Engine(tmp_path_factory.mktemp("s"), HashEmbedder(), index_from=10**6)
    try:
        eng.add([rec(i, t, Kind.memory if i % 3 else Kind.lesson) for i, t in enumerate(texts)])
        q = qvec(query)
        for f in (RecordFilter(), RecordFilter(kinds=[Kind.lesson])):
            want = sorted(one_by_one(eng, q, f).items(), key=lambda kv: (-kv[1], kv[0]))[:depth]
            got = ExactScan(eng.store).search(q, f, depth, MODEL)
            assert [r for r, _ in got] == [r for r, _ in want]
            assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-5)
    finally:
        eng.close()


def test_the_matrix_is_read_again_after_any_commit_and_only_then(tmp_path):
    eng = Engine(tmp_path / "s", HashEmbedder(), index_from=10**6)
    try:
        eng.add([rec(i, WORDS[i]) for i in range(5)])
        scan = ExactScan(eng.store)
        q = qvec("heron")
        scan.search(q, RecordFilter(), 1, MODEL)
        loads = scan.loads
        scan.search(q, RecordFilter(), 3, MODEL)
        assert scan.loads == loads  # nothing committed: the same matrix
        eng.add([rec(50, "heron heron heron")])
        assert scan.search(q, RecordFilter(), 1, MODEL)[0][0] == "r050"
        assert scan.loads == loads + 1
        # another connection (another process would do the same) deletes it
        with sqlite3.connect(tmp_path / "s" / "pattern.sqlite3") as conn:
            conn.execute("DELETE FROM embeddings WHERE record_rowid = "
                         "(SELECT rowid FROM records WHERE id='r050')")  # fmt: skip
        assert "r050" not in [r for r, _ in scan.search(q, RecordFilter(), 10, MODEL)]
    finally:
        eng.close()


def test_a_filter_that_lets_nothing_through_and_an_empty_store(tmp_path):
    eng = Engine(tmp_path / "s", HashEmbedder(), index_from=10**6)
    try:
        scan = ExactScan(eng.store)
        assert scan.search(qvec("kelp"), RecordFilter(), 5, MODEL) == []
        eng.add([rec(1, "kelp lotus")])
        assert scan.search(qvec("kelp"), RecordFilter(kinds=[Kind.chunk]), 5, MODEL) == []
        assert scan.search(qvec("kelp"), RecordFilter(), 0, MODEL) == []
        assert scan.search(np.ones(7, np.float32), RecordFilter(), 5, MODEL) == []  # other dim
    finally:
        eng.close()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(blob=st.one_of(st.binary(max_size=600),
                      st.just(np.full(HashEmbedder().dimension, np.nan, np.float32).tobytes()),
                      st.just(np.full(HashEmbedder().dimension, np.inf, np.float32).tobytes())))  # fmt: skip
def test_a_damaged_vector_row_never_fails_the_search(tmp_path_factory, blob):
    home = tmp_path_factory.mktemp("s")
    eng = Engine(home, HashEmbedder(), index_from=10**6)
    try:
        eng.add([rec(i, f"{WORDS[i]} {WORDS[i + 1]}") for i in range(6)])
        with sqlite3.connect(home / "pattern.sqlite3") as conn:
            conn.execute("UPDATE embeddings SET vector=? WHERE record_rowid = "
                         "(SELECT rowid FROM records WHERE id='r002')", (blob,))  # fmt: skip
        for mode in ("vector", "hybrid"):
            hits = eng.search("cedar delta", RecordFilter(), k=6, mode=mode)
            ids = [h.record.id for h in hits]
            assert len(set(ids)) == len(ids)
            assert {"r001", "r002", "r003"} - {"r002"} <= set(ids)  # the words' own records
    finally:
        eng.close()
