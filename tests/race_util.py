"""Concurrency for tests: run the same call in several threads released at once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def race(n: int, fn: Callable[[int], Any]) -> list:
    """Run ``fn(i)`` in ``n`` threads released at once; [result or exception]."""
    out: list = [None] * n
    barrier = threading.Barrier(n)

    def run(i: int) -> None:
        barrier.wait()
        try:
            out[i] = fn(i)
        except Exception as exc:
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out
