"""The vector index's child process stopped (SIGSTOP: alive, answering nothing) or killed
(SIGKILL) under a running daemon: recall and hooks answer within their deadlines (lexical
candidates, or an exact scan of stored vectors, and say so), writes are acknowledged and kept,
health names the fault, and the child is restarted (a stopped one once it leaves a ping
unanswered for ``PATTERN_VECTOR_HANG_S``)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.faults.harness import Daemon, issues_naming, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("vector_index")]  # the index itself

RECALL_DEADLINE = 2.0 + 1.5  # the vector query's 2 s, and the rest of a recall on 2 busy cores
HOOK_DEADLINE = 1.5  # a hook's own (PATTERN_HOOK_DEADLINE's default)


@pytest.fixture
def daemon(tmp_path, daemon_at):
    return daemon_at(tmp_path / "home", {"PATTERN_VECTOR_HANG_S": "3"})


def _hybrid_and_healthy(d: Daemon, query: str, want: str) -> None:
    wait_for(lambda: d.health()["status"] == "ok" and d.health()["pendingVectorWrites"] == 0,
             60, "the vector index applied every write")  # fmt: skip
    out = d.recall(query, RECALL_DEADLINE)
    assert out["mode"] == "hybrid" and out["items"][0]["id"] == want


def test_a_stopped_vector_child(daemon):
    d = daemon.start()
    first = d.remember("the billing service retries failed invoices three times")
    _hybrid_and_healthy(d, "billing invoice retries", first)
    child = d.vector_child()
    os.kill(child, signal.SIGSTOP)
    try:
        out = d.recall("billing invoice retries", RECALL_DEADLINE)  # no hang
        assert out["items"][0]["id"] == first
        assert out["mode"] == "hybrid (vector index did not answer: lexical candidates only)"
        h = d.health()
        assert h["status"] == "degraded"
        assert issues_naming(h, "vector index unavailable", "did not answer a query within 2 s")
        # a hook answers within its own deadline, from its lexical candidates
        t0 = time.monotonic()
        status, _ = d.post("/hooks/UserPromptSubmit", {"input": {
            "prompt": "how often does billing retry invoices?", "session_id": "s1",
            "cwd": str(d.home)}}, timeout=HOOK_DEADLINE + 5)  # fmt: skip
        assert status == 200 and time.monotonic() - t0 < HOOK_DEADLINE
        # a write is acknowledged at COMMIT, the vector index catching up later
        second = d.remember("invoices older than 90 days go to the collections team")
        # silent for 3 s: killed and restarted, and health says why meanwhile
        wait_for(lambda: issues_naming(d.health(), "did not answer for 3 s (hung)")
                 or d.vector_child() != child, 20, "the hung child is killed")  # fmt: skip
        assert wait_for(lambda: d.vector_child() != child, 20, "a new child")
    finally:
        try:
            os.kill(child, signal.SIGCONT)
        except ProcessLookupError:
            pass
    _hybrid_and_healthy(d, "invoices collections team 90 days", second)
    assert {first, second} <= d.visible_ids()


def test_a_killed_vector_child(daemon):
    d = daemon.start()
    first = d.remember("the deploy pipeline runs database migrations before the canary")
    _hybrid_and_healthy(d, "deploy migrations canary", first)
    child = d.vector_child()
    os.kill(child, signal.SIGKILL)
    second = d.remember("canary traffic is five percent for thirty minutes")
    out = d.recall("canary traffic percent", RECALL_DEADLINE)
    assert out["items"][0]["id"] == second
    h = wait_for(lambda: (h := d.health())["issues"] and h, 5, "health names the death")
    if h["status"] == "degraded":  # the new child may have opened already
        assert issues_naming(h, "vector index unavailable", "killed by SIGKILL"), h["issues"]
    assert wait_for(lambda: d.vector_child() != child, 20, "a new child")
    _hybrid_and_healthy(d, "canary traffic percent", second)
    _hybrid_and_healthy(d, "deploy migrations canary", first)
    assert {first, second} <= d.visible_ids()
