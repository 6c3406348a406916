"""The in-memory postings rank exactly as FTS5's bm25() does, and follow every kind of write."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval.fulltext.bm25 import Tokenizer, idf
from retrieval.fulltext.lexical import LexicalIndex
from retrieval.records import Record, RecordFilter, Scope
from retrieval.storage.store import SQLiteStore

WORDS = (
    "alpha beta gamma delta cells patients running runner runs vitamin fracture cohort "
    "kinase protein binding legend chart renderer timeout retry cache index"
).split()
QUERIES = [
    "alpha",
    "running cells",
    "patients with vitamin fracture",
    "Protein kinase binding in cells",
    "NullPointerException in the chart renderer",
    "timeout retry cache index legend beta gamma delta",
    "nothing matches zzzz",
]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


@pytest.fixture
def store(tmp_path):
    s = SQLiteStore(tmp_path / "db.sqlite3")
    yield s
    s.close()


def _records(make_record, rng: random.Random, n: int) -> list:
    out = []
    for i in range(n):
        agent = f"agent-{i % 3}"
        scope = [Scope.private, Scope.team, Scope.public][i % 3]
        out.append(
            make_record(
                _text(rng, rng.randint(1, 30)) + (" NullPointerException" if i % 7 == 0 else ""),
                context=_text(rng, rng.randint(0, 6)),
                tags=[rng.choice(WORDS)] if i % 4 == 0 else None,
                agent_id=agent,
                scope=scope,
            )
        )
    return out


def _filters(recs) -> list[RecordFilter]:
    buckets = sorted({r.bucket for r in recs})
    return [RecordFilter(), RecordFilter(buckets=buckets[:1]), RecordFilter(buckets=buckets[1:4])]


def _assert_same(mem: LexicalIndex, fts: LexicalIndex, recs) -> None:
    assert mem.postings.state == "ready"
    for q in QUERIES:
        for f in _filters(recs):
            top_m, all_m = mem.search_all(q, f, 10)
            top_f, all_f = fts.search_all(q, f, 10)
            keys = sorted(all_f, key=str)
            assert sorted(all_m, key=str) == keys, q
            got = np.array([all_m[k] for k in keys])
            want = np.array([all_f[k] for k in keys])
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
            assert [s for _, s in top_m] == pytest.approx([s for _, s in top_f], rel=1e-9)
            top5_m, top5_f = mem.search(q, f, 5), fts.search(q, f, 5)
            assert [s for _, s in top5_m] == pytest.approx([s for _, s in top5_f], rel=1e-9)
            assert all(all_f[r] == pytest.approx(s, rel=1e-9) for r, s in top5_m)  # ties aside


def test_idf_is_floored_like_fts5():
    assert idf(10, 1)[()] == pytest.approx(np.log(9.5 / 1.5))
    assert idf(10, 9)[()] == 1e-6 and idf(10, 5)[()] == 1e-6


def test_tokenizer_uses_the_index_stemmer():
    tok = Tokenizer()
    assert tok.tokens(["running", "Cells", "snake_case", "café"]) == [
        ("run",),
        ("cell",),
        ("snake", "case"),
        ("cafe",),
    ]


def test_postings_equal_fts5_through_writes(store, make_record):
    rng = random.Random(7)
    recs = _records(make_record, rng, 300)
    with store.transaction() as conn:
        store.insert(conn, recs)
    fts = LexicalIndex(store, postings_min=-1)
    mem = LexicalIndex(store, postings_min=0)
    assert fts.postings is None
    mem.postings.build(store.reader)
    _assert_same(mem, fts, recs)

    # updates (new text, a scope move to another bucket), deletes and inserts, then catch-up
    with store.transaction() as conn:
        for rec in recs[:40]:
            rec.content = _text(rng, rng.randint(1, 20))
            store.replace(conn, rec)
        moved = recs[40]
        moved.scope = Scope.public
        store.replace(conn, moved)
        store.delete(conn, [r.id for r in recs[50:80]])
        fresh = _records(make_record, rng, 25)
        store.insert(conn, fresh)
    live = [r for r in recs if r not in recs[50:80]] + fresh
    _assert_same(mem, fts, live)
    assert (
        mem.postings.seq == fts.store.reader.execute("SELECT max(seq) FROM changes").fetchone()[0]
    )

    # a pruned change log cannot be replayed: the postings rebuild, FTS5 answers meanwhile
    with store.transaction() as conn:
        conn.execute("DELETE FROM changes")
        store.insert(conn, _records(make_record, rng, 5))
    f = RecordFilter()
    got, want = mem.search_all("alpha", f, 10)[0], fts.search_all("alpha", f, 10)[0]
    assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9)
    assert mem.postings.wait(30)
    _assert_same(mem, fts, live)

    # inside a write transaction (uncommitted changes may roll back) FTS5 ranks
    seq = mem.postings.seq
    with store.transaction() as conn:
        store.insert(conn, _records(make_record, rng, 3))
        assert mem.search("alpha", f, 5, conn=conn) == fts.search("alpha", f, 5, conn=conn)
    assert mem.postings.seq == seq

    # folding the appended pieces in keeps the same answers
    mem.postings._merge()
    _assert_same(mem, fts, live)


def test_phrases_of_several_tokens_fall_back_to_fts5(store, make_record):
    recs = [make_record("the snake_case name and snake oil and case study")] * 1
    with store.transaction() as conn:
        store.insert(conn, recs)
    mem = LexicalIndex(store, postings_min=0)
    mem.postings.build(store.reader)
    assert mem.postings.rows(["snake_case"], None, None) is None
    assert mem.postings.rows(["snake"], None, None).shape == (1, 2)
    fts = LexicalIndex(store, postings_min=-1)
    assert mem.search("snake_case", RecordFilter(), 5) == fts.search(
        "snake_case", RecordFilter(), 5
    )


def test_background_build_starts_at_the_threshold(store, make_record):
    with store.transaction() as conn:
        store.insert(conn, [make_record(f"alpha note {i}") for i in range(5)])
    small = LexicalIndex(store, postings_min=10)
    small.search("alpha", RecordFilter(), 3)
    assert small.postings.state == "empty"  # below the threshold: FTS5 only
    big = LexicalIndex(store, postings_min=5)
    first = big.search("alpha", RecordFilter(), 3)  # FTS5 answers while it builds
    assert big.postings.wait(30)
    assert big.search("alpha", RecordFilter(), 3) == first


def test_rowid_scores_look_up_rows_in_any_order(store, make_record):
    """The mapping keeps the matching rows as arrays (no object per row) and finds a record's
    score by its rowid whatever order the rows came in; an id that matched nothing, or that
    no record has, is absent."""
    from retrieval.fulltext.scores import RowidScores

    recs = [make_record(f"text {i}") for i in range(6)]
    with store.transaction() as conn:
        store.insert(conn, recs)
    rowid = dict(store.reader.execute("SELECT id, rowid FROM records").fetchall())
    order = [recs[4], recs[0], recs[2], recs[5]]  # not in rowid order; recs[1], [3] absent
    scores = RowidScores(
        store, np.array([rowid[r.id] for r in order]), np.array([4.0, 0.5, 2.0, 5.0]), {}
    )
    scores.resolve([recs[0].id, recs[1].id, "no-such-id"])
    assert scores[recs[4].id] == 4.0 and scores[recs[0].id] == 0.5
    assert scores.get(recs[2].id) == 2.0 and scores.get(recs[5].id) == 5.0
    assert scores.get(recs[1].id, 0.0) == 0.0 and recs[3].id not in scores
    assert scores.get("no-such-id") is None
    assert len(scores) == 4 and set(scores) == {r.id for r in order}


def _plain_record(content: str, *, tags=None, **kw) -> Record:
    return Record(project_id="p", content=content, metadata={"tags": tags} if tags else {}, **kw)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 60),
    deleted=st.integers(0, 5),
    query=st.lists(st.sampled_from(WORDS + ["zzzz"]), min_size=1, max_size=5),
)
def test_any_store_ranks_every_record_as_fts5(seed, n, deleted, query):
    """The whole-store pass (no filter, no dead slot: no masks) and the masked one give the
    scores FTS5 gives, for any store and query, before and after deletes."""
    import tempfile
    from pathlib import Path

    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "db.sqlite3")
        recs = _records(_plain_record, rng, n)
        with store.transaction() as conn:
            store.insert(conn, recs)
        fts, mem = LexicalIndex(store, postings_min=-1), LexicalIndex(store, postings_min=0)
        mem.postings.build(store.reader)
        q = " ".join(query)
        for _ in range(2):
            for f in (RecordFilter(), *_filters(recs)[1:]):
                got, want = mem.search_all(q, f, 10), fts.search_all(q, f, 10)
                assert sorted(got[1], key=str) == sorted(want[1], key=str)
                assert all(got[1][k] == pytest.approx(want[1][k], rel=1e-9) for k in want[1])
            with store.transaction() as conn:
                store.delete(conn, [r.id for r in recs[:deleted]])
            recs = recs[deleted:]
        store.close()


def test_a_column_weighing_zero_still_matches(store, make_record):
    """A record whose only query term is in a column weighing 0 scores bm25 0.0 and is still
    a match, as in FTS5 (it was dropped when a match was taken for a score above 0)."""
    recs = [make_record("alpha beta", context="kinase"), make_record("kinase cells")]
    with store.transaction() as conn:
        store.insert(conn, recs)
    weights = (1.0, 0.0, 0.8)
    fts = LexicalIndex(store, weights=weights, postings_min=-1)
    mem = LexicalIndex(store, weights=weights, postings_min=0)
    mem.postings.build(store.reader)
    f = RecordFilter()
    assert {r for r, _ in mem.search("kinase", f, 5)} == {r.id for r in recs}
    got, want = mem.search("kinase", f, 5), fts.search("kinase", f, 5)
    assert [r for r, _ in got] == [r for r, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9)
    assert recs[0].id in mem.search_all("kinase", f, 5)[1]
    assert mem.search_all("kinase", f, 5)[1][recs[0].id] == 0.0


@pytest.mark.parametrize("postings_min", [-1, 0])
def test_a_record_taking_a_deleted_ones_rowid_inherits_no_score(store, make_record, postings_min):
    """Between the query and a lookup, the best record is deleted and a new one takes its
    rowid (the records table reuses the largest): the newcomer gets no score, its rows read
    as unmatched, and the others keep theirs."""
    recs = [make_record("alpha kinase"), make_record("gamma"), make_record("kinase kinase cells")]
    with store.transaction() as conn:
        store.insert(conn, recs)
    lex = LexicalIndex(store, postings_min=postings_min)
    if lex.postings is not None:
        lex.postings.build(store.reader)
    top, scores = lex.search_all("kinase", RecordFilter(), 1)
    assert [r for r, _ in top] == [recs[2].id]
    _, ref = lex.search_all("kinase", RecordFilter(), 1)
    first = ref.get(recs[0].id)  # its score when the rows were scored
    assert first > 0
    rowid = store.reader.execute("SELECT rowid FROM records WHERE id = ?", (recs[2].id,)).fetchone()
    intruder = make_record("nothing relevant here")
    with store.transaction() as conn:
        store.delete(conn, [recs[2].id])
        store.insert(conn, [intruder])
    again = store.reader.execute(
        "SELECT rowid FROM records WHERE id = ?", (intruder.id,)
    ).fetchone()
    assert again == rowid  # the case this test is about
    assert scores.get(intruder.id) is None and intruder.id not in set(scores)
    assert scores.get(recs[0].id) == first
    assert scores.get(recs[1].id) is None


def test_lookups_after_records_are_replaced(store, make_record):
    """Replaced records take new slots, so the matching rows come out of rowid order (the
    mapping sorts them): every record's score still equals FTS5's."""
    rng = random.Random(11)
    recs = _records(make_record, rng, 120)
    with store.transaction() as conn:
        store.insert(conn, recs)
    fts, mem = LexicalIndex(store, postings_min=-1), LexicalIndex(store, postings_min=0)
    mem.postings.build(store.reader)
    with store.transaction() as conn:
        for rec in recs[::3]:
            rec.content = _text(rng, rng.randint(1, 20))
            store.replace(conn, rec)
    for q in QUERIES:
        _, got = mem.search_all(q, RecordFilter(), 5)
        _, want = fts.search_all(q, RecordFilter(), 5)
        ids = [r.id for r in recs]
        if hasattr(got, "resolve"):
            got.resolve(ids)
        for rid in ids:
            w = want.get(rid)
            assert got.get(rid) == (None if w is None else pytest.approx(w, rel=1e-9)), q


def _indexed(store, postings_min: int, recs) -> LexicalIndex:
    """``recs`` stored, and a lexical index over them (its postings built unless -1)."""
    with store.transaction() as conn:
        store.insert(conn, recs)
    lex = LexicalIndex(store, postings_min=postings_min)
    if lex.postings is not None:
        lex.postings.build(store.reader)
    return lex


def _racing(monkeypatch, write) -> None:
    """Run ``write`` in another thread right after the query's rows were scored (between the
    change log's head read and the mapping of rowids to record ids)."""
    import threading

    scored = LexicalIndex._fts_only

    def racing(self, *args, **kw):
        out = scored(self, *args, **kw)
        t = threading.Thread(target=write)
        t.start()
        t.join()
        return out

    monkeypatch.setattr(LexicalIndex, "_fts_only", racing)


