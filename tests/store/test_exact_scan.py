"""The exact scan of a small store (retrieval/vector/exact_scan.py): the same ranking as
scoring each record's stored windows one by one, the query's filter applied, the matrix read
again after any commit (another connection's, another process's), and a damaged vector row
left out instead of failing the search."""

from __future__ import annotations

import sqlite3
import threading

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
        assert (scan.loads, scan.appended) == (loads, 1)  # a new record: its windows appended
        # another connection (another process would do the same) deletes it
        with sqlite3.connect(tmp_path / "s" / "pattern.sqlite3") as conn:
            conn.execute("DELETE FROM embeddings WHERE record_rowid = "
                         "(SELECT rowid FROM records WHERE id='r050')")  # fmt: skip
        assert "r050" not in [r for r, _ in scan.search(q, RecordFilter(), 10, MODEL)]
        assert scan.loads == loads + 1  # windows gone without a change row: read whole
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


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(st.sampled_from(WORDS), min_size=1, max_size=90)),
        st.tuples(st.just("update"), st.integers(0, 40)),
        st.tuples(st.just("delete"), st.integers(0, 40)),
        st.tuples(st.just("backfill"), st.integers(0, 40)),  # windows stored for an older record
    ),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS, query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join))
def test_a_matrix_kept_up_to_date_ranks_as_one_read_whole(tmp_path_factory, ops, query):
    """After any sequence of writes (new records appended; updates, deletions, windows stored
    later for an older record: read whole), the scan kept since the start answers as a scan
    made now. (An edit in place that no change row records, by another tool, is seen within
    ``FULL_EVERY`` writes: the next test.)"""
    home = tmp_path_factory.mktemp("s")
    eng = Engine(home, HashEmbedder(), index_from=10**6)
    try:
        eng.add([rec(i, f"{WORDS[i % 12]} {WORDS[(i * 5) % 12]}") for i in range(6)])
        kept, q, n = ExactScan(eng.store), qvec(query), 100
        kept.search(q, RecordFilter(), 10, MODEL)
        for op, arg in ops:
            ids = [r.id for r in eng.store.list(RecordFilter())]
            if op == "add":
                eng.add([rec(n, " ".join(arg))])
                n += 1
            elif op in ("update", "delete") and ids:
                target = eng.store.get([ids[arg % len(ids)]])[ids[arg % len(ids)]]
                if op == "delete":
                    eng.delete([target.id])
                else:
                    eng.update(target.model_copy(update={"content": f"{target.content} kelp"}))
            elif op == "backfill" and ids:
                with sqlite3.connect(home / "pattern.sqlite3") as conn:
                    rowid = conn.execute("SELECT rowid FROM records WHERE id=?",
                                         (ids[arg % len(ids)],)).fetchone()[0]  # fmt: skip
                    conn.execute("DELETE FROM embeddings WHERE record_rowid=?", (rowid,))
                    conn.commit()
                    kept.search(q, RecordFilter(), 10, MODEL)  # seen without its windows
                    conn.execute(
                        "INSERT INTO embeddings(record_rowid, model_id, window, "
                        "content_hash, vector) SELECT rowid, ?, 0, content_hash, ? "
                        "FROM records WHERE rowid=?",
                        (MODEL, qvec("iris").tobytes(), rowid),
                    )
            fresh = ExactScan(eng.store).search(q, RecordFilter(), 10, MODEL)
            got = kept.search(q, RecordFilter(), 10, MODEL)
            assert [r for r, _ in got] == [r for r, _ in fresh], (op, got, fresh)
            assert np.allclose([s for _, s in got], [s for _, s in fresh], atol=1e-5)
        if all(op == "add" for op, _ in ops):  # new records only: appended, never read whole
            assert (kept.loads, kept.appended) == (1, len(ops))
    finally:
        eng.close()


