"""One vector collection across every bucket (retrieval/vector/across.py): kept in step with
every bucket's collection through the outbox, copied into round by round on a store that
reaches the threshold, asked alone by a search over every bucket, ranking as the buckets'
collections do."""

from __future__ import annotations

import random
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.records import Kind, Record, RecordFilter, Scope
from retrieval.storage.buckets import bucket_of
from retrieval.vector import across as across_mod
from retrieval.vector.across import ACROSS, BUILT, Across, across_from, meta_key
from retrieval.vector.vector_sync import VectorSync

MODEL = HashEmbedder().model_id
WORDS = ("alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega river stone "
         "cloud maple copper violet harbor lantern meadow").split()  # fmt: skip
QUERIES = ["copper harbor", "maple river stone", "violet omega lantern", "alpha"]


def rec(i: int, agent: int | None = None, scope: Scope = Scope.private, words: int = 12,
        seed: int | None = None) -> Record:  # fmt: skip
    rng = random.Random(i if seed is None else seed)
    return Record(id=f"r{i}", kind=Kind.memory, scope=scope, project_id="p",
                  agent_id=f"a{i % 5 if agent is None else agent}",
                  content=" ".join(rng.choice(WORDS) for _ in range(words)))  # fmt: skip


def engine(home, across: int, **kw) -> Engine:
    return Engine(home, HashEmbedder(), index_from=0, across_from=across, **kw)


def across_ids(eng: Engine) -> set[str]:
    return set(eng.vectors.ids(ACROSS, MODEL))


def bucket_ids(eng: Engine) -> set[str]:
    """Every vector id in the buckets' own collections."""
    return {v for b in eng.vectors.buckets(MODEL) if b != ACROSS for v in eng.vectors.ids(b, MODEL)}


def ranked(eng: Engine, q: str, f: RecordFilter | None = None, mode: str = "vector") -> list:
    return [(h.record.id, round(h.score, 6)) for h in eng.search(q, f or RecordFilter(), 10, mode)]


class AskedBuckets:
    """Records the buckets each query of the vector index asked."""

    def __init__(self, eng: Engine) -> None:
        self.asked: list[list[str]] = []
        inner = eng.vectors.query

        def query(buckets, model_id, qvec, n):
            self.asked.append(list(buckets))
            return inner(buckets, model_id, qvec, n)

        eng.vectors.query = query


def start_across(eng: Engine) -> None:
    """A search over every bucket: it starts the across collection; wait until it is built."""
    eng.search("start", RecordFilter(), 5, "vector")
    assert eng._sync.retry.wait_idle(60) and eng.wait_vectors(60)
    assert eng.store.meta(meta_key(MODEL)) == BUILT


def test_a_store_of_many_buckets_keeps_them_all_in_one_collection_and_asks_it_alone(tmp_path):
    eng = engine(tmp_path / "a", across=3)
    fan = engine(tmp_path / "b", across=0)  # the same records, asked bucket by bucket
    try:
        records = [rec(i) for i in range(60)]
        eng.add(records)
        fan.add(records)
        assert eng.bucket_count() == 5
        assert eng.store.meta(meta_key(MODEL)) is None  # no search over every bucket yet
        assert ACROSS not in eng.vectors.buckets(MODEL) and eng.vector_across() is None
        asked = AskedBuckets(eng)
        start_across(eng)  # that search itself asked bucket by bucket
        assert asked.asked == [sorted(eng._buckets)]
        assert eng.vector_across() == "built"
        assert across_ids(eng) == bucket_ids(eng) == {f"r{i}" for i in range(60)}
        assert ACROSS not in fan.vectors.buckets(MODEL)
        asked.asked.clear()
        for q in QUERIES:
            assert ranked(eng, q) == ranked(fan, q)
            assert ranked(eng, q, mode="hybrid") == ranked(fan, q, mode="hybrid")
        assert asked.asked and all(b == [ACROSS] for b in asked.asked)
        # an agent's own buckets are asked one by one: not every bucket
        mine = RecordFilter(buckets=[bucket_of("private", "p", "a1"), "public"])
        asked.asked.clear()
        assert ranked(eng, "copper harbor", mine) == ranked(fan, "copper harbor", mine)
        assert asked.asked == [mine.buckets]
        # every known bucket listed by hand is the whole store too
        every = RecordFilter(buckets=sorted(eng._buckets) + ["team/elsewhere"])
        asked.asked.clear()
        ranked(eng, "copper harbor", every)
        assert asked.asked == [[ACROSS]]
        assert eng.orphan_vectors() == {}
    finally:
        eng.close()
        fan.close()