@pytest.mark.parametrize("postings_min", [-1, 0])
def test_an_edit_during_a_query_keeps_the_record(store, make_record, monkeypatch, postings_min):
    """An edit keeps a record's rowid: it can hold no other record's score, so a query that
    runs beside it keeps the record in its results and its score."""
    a, b = make_record("kinase kinase alpha"), make_record("kinase beta")
    lex = _indexed(store, postings_min, [a, b])

    def edit():
        a.metadata = {"note": "edited"}
        with store.transaction() as conn:
            store.replace(conn, a)

    _racing(monkeypatch, edit)
    assert [r for r, _ in lex.search("kinase", RecordFilter(), 5)] == [a.id, b.id]
    top, scores = lex.search_all("kinase", RecordFilter(), 5)
    assert [r for r, _ in top] == [a.id, b.id] and scores.get(a.id) == dict(top)[a.id]


@pytest.mark.parametrize("postings_min", [-1, 0])
def test_a_compaction_during_a_query_lets_no_newcomer_in(
    store, make_record, monkeypatch, postings_min
):
    """The best record is deleted, a new one takes its rowid and the change log is compacted,
    all while a query runs: the log can no longer say who is new, so the query trusts none of
    its rows rather than give the newcomer the deleted record's score."""
    from server.service.memories.changes import compact_changes, head

    a, b = make_record("gamma"), make_record("kinase kinase cells")
    lex = _indexed(store, postings_min, [a, b])
    intruder = make_record("nothing relevant here")

    def replace_and_compact():
        with store.transaction() as conn:
            store.delete(conn, [b.id])
            store.insert(conn, [intruder])
        compact_changes(store, head(store.reader) + 1)

    _racing(monkeypatch, replace_and_compact)
    assert intruder.id not in dict(lex.search("kinase", RecordFilter(), 5))


def test_inside_a_write_transaction_the_scores_are_the_writers_view(store, make_record):
    """``search_all`` on the writer's connection inside its transaction sees its uncommitted
    rows: its scores are that view's, never a committed record's under a reused rowid."""
    old = make_record("gamma delta")
    with store.transaction() as conn:
        store.insert(conn, [make_record("alpha"), old])
    lex = LexicalIndex(store, postings_min=-1)
    new = make_record("kinase kinase cells")
    with store.transaction() as conn:
        store.delete(conn, [old.id])
        store.insert(conn, [new])
        top, scores = lex.search_all("kinase", RecordFilter(), 5, conn=conn)
        assert [r for r, _ in top] == [new.id]
        assert scores.get(old.id) is None and scores.get(new.id) == dict(top)[new.id]
    assert scores.get(old.id) is None
