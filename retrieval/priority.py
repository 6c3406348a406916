"""Readers first: a recall is not queued behind the writes of other agents.

Python runs one thread at a time (the GIL); with eight agents writing, a recall's thread
shared the interpreter with every write's (recall p95 128 ms with eight writers against 15 ms
alone). :class:`ReadersFirst` lets a read finish first: a read runs inside
:meth:`~ReadersFirst.reading`, and a write calls :meth:`~ReadersFirst.give_way` between its
stages (before its embedding, its transaction, each batch of a bulk write), where it waits
for the reads *already running* to end, never for reads that start while it waits, and at
most ``max_wait`` seconds. A stream of reads therefore delays a stage by at most one read
(a few ms to tens of ms), never starves it. The model's and SQLite's native work release the
GIL and are not held back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

MAX_WAIT_S = 0.05  # per stage of a write, whatever the reads


class ReadersFirst:
    """Reads counted in (each with a ticket, in the order they started), writes giving way to
    the reads that started before them."""

    def __init__(self, max_wait: float = MAX_WAIT_S) -> None:
        self.max_wait = max_wait
        self._cond = threading.Condition(threading.Lock())
        self._next = 0  # the next read's ticket
        self._running: set[int] = set()  # tickets of the reads running
        self._mine = threading.local()  # this thread's reads in progress

    @contextmanager
    def reading(self) -> Iterator[None]:
        """A read: writes that reach :meth:`give_way` meanwhile wait for it to end."""
        with self._cond:
            ticket = self._next
            self._next += 1
            self._running.add(ticket)
        self._mine.depth = getattr(self._mine, "depth", 0) + 1
        try:
            yield
        finally:
            with self._cond:  # first: the count never leaks, whatever happens below
                self._running.discard(ticket)
                self._cond.notify_all()
            self._mine.depth = max(0, getattr(self._mine, "depth", 0) - 1)

    def give_way(self) -> None:
        """Wait until the reads running now have ended, at most :attr:`max_wait` seconds. A
        thread that is itself reading (a search that writes) never waits: it would wait for
        itself."""
        if not self._running or getattr(self._mine, "depth", 0):  # no lock taken
            return
        deadline = time.monotonic() + self.max_wait
        with self._cond:
            before = self._next  # reads with a smaller ticket started before this call
            while self._running and min(self._running) < before:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(left)