def test_updates_moves_and_deletes_reach_the_collection_across_buckets(tmp_path):
    eng = engine(tmp_path / "a", across=3)
    fan = engine(tmp_path / "b", across=0)
    try:
        for e in (eng, fan):
            e.add([rec(i) for i in range(40)])
        start_across(eng)
        for e in (eng, fan):
            e.update(rec(3, seed=99))  # new content
            moved = e.get("r4").model_copy(update={"scope": Scope.team})
            e.update(moved)  # another bucket
            e.delete(["r5", "r6"])
            e.update(rec(7, words=200))  # several windows now
            e.update(rec(7, words=8))  # one again: its other windows must go
        assert across_ids(eng) == bucket_ids(eng)
        assert "r5" not in {v.split("#")[0] for v in across_ids(eng)}
        assert not any(v.startswith("r7#") for v in across_ids(eng))
        assert eng.orphan_vectors() == {}
        for q in [*QUERIES, rec(3, seed=99).content]:
            assert ranked(eng, q) == ranked(fan, q)
    finally:
        eng.close()
        fan.close()


def test_a_store_of_few_buckets_keeps_no_collection_across_them(tmp_path):
    eng = engine(tmp_path / "a", across=6)
    try:
        eng.add([rec(i) for i in range(30)])  # 5 buckets
        assert eng.store.meta(meta_key(MODEL)) is None
        assert ACROSS not in eng.vectors.buckets(MODEL)
        asked = AskedBuckets(eng)
        ranked(eng, "copper")
        assert asked.asked == [sorted(eng._buckets)]
        assert not eng._sync.across.asked  # below the threshold: not asked for
        eng.add([rec(100, agent=7)])  # a sixth bucket: kept once a search needs it
        assert eng.store.meta(meta_key(MODEL)) is None
        start_across(eng)
        assert across_ids(eng) == bucket_ids(eng)
    finally:
        eng.close()


def earlier_store(home, n: int) -> None:
    """A store of ``n`` records written without the collection across buckets."""
    eng = engine(home, across=0)
    eng.add([rec(i) for i in range(n)])
    eng.close()


def test_an_earlier_store_is_copied_in_round_by_round_while_writes_go_on(tmp_path, monkeypatch):
    home = tmp_path / "s"
    earlier_store(home, 50)
    monkeypatch.setattr(across_mod, "FILL_ROUND", 7)
    eng = engine(home, across=3, background_vectors=True)
    try:
        rounds: list[int | None] = []
        inner = eng._sync._copy_across

        def copy(embedder):
            rounds.append(eng._sync.across.cursor(MODEL))
            if len(rounds) == 3:  # writes while it copies: a new record, an edit, a delete
                eng.add([rec(200)])
                eng.update(rec(2, seed=77))
                eng.delete(["r9"])
            return inner(embedder)

        monkeypatch.setattr(eng._sync, "_copy_across", copy)
        eng.add([rec(100)])
        assert eng.wait_vectors(120) and rounds == []  # not asked for yet
        eng.search("copper", RecordFilter(), 5)  # asks for it: the writer copies round by round
        assert eng.wait_vectors(120)
        assert eng.store.meta(meta_key(MODEL)) == BUILT
        assert len(rounds) >= 8 and rounds[0] == 0 and rounds == sorted(rounds)
        assert across_ids(eng) == bucket_ids(eng)
        assert "r9" not in across_ids(eng) and "r200" in across_ids(eng)
        assert eng.orphan_vectors() == {}
        fan = engine(tmp_path / "f", across=0)
        try:
            fan.add([rec(i) for i in range(50)] + [rec(100), rec(200)])
            fan.update(rec(2, seed=77))
            fan.delete(["r9"])
            for q in [*QUERIES, rec(2, seed=77).content]:
                assert ranked(eng, q) == ranked(fan, q)
        finally:
            fan.close()
    finally:
        eng.close()


