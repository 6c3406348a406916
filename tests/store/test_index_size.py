"""A small store is scanned exactly and runs no vector index process; the index is built from
the stored vectors once the store holds enough windows, and used from then on
(retrieval/vector/index_size.py)."""

from __future__ import annotations

import random
import sqlite3

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.errors import InvalidInput
from retrieval.records import Kind, Record, RecordFilter, Scope
from retrieval.vector import index_size
from retrieval.vector.index_size import BUILD, BUILT, EXACT, IndexSize, meta_key
from server.service.core.config import Settings

MODEL = HashEmbedder().model_id
BUCKET = "team/p"  # the bucket of a team record of project "p"
WORDS = ("alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega river stone "
         "cloud maple copper violet harbor lantern meadow").split()  # fmt: skip


def rec(i: int, text: str | None = None) -> Record:
    rng = random.Random(i)
    body = text or " ".join(rng.choice(WORDS) for _ in range(12))
    return Record(id=f"r{i}", kind=Kind.memory, scope=Scope.team, content=body,
                  project_id="p", agent_id="a")  # fmt: skip


def engine(home, index_from: int, **kw) -> Engine:
    return Engine(home, HashEmbedder(), index_from=index_from, **kw)


def vector_ids(eng: Engine, query: str, k: int = 5) -> list[str]:
    return [h.record.id for h in eng.search(query, RecordFilter(), k=k, mode="vector")]


def test_a_small_store_scans_exactly_and_starts_no_index_process(tmp_path):
    eng = engine(tmp_path / "s", index_from=100)
    try:
        eng.add([rec(i) for i in range(5)])
        eng.add([rec(99, "quartz falcon orchard")])
        assert vector_ids(eng, "quartz falcon orchard")[0] == "r99"
        assert eng.vectors is not None and eng.vectors._proc is None  # no child, no spawner
        assert eng.index_size.state(MODEL) == EXACT
        assert eng.store.meta(meta_key(MODEL)) == EXACT
        assert eng.vector_fallback() is None  # the exact scan is the whole answer
        assert eng.vector_search_way() == "exact"
        assert eng.store.outbox() == []  # cleared: the vectors are stored, nothing to apply
        eng.start_vectors()  # what a server does after its first answer: not for this store
        assert eng.vectors._proc is None
        assert eng.orphan_vectors() == {}
    finally:
        eng.close()


def test_the_index_is_built_at_the_threshold_and_answers_as_the_exact_scan_did(tmp_path):
    eng = engine(tmp_path / "s", index_from=40)
    try:
        eng.add([rec(i) for i in range(30)])  # 30 windows: exact
        assert eng.index_size.state(MODEL) == EXACT
        queries = ["copper harbor", "maple river stone", "violet omega"]
        assert vector_ids(eng, rec(3).content, 1) == ["r3"]
        eng.delete(["r3"])
        eng.update(rec(4, "a lantern in the meadow"))  # its old vector must not come back
        eng.add([rec(i) for i in range(30, 45)])  # past 40 windows: built
        assert eng.index_size.state(MODEL) == BUILT
        assert eng.store.meta(meta_key(MODEL)) == BUILT
        assert eng.vectors.wait_ready(60)
        assert eng.vector_search_way() == "index"
        ids = {v.split("#")[0] for v in eng.vectors.ids(BUCKET, MODEL)}
        assert ids == {f"r{i}" for i in range(45)} - {"r3"}
        assert eng.orphan_vectors() == {}
        # the index answers now, and ranks as the exact scan of the same records does
        exact = engine(tmp_path / "s", index_from=10**6)  # a second engine reads the same store
        exact.index_size._state[MODEL] = EXACT
        try:
            for q in queries:
                assert vector_ids(eng, q, 10) == vector_ids(exact, q, 10)
        finally:
            exact.close()
        assert "r3" not in vector_ids(eng, rec(3).content, 45)
    finally:
        eng.close()


