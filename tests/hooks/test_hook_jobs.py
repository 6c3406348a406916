"""The hook service's background jobs: a transcript read asked for while the same read runs is
run again after it (the transcript may have grown since the running one read it)."""

from __future__ import annotations

import queue
import threading

from server.service.prompting.hook_events import HookService


def _bare() -> HookService:
    hs = object.__new__(HookService)
    hs._jobs, hs._worker, hs._worker_lock, hs._pending = (
        queue.Queue(),
        None,
        threading.Lock(),
        set(),
    )
    return hs


def test_a_read_asked_for_while_the_same_read_runs_runs_again_after_it():
    hs = _bare()
    started, release, runs = threading.Event(), threading.Event(), []

    def read():
        runs.append(1)
        started.set()
        release.wait(10)

    key = ("agent", "/t/session.jsonl", False, False)
    assert hs._queue(key, read)
    assert started.wait(10)
    assert hs._queue(key, read)  # while the first runs: queued, not dropped
    assert not hs._queue(key, read)  # the second is waiting: the same one is not queued twice
    release.set()
    hs._jobs.join()
    assert len(runs) == 2


def test_one_hook_event_is_the_detectors_once_even_while_it_runs():
    hs = _bare()
    started, release, runs = threading.Event(), threading.Event(), []

    def live():
        runs.append(1)
        started.set()
        release.wait(10)

    key = ("episode-event", "session", "call-1")
    assert hs._queue(key, live)
    assert started.wait(10)
    assert not hs._queue(key, live)
    release.set()
    hs._jobs.join()
    assert len(runs) == 1
