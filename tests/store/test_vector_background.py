"""Background vector writes and the vector index in a child process (retrieval/vector/vector_writer.py,
retrieval/vector/vector_process.py): a write returns at COMMIT and is found by vector search at once
(its stored vector is scored exactly until the index has it); concurrent writes share index
calls; a failing index is retried; closing drains; the child process serves the same API,
survives being killed, and the server ranks exactly until the child has opened its store."""

from __future__ import annotations

import os
import signal
import threading

import numpy as np
import pytest

from retrieval.embedding.embedder import HashEmbedder
from retrieval.errors import StoreUnavailable
from retrieval.records import RecordFilter
from retrieval.vector.vector_process import VectorIndexError, VectorProcess
from retrieval.vector.vector_writer import BackgroundWriter
from retrieval.vector.vectors import VectorItem
from server.service.core.config import Settings
from server.service.core.errors import InvalidInput

pytestmark = pytest.mark.usefixtures("vector_index")  # tests of the vector index itself

MODEL = HashEmbedder().model_id


def indexed(eng, rec) -> int:
    return eng.vectors.count(rec.bucket, MODEL)


def vector_ids(eng, query: str, k: int = 5) -> list[str]:
    return [h.record.id for h in eng.search(query, RecordFilter(), k=k, mode="vector")]


@pytest.fixture
def held(open_engine):
    """A background-writing engine whose writer is held (it cannot apply) until released."""
    eng = open_engine(HashEmbedder(), background_vectors=True)
    eng.wait_vectors(10)
    gate = threading.Event()
    real = eng._sync.run

    def run(known=None):
        gate.wait(30)
        return real(known)

    eng._sync.run = run
    yield eng, gate
    gate.set()


def test_a_write_returns_at_commit_and_is_found_by_vector_before_the_index_has_it(
    held, make_record
):
    eng, gate = held
    rec = make_record("harbour crane maintenance window")
    done = eng.apply(add=[rec])
    assert done.warnings == []
    assert indexed(eng, rec) == 0 and eng._sync.pending_ids() == {rec.id}
    assert vector_ids(eng, "harbour crane maintenance window") == [rec.id]
    gate.set()
    assert eng.wait_vectors(10)
    assert indexed(eng, rec) == 1 and eng._sync.pending_ids() == set()
    assert vector_ids(eng, "harbour crane maintenance window") == [rec.id]


def test_a_pending_update_is_scored_by_its_new_vector_and_a_pending_delete_is_gone(
    open_engine, make_record
):
    eng = open_engine(HashEmbedder(), background_vectors=True)
    old = make_record("ferry timetable for the winter season")
    gone = make_record("lighthouse keeper rota and duties")
    eng.apply(add=[old, gone])
    assert eng.wait_vectors(10)
    gate = threading.Event()
    real = eng._sync.run
    eng._sync.run = lambda known=None: (gate.wait(30), real(known))[1]
    eng.update(old.model_copy(update={"content": "glacier trek permit application"}))
    eng.delete([gone.id])
    assert vector_ids(eng, "glacier trek permit application")[0] == old.id
    assert gone.id not in vector_ids(eng, "lighthouse keeper rota and duties", k=10)
    gate.set()
    assert eng.wait_vectors(10)
    assert vector_ids(eng, "glacier trek permit application")[0] == old.id
    assert indexed(eng, gone) == 1  # `old` (same bucket) only: the deleted record's vector went


def test_writes_committed_while_the_writer_is_busy_share_one_round(held, make_record):
    eng, gate = held
    recs = [make_record(f"berth {i} allocation for the cargo vessel") for i in range(12)]
    for rec in recs:  # the first round is held: the other eleven wait together
        eng.apply(add=[rec])
    upserts: list[int] = []
    real = eng.vectors.upsert
    eng.vectors.upsert = lambda b, m, items: (upserts.append(len(items)), real(b, m, items))[1]
    gate.set()
    assert eng.wait_vectors(10)
    assert sum(upserts) == 12 and len(upserts) <= 2  # one call per round, not one per write
    assert eng.store.outbox() == []


def test_a_failing_index_is_retried_and_the_next_writes_say_it_is_catching_up(
    open_engine, make_record, monkeypatch
):
    eng = open_engine(HashEmbedder(), background_vectors=True)
    eng._sync.writer.first = 0.02
    down = threading.Event()
    down.set()
    asked = threading.Event()  # the first write has returned: the writer may fail from now on
    real = VectorProcess.upsert

    def upsert(self, *a, **kw):
        asked.wait(10)
        if down.is_set():
            raise ConnectionError("chroma is unreachable")
        return real(self, *a, **kw)

    monkeypatch.setattr(VectorProcess, "upsert", upsert)
    first = make_record("tide gauge calibration notes")
    assert eng.apply(add=[first]).warnings == []  # nothing known to fail yet
    asked.set()
    assert not eng.wait_vectors(0.5)  # failing: never idle
    second = eng.apply(add=[make_record("dredging schedule for the inner basin")])
    assert "the vector index is catching up" in second.warnings[0]
    assert "ConnectionError: chroma is unreachable" in second.warnings[0]
    assert vector_ids(eng, "tide gauge calibration notes")[0] == first.id  # scored exactly
    down.clear()
    assert eng.wait_vectors(10)
    assert eng.store.outbox() == [] and eng._sync.writer.last_error is None