def test_a_copy_cut_short_goes_on_from_its_cursor_after_a_restart(tmp_path, monkeypatch):
    home = tmp_path / "s"
    earlier_store(home, 30)
    monkeypatch.setattr(across_mod, "FILL_ROUND", 10)
    calls = {"n": 0}
    inner = VectorSync._copy_across

    def copy_then_die(self, embedder):
        calls["n"] += 1
        if calls["n"] >= 2:  # every round after the first fails, until the restart
            raise RuntimeError("the process died while copying")
        return inner(self, embedder)

    monkeypatch.setattr(VectorSync, "_copy_across", copy_then_die)
    eng = engine(home, across=3)
    eng.search("copper", RecordFilter(), 5)  # asks for it
    eng._sync.retry.wait_idle(5)
    deadline = time.monotonic() + 30
    while calls["n"] < 2 and time.monotonic() < deadline:  # one round, then a failing one
        time.sleep(0.02)
    eng.add([rec(50)])  # committed though the copy fails (a warning, a retry)
    assert eng.store.get(["r50"])
    cursor = eng._sync.across.cursor(MODEL)
    assert cursor == 10  # the first round's ten records
    assert eng.vector_across() == "copying"
    asked = AskedBuckets(eng)
    ranked(eng, "copper")  # not built yet: the buckets are asked one by one
    assert asked.asked == [sorted(eng._buckets)]
    eng._sync.retry.close(drain=False)
    eng.close()
    monkeypatch.setattr(VectorSync, "_copy_across", inner)
    eng = engine(home, across=3)  # kept: the copy goes on without being asked again
    try:
        assert not eng._sync.across.asked
        assert eng.wait_vectors(60)
        assert eng.store.meta(meta_key(MODEL)) == BUILT
        assert across_ids(eng) == bucket_ids(eng)
    finally:
        eng.close()


def test_orphans_in_the_collection_across_buckets_are_found_and_removed(tmp_path):
    from retrieval.vector.vectors import VectorItem

    eng = engine(tmp_path / "a", across=3)
    try:
        eng.add([rec(i) for i in range(20)])
        start_across(eng)
        vec = HashEmbedder().embed_documents(["a stray vector"])[0]
        eng.vectors.upsert(ACROSS, MODEL, [VectorItem("gone", 0, vec), VectorItem("r1", 5, vec)])
        assert eng.orphan_vectors() == {ACROSS: ["gone", "r1#5"]}
        assert eng.remove_orphan_vectors() == 2
        assert eng.orphan_vectors() == {}
        assert across_ids(eng) == bucket_ids(eng)
    finally:
        eng.close()


def test_reindex_builds_it_again_or_drops_it_when_no_longer_wanted(tmp_path):
    home = tmp_path / "s"
    eng = engine(home, across=3)
    eng.add([rec(i) for i in range(25)])
    start_across(eng)
    assert eng.reindex() == (25, 0)
    assert eng.store.meta(meta_key(MODEL)) == BUILT
    assert across_ids(eng) == bucket_ids(eng)
    eng.close()
    eng = engine(home, across=0)  # turned off: kept in step until the next reindex
    try:
        eng.add([rec(30)])
        assert "r30" in across_ids(eng)
        eng.reindex()
        assert eng.store.meta(meta_key(MODEL)) is None
        assert ACROSS not in eng.vectors.buckets(MODEL)
        assert eng.orphan_vectors() == {}
    finally:
        eng.close()


@pytest.mark.parametrize("raw", ["-1", "ten", "1.5", "٣", "9" * 12])
def test_a_threshold_that_is_not_a_whole_number_is_refused(raw):
    with pytest.raises(ValueError, match="PATTERN_VECTOR_ACROSS_FROM"):
        across_from({"PATTERN_VECTOR_ACROSS_FROM": raw})
    assert across_from({}) == across_mod.DEFAULT_ACROSS_FROM
    assert across_from({"PATTERN_VECTOR_ACROSS_FROM": " 0 "}) == 0


@pytest.mark.parametrize(
    "damaged", ["build 12x", "something else", "BUILT", "build ²", "build " + "9" * 30,
                "build 99999999", "build -3", "build "],
)  # fmt: skip
def test_a_damaged_state_copies_everything_again_and_writes_go_on(tmp_path, damaged):
    eng = engine(tmp_path / "a", across=3)
    try:
        eng.add([rec(i) for i in range(20)])
        with eng.store.local_transaction() as conn:
            eng.store.set_meta(conn, meta_key(MODEL), damaged)
        state = Across(eng.store)
        assert state.active(MODEL) and state.cursor(MODEL) is not None
        assert not state.serves(MODEL, ["x", "y"], ["x", "y"])  # not built: never asked alone
        assert eng.vector_across() == "copying"
        assert eng.add([rec(30)])  # the next run starts the copy; the write warns of nothing
        assert eng._sync.retry.active is False and eng.wait_vectors(60)
        assert eng.store.meta(meta_key(MODEL)) == BUILT
        assert across_ids(eng) == bucket_ids(eng) and len(across_ids(eng)) == 21
    finally:
        eng.close()


