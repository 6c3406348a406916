"""The write lane (``retrieval/priority.py``): a write runs on a thread of its own a few steps
below the process's CPU priority, returns its result or raises its exception, sees the caller's
context, and a write made from inside a write runs where it is (no wait on a lane that may be
full). The write tools go through it; the read tools do not. Real threads, a real engine in a
temp folder, a real MCP client session."""

from __future__ import annotations

import contextvars
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.errors import InvalidInput
from retrieval.priority import WriteLane, lower_this_thread, write_nice
from server.service.memories.memory import MemoryService
from tests.mcp_util import identity_env, in_process, runtime_on

LINUX = sys.platform.startswith("linux")


@contextmanager
def _lane(step: int, threads: int) -> Iterator[WriteLane]:
    lane = WriteLane(step=step, threads=threads)
    try:
        yield lane
    finally:
        lane.close()


def _nice_of_this_thread() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def test_a_write_runs_on_a_lane_thread_and_returns_its_result():
    with _lane(step=3, threads=2) as lane:
        name, value = lane.run(lambda: (threading.current_thread().name, 42))
        assert name.startswith("write-lane") and value == 42


def test_its_exception_reaches_the_caller():
    lane = WriteLane(step=0, threads=1)

    def fails() -> None:
        raise KeyError("the write's own error")

    try:
        with pytest.raises(KeyError, match="the write's own error"):
            lane.run(fails)
        assert lane.run(lambda: "the lane still serves") == "the lane still serves"
    finally:
        lane.close()


def test_the_callers_context_goes_with_the_write():
    who = contextvars.ContextVar("who", default="nobody")
    with _lane(step=0, threads=1) as lane:
        who.set("agent-a")
        assert lane.run(who.get) == "agent-a"


def test_a_write_inside_a_write_runs_in_place_even_on_a_full_lane():
    with _lane(step=0, threads=1) as lane:  # one thread: a nested submit would wait for itself
        outer = lane.run(lambda: (threading.get_ident(), lane.run(threading.get_ident)))
        assert outer[0] == outer[1]


@pytest.mark.skipif(not LINUX, reason="per-thread priority is Linux's")
def test_the_lane_runs_below_the_process_and_the_caller_keeps_its_priority():
    before = _nice_of_this_thread()
    with _lane(step=4, threads=1) as lane:
        inside = lane.run(_nice_of_this_thread)
        assert inside == min(19, before + 4)
        assert lane.lowered == (inside > before)
        assert _nice_of_this_thread() == before  # only the lane's thread was lowered


@pytest.mark.skipif(not LINUX, reason="per-thread priority is Linux's")
def test_step_zero_keeps_the_process_priority():
    before = _nice_of_this_thread()
    with _lane(step=0, threads=1) as lane:
        assert lane.run(_nice_of_this_thread) == before
        assert not lane.lowered


def test_lowering_by_nothing_does_nothing():
    before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) if LINUX else None
    assert lower_this_thread(0) is False
    if LINUX:
        assert _nice_of_this_thread() == before


@pytest.mark.parametrize(
    ("raw", "expected"), [("", 10), ("0", 0), ("19", 19), (" 7 ", 7)]
)  # fmt: skip
def test_the_step_is_read_from_the_environment(raw, expected):
    assert write_nice({"PATTERN_WRITE_NICE": raw}) == expected
    assert write_nice({}) == 10


@pytest.mark.parametrize("raw", ["-1", "20", "ten", "1.5", "9" * 5000, "\u0661", "+3"])
def test_a_step_out_of_range_is_a_clear_error(raw):
    with pytest.raises(InvalidInput, match="PATTERN_WRITE_NICE must be") as err:
        write_nice({"PATTERN_WRITE_NICE": raw})
    assert len(str(err.value)) < 200  # a huge value is not echoed whole
    assert err.value.data["variable"] == "PATTERN_WRITE_NICE"


def test_a_bad_step_stops_the_engine_at_its_start_not_at_a_write(tmp_path, monkeypatch):
    monkeypatch.setattr("retrieval.engine.WRITES", WriteLane())
    monkeypatch.setenv("PATTERN_WRITE_NICE", "loud")
    with pytest.raises(InvalidInput, match="PATTERN_WRITE_NICE"):
        Engine(tmp_path / "store", HashEmbedder())


class _Counting(WriteLane):
    def __init__(self) -> None:
        super().__init__(step=0, threads=2)
        self.threads_seen: list[str] = []

    def run(self, fn):
        def named():
            self.threads_seen.append(threading.current_thread().name)
            return fn()

        return super().run(named)


def test_the_write_tools_use_the_lane_and_the_read_tools_do_not(tmp_path, monkeypatch):
    lane = _Counting()
    svc = MemoryService(Engine(tmp_path / "store", HashEmbedder()))
    monkeypatch.setattr(svc.engine, "writes", lane)
    rt = runtime_on(svc, identity_env(tmp_path / "store", "proj", "agent-a"), tmp_path)
    try:
        with in_process(rt) as client:
            mid = client.ok("remember", {"content": "the cache key holds the build step"})[
                "memoryId"
            ]
            assert lane.threads_seen and lane.threads_seen[-1].startswith("write-lane")
            writes = len(lane.threads_seen)
            client.ok("recall", {"query": "cache key"})
            client.ok("pattern_health")
            assert len(lane.threads_seen) == writes  # reads stay on the caller's thread
            client.ok("forget", {"memoryId": mid})
            assert len(lane.threads_seen) == writes + 1
            assert client.ok("recall", {"query": "cache key"})["items"] == []
    finally:
        svc.engine.close()
        lane.close()
