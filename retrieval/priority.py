"""Readers first: a recall never waits behind the writes of other agents.

Python runs one thread at a time (the GIL); with eight agents writing, a recall's thread
shares the interpreter with every write's, and waited for them (recall p95 128 ms with eight
writers against 15 ms alone). :class:`ReadersFirst` gives a read the interpreter: a read
runs inside :meth:`~ReadersFirst.reading`, and a write calls :meth:`~ReadersFirst.give_way`
between its stages, where it waits while any read is running, at most ``max_wait`` seconds
each time (a write is slowed, never starved: a stream of reads cannot hold it longer). The
model's and SQLite's native work release the GIL and are not held back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

MAX_WAIT_S = 0.05  # per stage of a write


class ReadersFirst:
    """Reads counted in, writes giving way to them."""

    def __init__(self, max_wait: float = MAX_WAIT_S) -> None:
        self.max_wait = max_wait
        self._cond = threading.Condition(threading.Lock())
        self._reading = 0
        self._mine = threading.local()  # this thread's reads in progress

    @contextmanager
    def reading(self) -> Iterator[None]:
        """A read: writes that reach :meth:`give_way` meanwhile wait for it to end."""
        with self._cond:
            self._reading += 1
        self._mine.depth = getattr(self._mine, "depth", 0) + 1
        try:
            yield
        finally:
            self._mine.depth -= 1
            with self._cond:
                self._reading -= 1
                if not self._reading:
                    self._cond.notify_all()

    def give_way(self) -> None:
        """Wait while a read is running, at most :attr:`max_wait` seconds. A thread that is
        itself reading (a search that writes) never waits: it would wait for itself."""
        if not self._reading or getattr(self._mine, "depth", 0):  # no lock taken
            return
        deadline = time.monotonic() + self.max_wait
        with self._cond:
            while self._reading:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(left)