class ManyWindows:
    """A collection whose every record has 60 windows, answered best record first: the
    windows asked for hold a sixtieth as many records."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    def query(self, query_embeddings, n_results, include):
        self.asked.append(n_results)
        ids = [f"r{i // 60}#{i % 60}" for i in range(n_results)]
        return {"ids": [ids], "distances": [[0.1] * n_results]}


@pytest.mark.parametrize(("bucket", "records"), [("public", 34), (ACROSS, 120)])
def test_the_collection_across_buckets_is_asked_for_as_many_windows_as_sixteen_buckets(
    bucket, records
):
    """One query of the across collection stands for every bucket's: records of many windows
    must not leave it with fewer records than the buckets' queries found together (each
    bucket's query is bounded by MAX_WINDOWS_ASKED windows; the across collection's by 16
    times that)."""
    from retrieval.vector.vectors import MAX_WINDOWS_ASKED, VectorIndex

    index = VectorIndex.__new__(VectorIndex)
    col = ManyWindows()
    index._collection = lambda b, m, create=True: col
    hits = index._query_one(bucket, MODEL, HashEmbedder().embed_query("x"), 120)
    assert len({rid for rid, _ in hits}) >= records
    assert max(col.asked) <= 16 * MAX_WINDOWS_ASKED
    assert (max(col.asked) == MAX_WINDOWS_ASKED) == (bucket != ACROSS)


OPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "edit", "move", "delete", "round"]),
        st.integers(0, 24),
        st.integers(0, 6),
    ),  # fmt: skip
    min_size=1,
    max_size=25,
)


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_any_writes_between_copy_rounds_leave_it_equal_to_the_buckets(tmp_path_factory, ops):
    home = tmp_path_factory.mktemp("s")
    eng = engine(home, across=0)
    try:
        eng.add([rec(i) for i in range(12)])
        eng._sync.across.threshold = 2
        eng._sync.across.begin(MODEL)  # from now on every change goes to it too
        alive = {f"r{i}" for i in range(12)}
        n = 100
        for op, i, agent in ops:
            rid = f"r{i}"
            if op == "round":
                with eng._sync.lock:
                    eng._sync._copy_across(eng.embedder)
            elif op == "add":
                eng.add([rec(n, agent=agent, words=3 + 40 * (agent % 3))])
                alive.add(f"r{n}")
                n += 1
            elif rid in alive and op == "delete":
                eng.delete([rid])
                alive.discard(rid)
            elif rid in alive:
                new = rec(i, agent=agent, seed=n, words=5 + 90 * (agent % 2))
                if op == "move":
                    new = new.model_copy(update={"scope": Scope.team})
                eng.update(new)
                n += 1
        with eng._sync.lock:
            while eng._sync._copy_across(eng.embedder):
                pass
        assert eng.store.meta(meta_key(MODEL)) == BUILT
        assert across_ids(eng) == bucket_ids(eng)
        assert eng.orphan_vectors() == {}
    finally:
        eng.close()


def test_the_server_reads_the_threshold_from_its_environment():
    from server.service.core.config import Settings
    from server.service.core.errors import InvalidInput

    base = {"PATTERN_HOME": "/tmp/x"}
    assert Settings.from_env(base).vector_across_from == across_mod.DEFAULT_ACROSS_FROM
    assert Settings.from_env({**base, "PATTERN_VECTOR_ACROSS_FROM": "5"}).vector_across_from == 5
    with pytest.raises(InvalidInput, match="PATTERN_VECTOR_ACROSS_FROM"):
        Settings.from_env({**base, "PATTERN_VECTOR_ACROSS_FROM": "many"})


def test_two_engines_over_one_store_keep_it_in_step_and_see_it_dropped(tmp_path):
    home = tmp_path / "s"
    a = engine(home, across=3)
    a.add([rec(i) for i in range(30)])
    b = engine(home, across=3)
    try:
        b.search("copper", RecordFilter(buckets=["public"]), 5)  # B has read the state: none
        start_across(a)
        b.add([rec(200)])  # B's writes go to the collection A started
        b.update(rec(3, seed=99))
        b.delete(["r5"])
        assert across_ids(a) == bucket_ids(a) and "r200" in across_ids(a)
        assert a.orphan_vectors() == {}
        before = ranked(b, "copper harbor")
        a._sync.across.asked, a._sync.across.threshold = False, 0
        a.reindex()  # drops it
        assert a.store.meta(meta_key(MODEL)) is None
        asked = AskedBuckets(b)
        assert ranked(b, "copper harbor") == before  # B asks bucket by bucket now
        assert ACROSS not in asked.asked[0]
    finally:
        a.close()
        b.close()


def test_a_search_beside_a_write_of_a_new_bucket_never_fails(tmp_path, monkeypatch):
    """Every search compares its buckets with the engine's, which a write may grow meanwhile."""
    import sys
    import threading

    eng = engine(tmp_path / "a", across=100_000)
    try:
        eng.add([rec(i) for i in range(5)])
        eng._buckets.update(f"team/p{i}" for i in range(3000))
        monkeypatch.setattr(sys, "getswitchinterval", sys.getswitchinterval)
        before = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)  # threads take turns as often as they can
        errors: list[BaseException] = []
        stop = threading.Event()

        def search() -> None:
            while not stop.is_set():
                try:
                    eng._vector_buckets(RecordFilter())
                except Exception as exc:  # what a recall would have raised
                    errors.append(exc)
                    return

        t = threading.Thread(target=search)
        t.start()
        try:
            for i in range(60_000):  # what a write of a new agent's record does
                eng._buckets.add(f"private/p/agent{i}")
                if errors:
                    break
        finally:
            stop.set()
            t.join()
            sys.setswitchinterval(before)
        assert errors == []
    finally:
        eng.close()