def test_closing_the_engine_applies_what_the_writer_holds(open_engine, make_record, tmp_path):
    eng = open_engine(HashEmbedder(), background_vectors=True)
    recs = [make_record(f"quay wall inspection {i}") for i in range(5)]
    for rec in recs:
        eng.apply(add=[rec])
    eng.close()
    again = open_engine(HashEmbedder())  # inline: counts what the first engine left
    assert again.store.outbox() == []
    assert again.vectors.count(recs[0].bucket, MODEL) == 5


def test_the_background_writer_backs_off_while_failing_and_stops_when_closed():
    calls: list[int] = []
    fail = threading.Event()
    fail.set()

    def apply():
        calls.append(1)
        if fail.is_set():
            raise RuntimeError("down")

    w = BackgroundWriter(apply, first=0.01, cap=0.04)
    w.kick()
    assert not w.wait_idle(0.3) and len(calls) >= 3 and w.last_error == "RuntimeError: down"
    fail.clear()
    assert w.wait_idle(5) and w.last_error is None
    n = len(calls)
    w.kick()
    assert w.wait_idle(5) and len(calls) == n + 1
    w.close()
    w.kick()  # after close: ignored
    assert len(calls) == n + 1


# ---------------------------------------------------------------------- the child process
@pytest.fixture(scope="module")
def proc(tmp_path_factory):
    vp = VectorProcess(str(tmp_path_factory.mktemp("vp") / "chroma"))
    assert vp.wait_ready(120)
    yield vp
    vp.close()


def unit(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, 8)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_the_child_process_serves_the_vector_index_api(proc):
    vecs = unit(3, 1)
    proc.upsert("team/p", "m", [VectorItem("a", 0, vecs[0]), VectorItem("a", 1, vecs[1]),
                                VectorItem("b", 0, vecs[2])])  # fmt: skip
    assert proc.count("team/p", "m") == 3
    assert sorted(proc.ids("team/p", "m")) == ["a", "a#1", "b"]
    assert proc.buckets("m") == ["team/p"]
    hits = proc.query(["team/p", "private/p/x"], "m", vecs[1], 2)
    assert hits[0][0] == "a" and hits[0][1] == pytest.approx(1.0, abs=1e-5)
    proc.delete("team/p", "m", ["a"])
    assert proc.ids("team/p", "m") == ["b"]
    proc.delete_ids("team/p", "m", ["b"])
    assert proc.count("team/p", "m") == 0
    proc.drop_model("m")
    assert proc.buckets("m") == []


def test_an_error_in_the_child_comes_back_typed_without_importing_chromadb_here(proc):
    with pytest.raises(VectorIndexError) as err:
        proc.upsert("team/p", "m", [VectorItem("a", 0, unit(1, 2)[0]),
                                    VectorItem("z", 0, unit(1, 3)[0][:4])])  # fmt: skip
    assert err.value.kind and str(err.value)


def test_calls_from_many_threads_get_their_own_answers(proc):
    vecs = unit(16, 4)
    proc.upsert("team/q", "m", [VectorItem(f"r{i}", 0, vecs[i]) for i in range(16)])
    out: dict[int, str] = {}

    def ask(i: int) -> None:
        out[i] = proc.query(["team/q"], "m", vecs[i], 1)[0][0]

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == {i: f"r{i}" for i in range(16)}


def test_a_killed_child_is_replaced_by_the_next_call_over_the_same_store(tmp_path):
    vp = VectorProcess(str(tmp_path / "chroma"))
    try:
        assert vp.wait_ready(120)
        vp.upsert("team/k", "m", [VectorItem("a", 0, unit(1, 5)[0])])
        first = vp._proc.pid
        os.kill(first, signal.SIGKILL)
        vp._proc.wait()
        try:
            n = vp.count("team/k", "m")  # a new child, or a clear error if the old one was
        except StoreUnavailable:  # still taken for alive when the call was sent
            n = vp.count("team/k", "m")
        assert n == 1 and vp._proc.pid != first
    finally:
        vp.close()
    with pytest.raises(StoreUnavailable, match="closed"):
        vp.count("team/k", "m")


def test_the_ranker_scores_exactly_until_the_index_process_has_opened(
    open_engine, make_record, monkeypatch
):
    eng = open_engine(HashEmbedder())
    recs = [make_record("pilot boarding ladder check"), make_record("bunker fuel sample log")]
    eng.apply(add=recs)
    monkeypatch.setattr(VectorProcess, "ready", False)  # an index still opening in its child

    def no_query(*a, **kw):
        raise AssertionError("the index is not open yet")

    monkeypatch.setattr(VectorProcess, "query", no_query)
    assert vector_ids(eng, "bunker fuel sample log")[0] == recs[1].id