def test_the_state_survives_a_restart_and_a_cut_short_build_is_done_again(tmp_path, monkeypatch):
    home = tmp_path / "s"
    eng = engine(home, index_from=10)
    eng.add([rec(i) for i in range(5)])
    eng.close()
    eng = engine(home, index_from=10)
    assert eng.index_size.state(MODEL) == EXACT and eng.vectors._proc is None

    def crash(*_a):
        raise RuntimeError("the process died while building")

    monkeypatch.setattr(eng._sync, "_rebuild", crash)
    eng.add([rec(i) for i in range(5, 15)])  # the write is kept; the build failed
    assert len(eng.store.get([f"r{i}" for i in range(15)])) == 15
    assert eng.store.meta(meta_key(MODEL)) == BUILD
    assert eng.vector_search_way() == "building"
    eng.close()
    eng = engine(home, index_from=10)
    try:
        assert eng.index_size.state(MODEL) == BUILT  # built while the model attached
        assert eng.vectors.wait_ready(60)
        got = {v.split("#")[0] for v in eng.vectors.ids(BUCKET, MODEL)}
        assert got == {f"r{i}" for i in range(15)}
    finally:
        eng.close()


def test_a_store_of_an_earlier_release_keeps_its_index(tmp_path):
    """No key, but this model attached last: every write went to the index then."""
    home = tmp_path / "s"
    eng = engine(home, index_from=0)  # builds at once, as every store did before
    eng.add([rec(i) for i in range(3)])
    eng.close()
    with sqlite3.connect(home / "pattern.sqlite3") as conn:
        conn.execute("DELETE FROM meta WHERE key=?", (meta_key(MODEL),))
    eng = engine(home, index_from=1000)
    try:
        assert eng.index_size.state(MODEL) == BUILT
        assert eng.vectors.wait_ready(60)
    finally:
        eng.close()


def test_reindex_of_a_small_store_embeds_what_has_no_vector(tmp_path):
    home = tmp_path / "s"
    lexical = Engine(home)  # no model: records stored without vectors
    lexical.add([rec(i) for i in range(4)])
    lexical.close()
    eng = engine(home, index_from=100)
    try:
        with eng.store.local_transaction() as conn:
            conn.execute("DELETE FROM embeddings")
        assert eng.reindex() == (4, 0)
        assert len(eng.store.embeddings([f"r{i}" for i in range(4)], MODEL)) == 4
        assert eng.vectors._proc is None
    finally:
        eng.close()


def test_a_chroma_server_is_always_used():
    size = IndexSize(store=None, threshold=10**6, always=True)  # type: ignore[arg-type]
    assert size.in_use(MODEL) and size.state(MODEL) == BUILT


@pytest.mark.parametrize("raw", ["many", "1.5", "-", "-5", "１２", "0x10"])
def test_a_bad_threshold_is_a_clear_error(monkeypatch, raw):
    monkeypatch.setenv("PATTERN_VECTOR_INDEX_FROM", raw)
    with pytest.raises(ValueError, match="use a whole number of windows"):
        index_size.index_from()
    with pytest.raises(InvalidInput, match="PATTERN_VECTOR_INDEX_FROM"):
        Settings.from_env({"PATTERN_HOME": "/tmp/x", "PATTERN_VECTOR_INDEX_FROM": raw})


def test_the_threshold_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("PATTERN_VECTOR_INDEX_FROM", " 12 ")
    assert index_size.index_from() == 12
    assert index_size.index_from({"PATTERN_VECTOR_INDEX_FROM": "0"}) == 0
    assert (
        index_size.index_from({"PATTERN_VECTOR_INDEX_FROM": "9" * 60}) == index_size.MAX_INDEX_FROM
    )
    monkeypatch.delenv("PATTERN_VECTOR_INDEX_FROM")
    assert index_size.index_from() == index_size.DEFAULT_INDEX_FROM
    env = {"PATTERN_HOME": "/tmp/x", "PATTERN_VECTOR_INDEX_FROM": "7"}
    assert Settings.from_env(env).vector_index_from == 7


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(texts=st.lists(st.text(min_size=0, max_size=200), min_size=1, max_size=12),
       query=st.text(min_size=1, max_size=80))  # fmt: skip
def test_an_exact_search_never_fails_on_any_stored_text(tmp_path_factory, texts, query):
    eng = engine(tmp_path_factory.mktemp("s"), index_from=10**6)
    try:
        eng.add([rec(i, t or "empty") for i, t in enumerate(texts)])
        hits = eng.search(query, RecordFilter(), k=5, mode="vector")
        assert len(hits) <= 5 and all(h.record.id.startswith("r") for h in hits)
        assert eng.vectors._proc is None
    finally:
        eng.close()


