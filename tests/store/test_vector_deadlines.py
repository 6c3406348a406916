"""Every call to the vector index's process has a deadline: a caller's own (a hook's) or its
kind's; a miss makes the index unavailable until the child answers a ping, and a child that
leaves a ping unanswered (stopped, deadlocked) is killed and restarted, calls or none. A child
that is merely slow answers the ping and is kept. Real child processes and Chroma."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

from retrieval.embedding.embedder import HashEmbedder
from retrieval.records import RecordFilter
from retrieval.vector import vector_child
from retrieval.vector.vector_child import VectorTimeout, deadline_for, hang_seconds
from retrieval.vector.vector_process import VectorProcess
from tests.store.test_vector_restart import wait_until, within

pytestmark = pytest.mark.usefixtures("vector_index")  # tests of the vector index itself

MODEL = HashEmbedder().model_id


@pytest.fixture
def vp(tmp_path):
    proc = VectorProcess(str(tmp_path / "chroma"), hang_s=1.5)
    assert proc.wait_ready(120)
    yield proc
    try:
        os.kill(proc._proc.pid, signal.SIGCONT)
    except ProcessLookupError:
        pass
    proc.close()


def test_deadlines_fit_the_call():
    assert deadline_for("query") == vector_child.RECALL_S <= 2
    assert deadline_for("upsert") == deadline_for("delete") == vector_child.WRITE_S
    assert deadline_for("drop_model") == deadline_for("ids") == vector_child.REBUILD_S
    assert hang_seconds({}) == vector_child.HANG_S
    assert hang_seconds({"PATTERN_VECTOR_HANG_S": "4.5"}) == 4.5
    for bad in ("0", "-1", "inf", "nan", "soon"):
        assert hang_seconds({"PATTERN_VECTOR_HANG_S": bad}) == vector_child.HANG_S


def test_a_callers_deadline_bounds_its_calls_on_a_stopped_child(vp):
    os.kill(vp._proc.pid, signal.SIGSTOP)
    t0 = time.monotonic()
    with vp.query_deadline(0.3), pytest.raises(VectorTimeout) as err:
        vp.query(["team/x"], MODEL, np.ones(8, np.float32), 5)
    assert time.monotonic() - t0 < 1.0
    assert err.value.data == {"method": "query", "deadline_s": 0.3, "path": vp.path}
    assert not vp.ready and "did not answer a query within 0.3 s" in vp.error


def test_a_slow_child_that_answers_the_ping_is_kept(vp):
    first = vp._proc.pid
    os.kill(first, signal.SIGSTOP)
    with vp.query_deadline(0.2), pytest.raises(VectorTimeout):
        vp.query(["team/x"], MODEL, np.ones(8, np.float32), 5)
    assert not vp.ready
    os.kill(first, signal.SIGCONT)  # back before hang_s: it answers the ping
    assert wait_until(lambda: vp.ready, 5) is not None
    assert vp.error is None and vp._proc.pid == first and vp.restarts == 0
    assert vp.count("team/x", MODEL) == 0


def test_an_idle_stopped_child_is_found_by_the_heartbeat(vp, monkeypatch):
    monkeypatch.setattr(vector_child, "HEARTBEAT_S", 0.3)
    first = vp._proc.pid
    os.kill(first, signal.SIGSTOP)  # no call is made: the heartbeat's ping goes unanswered
    hung = "the vector index process did not answer for 1.5 s (hung): killed, restarting it"
    assert wait_until(lambda: vp.error == hung, 10) is not None
    assert vp.wait_ready(120) and vp._proc.pid != first and vp.restarts == 1


def test_an_engine_search_in_a_hooks_deadline_answers_without_the_index(open_engine, make_record):
    eng = open_engine(HashEmbedder(), vector_process=True)
    rec = make_record("winch brake inspection schedule")
    eng.apply(add=[rec])
    assert eng.vectors.wait_ready(120)
    os.kill(eng.vectors._proc.pid, signal.SIGSTOP)
    try:

        def search():
            with eng.vector_query_deadline(0.3):  # the deadline of this thread's calls
                return eng.search("winch brake", RecordFilter(), k=3)

        t0 = time.monotonic()
        hits = within(5, search)
        assert time.monotonic() - t0 < 1.0
        assert [h.record.id for h in hits] == [rec.id]
        assert hits[0].explanation.mode == (
            "hybrid (vector index did not answer: lexical candidates only)"
        )
        assert hits[0].explanation.vector_similarity is not None  # its stored vector
    finally:
        os.kill(eng.vectors._proc.pid, signal.SIGCONT)