def test_an_in_place_edit_no_change_row_records_is_seen_within_full_every_writes(
    tmp_path, monkeypatch
):
    import retrieval.vector.exact_scan as exact_scan

    monkeypatch.setattr(exact_scan, "FULL_EVERY", 3)
    home = tmp_path / "s"
    eng = Engine(home, HashEmbedder(), index_from=10**6)
    try:
        eng.add([rec(i, WORDS[i]) for i in range(4)])
        scan, q = ExactScan(eng.store), qvec("lotus")
        scan.search(q, RecordFilter(), 3, MODEL)
        with sqlite3.connect(home / "pattern.sqlite3") as conn:
            conn.execute("UPDATE embeddings SET vector=? WHERE record_rowid = "
                         "(SELECT rowid FROM records WHERE id='r000')", (q.tobytes(),))  # fmt: skip
        tops = []
        for i in range(4):
            eng.add([rec(20 + i, "kelp")])
            tops.append(scan.search(q, RecordFilter(), 1, MODEL)[0][0])
        assert tops[-1] == "r000" and scan.loads == 2  # read whole again after 3 appends
    finally:
        eng.close()


def test_a_matrix_with_a_damaged_row_is_always_read_whole(tmp_path):
    home = tmp_path / "s"
    eng = Engine(home, HashEmbedder(), index_from=10**6)
    try:
        eng.add([rec(i, WORDS[i]) for i in range(4)])
        with sqlite3.connect(home / "pattern.sqlite3") as conn:
            conn.execute("UPDATE embeddings SET vector=? WHERE record_rowid = "
                         "(SELECT rowid FROM records WHERE id='r001')", (b"bad",))  # fmt: skip
        scan = ExactScan(eng.store)
        scan.search(qvec("amber"), RecordFilter(), 3, MODEL)
        eng.add([rec(9, "amber")])
        assert scan.search(qvec("amber"), RecordFilter(), 3, MODEL)[0][0] in ("r000", "r009")
        assert (scan.loads, scan.appended) == (2, 0)
    finally:
        eng.close()


def test_a_compacted_change_log_and_a_row_id_given_again_read_the_matrix_whole(tmp_path):
    """Found in review: the highest record deleted, the change log compacted (its delete row
    gone), then a record with as many windows takes the freed row id: only an insert follows
    and the window count matches, yet the kept matrix held the deleted record."""
    from server.service.memories.changes import compact_changes, head

    eng = Engine(tmp_path / "s", HashEmbedder(), index_from=10**6)
    try:
        eng.add([rec(i, w) for i, w in enumerate(WORDS[:4])])
        eng.add([rec(9, "heron heron heron")])
        scan = ExactScan(eng.store)
        assert scan.search(qvec("heron"), RecordFilter(), 1, MODEL)[0][0] == "r009"
        eng.delete(["r009"])
        compact_changes(eng.store, head(eng.store.reader) + 1)
        eng.add([rec(10, "lotus lotus lotus")])
        for query in ("heron", "lotus"):
            want = ExactScan(eng.store).search(qvec(query), RecordFilter(), 2, MODEL)
            assert scan.search(qvec(query), RecordFilter(), 2, MODEL) == want
        assert "r009" not in [r for r, _ in scan.search(qvec("heron"), RecordFilter(), 9, MODEL)]
    finally:
        eng.close()


def test_a_search_inside_a_callers_snapshot_is_not_kept_as_current(tmp_path):
    """Found in review: searched inside an open read transaction, the matrix of that older
    snapshot was kept under the newer data version and served after it ended."""
    eng = Engine(tmp_path / "s", HashEmbedder(), index_from=10**6)
    try:
        eng.add([rec(i, WORDS[i]) for i in range(3)])
        scan, conn = ExactScan(eng.store), eng.store.reader
        conn.execute("BEGIN")
        conn.execute("SELECT count(*) FROM records").fetchone()  # the snapshot starts here
        writer = threading.Thread(target=lambda: eng.add([rec(5, "kelp kelp")]))
        writer.start()
        writer.join(10)
        scan.search(qvec("kelp"), RecordFilter(), 1, MODEL)  # sees the snapshot: no r005
        conn.execute("COMMIT")
        assert scan.search(qvec("kelp"), RecordFilter(), 1, MODEL)[0][0] == "r005"
    finally:
        eng.close()
