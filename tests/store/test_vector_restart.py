"""A vector index child that dies is noticed at once and restarted by the process that owns it,
without waiting for a call; until the new child has opened its store, health says degraded
with the reason and recall's mode says the vector side was an exact scan. A call sent to the
new child is never failed by the old child's reader."""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import threading
import time

import pytest

from retrieval.embedding.embedder import HashEmbedder
from retrieval.errors import StoreUnavailable
from retrieval.vector import vector_child, vector_process
from retrieval.vector.vector_process import VectorProcess
from server.service.core.identity import Identity
from server.service.core.maintenance import health
from server.service.core.models import RecallInput
from server.service.memories.memory import MemoryService
from server.service.recalling.recall import recall

pytestmark = pytest.mark.usefixtures("vector_index")  # tests of the vector index itself

WHO = Identity(project_id="proj", agent_id="agent")


def wait_until(cond, timeout: float) -> float | None:
    """Seconds until ``cond()`` held (None: it did not within ``timeout``)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if cond():
            return time.monotonic() - t0
        time.sleep(0.01)
    return None


def serving(open_engine, make_record):
    """An engine with its vector index in a child process, one record in it, healthy:
    (the engine, its service, the child's handle, the record)."""
    eng = open_engine(HashEmbedder(), vector_process=True)
    svc = MemoryService(eng)
    rec = make_record("winch brake inspection schedule", project_id="proj", agent_id="agent")
    eng.apply(add=[rec])
    vp = eng.vectors
    assert vp.wait_ready(120) and health(svc, WHO).status == "ok"
    return eng, svc, vp, rec


def test_a_killed_child_is_restarted_at_once_and_health_and_recall_say_so_meanwhile(
    open_engine, make_record, monkeypatch
):
    monkeypatch.setattr(vector_process, "RESTART_DELAYS_S", (0.3, 0.3))  # room to hold its folder
    eng, svc, vp, rec = serving(open_engine, make_record)
    assert recall(svc, WHO, RecallInput(query="winch brake inspection")).mode == "hybrid"
    first = vp._proc.pid
    lock = os.open(f"{vp.path}.lock", os.O_RDWR | os.O_CREAT)
    try:
        os.kill(first, signal.SIGKILL)
        fcntl.flock(lock, fcntl.LOCK_EX)  # free once the child is dead: the next one waits for it
        # noticed and restarted within a second, with no call made
        assert wait_until(lambda: vp._proc.pid != first, 1.0) is not None
        assert not vp.ready and "killed by SIGKILL" in vp.error
        h = health(svc, WHO)
        assert h.status == "degraded"
        assert any("vector index unavailable" in i and "SIGKILL" in i for i in h.issues)
        res = recall(svc, WHO, RecallInput(query="winch brake inspection"))
        assert res.items[0].id == rec.id  # scored exactly from the stored vectors
        assert (
            res.mode == "hybrid (vector index unavailable: exact scan of the newest 50,000 records)"
        )
        assert res.items[0].explanation["mode"] == res.mode
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        os.close(lock)
    assert vp.wait_ready(120) and vp.restarts == 1 and vp.error is None
    assert health(svc, WHO).status == "ok"
    assert recall(svc, WHO, RecallInput(query="winch brake inspection")).mode == "hybrid"
    assert vp.count(rec.bucket, HashEmbedder().model_id) == 1  # the same store, reopened


def test_a_call_sent_to_the_new_child_is_not_failed_by_the_old_reader(tmp_path):
    vp = VectorProcess(str(tmp_path / "chroma"))
    try:
        assert vp.wait_ready(120)
        old = vp._child
        # the old child is stopped, so neither it nor its reader or watchdog can act first:
        # our send fails while its reader still waits on it
        os.kill(old.proc.pid, signal.SIGSTOP)
        try:
            end = socket.socket(fileno=os.dup(old.conn.fileno()))
            end.shutdown(socket.SHUT_WR)
            end.close()
            with pytest.raises(StoreUnavailable):
                vp.count("team/x", "m")
            assert not old.ended.is_set()
        finally:
            os.kill(old.proc.pid, signal.SIGCONT)  # it sees EOF and exits; its reader ends
        assert vp.count("team/x", "m") == 0  # sent to a new child: answered by it
        assert vp._child is not old and old.ended.wait(30)
        assert vp.count("team/x", "m") == 0  # the old reader failed nothing of the new child's
    finally:
        vp.close()


def test_a_child_that_cannot_open_its_store_is_not_restarted_in_a_loop(tmp_path):
    (tmp_path / "chroma.lock").mkdir()  # the child cannot take its folder lock
    vp = VectorProcess(str(tmp_path / "chroma"))
    try:
        assert not vp.wait_ready(60) and "cannot open" in vp.error
        first = vp._proc.pid
        time.sleep(1.0)
        assert vp._proc.pid == first and vp.restarts == 0  # the next call tries again
    finally:
        vp.close()


def within(seconds: float, fn):
    """``fn()``'s value, or a failure when it has not returned within ``seconds`` (it goes on
    in a daemon thread: a hung call must fail the test, not hang it)."""
    out: list = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    t.join(seconds)
    assert out, f"did not return within {seconds} s"
    return out[0]


def test_a_stopped_child_misses_the_recall_deadline_and_is_killed_and_restarted(
    open_engine, make_record, monkeypatch
):
    monkeypatch.setenv("PATTERN_VECTOR_HANG_S", "2")
    eng, svc, vp, rec = serving(open_engine, make_record)
    first = vp._proc.pid
    os.kill(first, signal.SIGSTOP)  # alive, but answering nothing
    try:
        t0 = time.monotonic()
        res = within(10, lambda: recall(svc, WHO, RecallInput(query="winch brake inspection")))
        assert time.monotonic() - t0 < vector_child.RECALL_S + 1.0
        assert res.items[0].id == rec.id  # found lexically, its stored vector scored
        assert res.mode == "hybrid (vector index did not answer: lexical candidates only)"
        h = health(svc, WHO)
        assert h.status == "degraded"
        assert any("did not answer a query within" in i for i in h.issues), h.issues
        # the next recall does not wait again: the index counts as unavailable meanwhile
        t0 = time.monotonic()
        res = within(10, lambda: recall(svc, WHO, RecallInput(query="winch brake inspection")))
        assert time.monotonic() - t0 < 1.0 and "exact scan" in res.mode
        # silent for PATTERN_VECTOR_HANG_S: killed, like a dead child, and restarted
        hung = "the vector index process did not answer for 2 s (hung): killed, restarting it"
        assert wait_until(lambda: vp.error == hung, 10) is not None
        assert wait_until(lambda: vp._proc.pid != first, 10) is not None
    finally:
        try:
            os.kill(first, signal.SIGCONT)
        except ProcessLookupError:
            pass
    assert vp.wait_ready(120) and vp.restarts == 1
    assert health(svc, WHO).status == "ok"
    assert recall(svc, WHO, RecallInput(query="winch brake inspection")).mode == "hybrid"
