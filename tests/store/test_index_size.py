"""A small store is scanned exactly and runs no vector index process; the index is built from
the stored vectors once the store holds enough windows, and used from then on
(retrieval/vector/index_size.py)."""

from __future__ import annotations

import random
import sqlite3

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
        assert "exact scan" in eng.vector_index_state()
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
        assert eng.vector_index_state() is None
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
    assert "being built" in eng.vector_index_state()
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
    assert size.in_use(MODEL) and size.describe(MODEL) is None


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
    assert index_size.index_from({"PATTERN_VECTOR_INDEX_FROM": "9" * 60}) == int("9" * 60)
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