def test_a_served_small_store_never_starts_an_index_process_and_a_large_one_does(tmp_path):
    """What a daemon does (the index deferred until told after its first answer): a new
    project's store stays exact; past the threshold the background writer builds the index."""
    from server.service.core.runtime import Runtime

    env = {"PATTERN_HOME": str(tmp_path / "home"), "PATTERN_EMBEDDER": "hash",
           "PATTERN_PROJECT_ID": "p", "PATTERN_AGENT_ID": "a",
           "PATTERN_VECTOR_INDEX_FROM": "30"}  # fmt: skip
    rt = Runtime.start(env, tmp_path, model="now", defer_vectors=True)
    try:
        eng = rt.engine
        eng.add([rec(i) for i in range(10)])
        assert vector_ids(eng, rec(4).content, 1) == ["r4"]
        rt.start_vectors()  # the daemon, after its first answer
        assert eng.wait_vectors(30) and eng.vectors._proc is None
        assert eng.vector_search_way() == "exact"
        eng.add([rec(i) for i in range(10, 40)])
        assert eng.wait_vectors(60)
        assert eng.vector_search_way() == "index" and eng.vectors.wait_ready(60)
        assert vector_ids(eng, rec(33).content, 1) == ["r33"]
        assert len({v.split("#")[0] for v in eng.vectors.ids(BUCKET, MODEL)}) == 40
    finally:
        rt.close()


# ---------------------------------------------------------------------------- hostile cases
def test_a_large_store_given_a_new_model_builds_its_index_instead_of_scanning(tmp_path):
    """Its records have no window of the new model yet: they count (the matrix of an exact
    scan would otherwise grow to the whole store, one load per embedded batch)."""
    home = tmp_path / "s"
    old = Engine(home, HashEmbedder(64), index_from=10**9)
    old.add([rec(i) for i in range(300)])
    old.close()
    eng = Engine(home, None, index_from=100)
    try:
        new = HashEmbedder(48)
        eng.set_embedder(new)
        assert eng.index_size.state(new.model_id) in (BUILD, BUILT)
        assert eng.wait_vectors(60) and eng.vector_search_way() == "index"
        assert [h.record.id for h in eng.search(rec(7).content, RecordFilter(), k=1,
                                                mode="vector")] == ["r7"]  # fmt: skip
        assert eng.ranker._small.loads == 0  # never scanned as a small store
    finally:
        eng.close()


def test_a_threshold_past_what_sqlite_counts_is_never(tmp_path, monkeypatch):
    monkeypatch.setenv("PATTERN_VECTOR_INDEX_FROM", "9" * 40)
    assert index_size.index_from() == index_size.MAX_INDEX_FROM
    eng = engine(tmp_path / "s", index_from=10**40)
    try:
        eng.add([rec(i) for i in range(3)])
        assert vector_ids(eng, rec(1).content, 1) == ["r1"]
        assert eng.vector_search_way() == "exact"
    finally:
        eng.close()


def test_the_late_tools_are_built_even_if_the_index_cannot_start():
    from server.http import after_start

    class Rt:
        class engine:  # noqa: N801 - a stand-in
            answered = __import__("threading").Event()

        model_ready = __import__("threading").Event()

        def start_vectors(self):
            raise OverflowError("no")

    Rt.engine.answered.set()
    Rt.model_ready.set()
    built = []
    after_start.after_first_answer(Rt(), later=(lambda: built.append(1),))
    assert built == [1]