def test_a_copy_whose_newest_records_were_deleted_ends_instead_of_starting_over(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(across_mod, "FILL_ROUND", 10)
    eng = engine(tmp_path / "a", across=3)
    try:
        eng.add([rec(i) for i in range(30)])
        eng._sync.across.begin(MODEL)
        cursors = []
        while True:
            with eng._sync.lock:
                if not eng._sync._copy_across(eng.embedder):
                    break
            cursors.append(eng._sync.across.cursor(MODEL))
            if len(cursors) == 3:
                eng.delete(["r29", "r28"])  # copied, then deleted: the newest rows
        assert cursors == [10, 20, 30]
        assert eng.store.meta(meta_key(MODEL)) == BUILT
        assert eng.wait_vectors(60) and across_ids(eng) == bucket_ids(eng)
    finally:
        eng.close()


def test_the_copy_keeps_out_of_the_way_of_writes_and_of_closing(tmp_path, monkeypatch):
    slow = {"rounds": 0}
    inner = Across.next_round

    def slow_round(self, model_id):
        slow["rounds"] += 1
        time.sleep(0.1)
        return inner(self, model_id)

    monkeypatch.setattr(Across, "next_round", slow_round)
    monkeypatch.setattr(across_mod, "FILL_ROUND", 1)
    eng = engine(tmp_path / "a", across=3)  # writes applied inline
    eng.add([rec(i) for i in range(200)])
    eng.search("copper", RecordFilter(), 5)  # 200 rounds of 0.1 s start
    assert eng._sync.retry.wait_idle(10)
    deadline = time.monotonic() + 10  # the copy's thread runs its first round (a loaded
    while not slow["rounds"] and time.monotonic() < deadline:  # machine may start it late)
        time.sleep(0.01)
    t = time.monotonic()
    eng.add([rec(500)])  # does not wait for the copy
    eng.delete(["r3"])
    assert time.monotonic() - t < 3
    assert 0 < slow["rounds"] < 150
    t = time.monotonic()
    eng.close()  # stops the copy between rounds; its cursor stays for the next start
    assert time.monotonic() - t < 5


def test_the_bridge_refuses_a_bad_threshold_before_it_starts_a_daemon():
    from server.service.core import envsettings
    from server.service.core.errors import InvalidInput

    with pytest.raises(InvalidInput, match="PATTERN_VECTOR_ACROSS_FROM"):
        envsettings.check({"PATTERN_VECTOR_ACROSS_FROM": "many"})
    envsettings.check({"PATTERN_VECTOR_ACROSS_FROM": "0"})
