"""Concurrency for tests: run the same call in several threads released at once; wait for
calls to queue in a :class:`~retrieval.group.Group`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any


def race(n: int, fn: Callable[[int], Any], timeout: float | None = None) -> list:
    """Run ``fn(i)`` in ``n`` threads released at once; [result or exception]. With a
    ``timeout``, a call still running after it fails the test (its thread is left behind)."""
    out: list = [None] * n
    barrier = threading.Barrier(n)

    def run(i: int) -> None:
        barrier.wait(timeout)
        try:
            out[i] = fn(i)
        except Exception as exc:
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    hung = [i for i, t in enumerate(threads) if t.is_alive()]
    assert not hung, f"calls {hung} still run after {timeout} s"
    return out


def wait_queued(group, n: int, timeout: float) -> None:
    """Wait until ``n`` calls wait in ``group``'s queue (a :class:`~retrieval.group.Group`)."""
    end = time.monotonic() + timeout
    while len(group._queue) < n:  # noqa: SLF001
        assert time.monotonic() < end, "the writers never queued"
        time.sleep(0.005)