def test_an_engine_with_the_index_in_a_child_writes_and_finds_by_vector(open_engine, make_record):
    eng = open_engine(HashEmbedder(), vector_process=True, background_vectors=True)
    assert isinstance(eng.vectors, VectorProcess)
    rec = make_record("mooring line tension readings")
    eng.apply(add=[rec])
    assert vector_ids(eng, "mooring line tension readings")[0] == rec.id
    assert eng.wait_vectors(120) and indexed(eng, rec) == 1
    assert eng.orphan_vectors() == {}


def test_the_vector_settings_come_from_the_environment(tmp_path):
    s = Settings.from_env({"PATTERN_HOME": str(tmp_path)}, tmp_path)
    assert s.vector_process and s.vector_writes == "background"
    s = Settings.from_env({"PATTERN_HOME": str(tmp_path), "PATTERN_VECTOR_PROCESS": "0",
                           "PATTERN_VECTOR_WRITES": "inline"}, tmp_path)  # fmt: skip
    assert not s.vector_process and s.vector_writes == "inline"
    with pytest.raises(InvalidInput, match="PATTERN_VECTOR_WRITES"):
        Settings.from_env({"PATTERN_HOME": str(tmp_path), "PATTERN_VECTOR_WRITES": "later"})


def test_a_deferred_child_starts_when_told_or_at_its_first_call(tmp_path):
    told = VectorProcess(str(tmp_path / "a" / "chroma"), start=False)
    called = VectorProcess(str(tmp_path / "b" / "chroma"), start=False)
    try:
        assert not told.ready and told._proc is None
        told.start()
        assert told.wait_ready(120) and told.count("team/x", "m") == 0
        assert called._proc is None
        assert called.count("team/x", "m") == 0  # the first call starts it
        assert called.ready
    finally:
        told.close()
        called.close()
    never = VectorProcess(str(tmp_path / "c" / "chroma"), start=False)
    never.close()  # nothing started, nothing to stop
    assert never._proc is None


def test_a_second_child_waits_for_the_first_to_let_go_of_the_folder(tmp_path):
    path = str(tmp_path / "chroma")
    first = VectorProcess(path)
    assert first.wait_ready(120)
    second = VectorProcess(path)
    try:
        assert not second.wait_ready(1.0)  # held by the first
        first.close()
        assert second.wait_ready(120) and second.count("team/x", "m") == 0
    finally:
        first.close()
        second.close()


def test_a_runtime_starts_its_deferred_index_when_told_before_or_after_the_model(tmp_path):
    from server.service.core.runtime import Runtime

    for tell_first in (True, False):
        env = {"PATTERN_HOME": str(tmp_path / f"rt{tell_first}"), "PATTERN_EMBEDDER": "hash",
               "PATTERN_PROJECT_ID": "p", "PATTERN_AGENT_ID": "a",
               "PATTERN_VECTOR_INDEX_FROM": "0"}  # fmt: skip
        rt = Runtime.start(env, tmp_path, model="on_demand", defer_vectors=True)
        try:
            if tell_first:
                rt.start_vectors()  # the server serves before the model loaded
            rt.wait_ready(60)
            assert isinstance(rt.engine.vectors, VectorProcess)
            if not tell_first:
                assert rt.engine.vectors._proc is None  # deferred until told
                rt.start_vectors()
            assert rt.engine.vectors.wait_ready(120)
        finally:
            rt.close()


def test_health_reports_a_vector_index_that_cannot_open(tmp_path):
    from retrieval.engine import Engine
    from server.service.core.identity import Identity
    from server.service.core.maintenance import health
    from server.service.memories.memory import MemoryService

    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "chroma.lock").mkdir()  # the child cannot take its folder lock
    eng = Engine(tmp_path / "store", HashEmbedder(), vector_process=True)
    try:
        assert not eng.vectors.wait_ready(60)
        res = health(MemoryService(eng), Identity(project_id="p", agent_id="a"))
        assert res.status == "degraded"
        assert any("vector index unavailable" in i for i in res.issues)
    finally:
        eng.close()


def test_a_write_applied_while_the_index_answers_a_search_is_still_found(held, make_record):
    """The records waiting in the outbox are read before the index is asked: a record the
    writer applies between the index's answer (without it) and the outbox read is found."""
    eng, gate = held
    rec = make_record("harbour crane maintenance window")
    eng.apply(add=[rec])
    real = eng.ranker.vectors.query

    def query(*args, **kw):
        hits = real(*args, **kw)  # answered before the writer applies the record
        gate.set()
        assert eng.wait_vectors(10)
        return hits

    eng.ranker.vectors.query = query
    assert indexed(eng, rec) == 0
    assert vector_ids(eng, "harbour crane maintenance window") == [rec.id]
    assert indexed(eng, rec) == 1 and eng._sync.pending_ids() == set()