def test_two_engines_over_one_store_keep_the_index_whole_when_one_builds_it(tmp_path):
    """The engine that did not build the index applies its rows to it (clearing them without
    the index would lose an update and keep deleted records indexed). Checked in the index
    both engines share, then that a restart does not build again."""
    home = tmp_path / "s"
    a = engine(home, index_from=300)
    b = None
    try:
        a.add([rec(i) for i in range(280)])
        b = engine(home, index_from=300)
        assert b.index_size.state(MODEL) == EXACT  # cached
        a.add([rec(i) for i in range(280, 300)])  # a builds the index
        assert a.index_size.state(MODEL) == BUILT
        assert not b.apply(delete=[f"r{i}" for i in range(280, 290)]).warnings
        assert not b.apply(replace=[rec(4, "submarine volcano lemon")]).warnings
        assert b.vector_search_way() == "index" and b.store.outbox() == []
        assert b.vectors is a.vectors and b.vectors.wait_ready(60)  # one index process
        ids = {v.split("#")[0] for v in b.vectors.ids(BUCKET, MODEL)}
        assert ids == {f"r{i}" for i in range(300)} - {f"r{i}" for i in range(280, 290)}
        for eng in (a, b):
            assert vector_ids(eng, "submarine volcano lemon", 1) == ["r4"]
    finally:
        a.close()
        if b is not None:
            b.close()
    c = engine(home, index_from=300)
    try:
        assert c.vector_search_way() == "index"  # no second build after a restart
    finally:
        c.close()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_one_damaged_window_does_not_hide_its_record(tmp_path, bad):
    home = tmp_path / "s"
    eng = engine(home, index_from=1000, window_words=8, window_overlap=0)
    try:
        eng.add([rec(i) for i in range(10)])
        eng.add(
            [rec(50, "quartz falcon orchard pebble " + " ".join(f"filler{j}" for j in range(20)))]
        )
        with sqlite3.connect(home / "pattern.sqlite3") as db:
            rid = db.execute("SELECT rowid FROM records WHERE id='r50'").fetchone()[0]
            db.execute("UPDATE embeddings SET vector=? WHERE record_rowid=? AND window=2",
                       (np.full(64, bad, np.float32).tobytes(), rid))  # fmt: skip
        for mode in ("vector", "hybrid"):
            got = [h.record.id for h in eng.search("quartz falcon orchard pebble", RecordFilter(),
                                                   k=3, mode=mode)]  # fmt: skip
            assert got[0] == "r50", mode
    finally:
        eng.close()


def test_searches_say_the_index_is_being_built_even_with_its_process_up(tmp_path, monkeypatch):
    home = tmp_path / "s"
    eng = engine(home, index_from=10)
    try:
        eng.add([rec(i) for i in range(5)])
        eng.vectors.start()
        assert eng.vectors.wait_ready(60)

        def crash(*_a):
            raise RuntimeError("the build failed")

        monkeypatch.setattr(eng._sync, "_rebuild", crash)
        eng.add([rec(i) for i in range(5, 15)])
        assert eng.vector_search_way() == "building"
        assert "being built" in eng.vector_fallback()
        hits = eng.search(rec(9).content, RecordFilter(), k=1, mode="hybrid")
        assert hits[0].record.id == "r9" and "being built" in hits[0].explanation.mode
    finally:
        eng.close()


@pytest.mark.parametrize(
    "blob",
    [np.full(64, np.nan, np.float32), np.ones(32, np.float32) / 32**0.5],
    ids=["nan", "dim32"],
)
@pytest.mark.parametrize("background", [True, False])
def test_a_damaged_window_does_not_stop_the_build(tmp_path, blob, background):
    """Hidden while the store is scanned exactly (the scan leaves it out), a damaged vector
    would reach the index first at the build, which refuses the batch: it is embedded again."""
    home = tmp_path / "s"
    eng = Engine(home, HashEmbedder(), index_from=20, background_vectors=background)
    try:
        eng.add([rec(i) for i in range(10)])
        with sqlite3.connect(home / "pattern.sqlite3") as db:
            rid = db.execute("SELECT rowid FROM records WHERE id='r3'").fetchone()[0]
            db.execute("UPDATE embeddings SET vector=? WHERE record_rowid=?", (blob.tobytes(), rid))
        assert vector_ids(eng, rec(5).content, 1) == ["r5"]
        warnings = eng.apply(add=[rec(i) for i in range(10, 25)]).warnings  # crosses 20
        assert eng.wait_vectors(30) and not warnings
        assert eng.vector_search_way() == "index" and eng.store.outbox() == []
        assert eng.vectors.wait_ready(60) and vector_ids(eng, rec(3).content, 1) == ["r3"]
        assert eng.store.embeddings(["r3"], MODEL)["r3"].shape == (1, 64)  # repaired
    finally:
        eng.close()
