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

The cores are the other thing a recall waits for: with many agents writing, their processes,
their bridges and the daemon's writes keep both cores busy. :class:`WriteLane` runs the
writes on threads a few steps below the process's CPU priority (``PATTERN_WRITE_NICE``,
default 10; 0 keeps them at the process's), so the kernel gives a core to a recall's thread
first. On a
machine with a core to spare this changes nothing.
"""

from __future__ import annotations

import contextvars
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

from retrieval.errors import InvalidInput

T = TypeVar("T")

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


# how much lower than the process the write lane's threads run (Linux ``nice`` steps; 0: as
# the process)
WRITE_NICE_ENV = "PATTERN_WRITE_NICE"
WRITE_NICE = 10
LANE_THREADS = 32  # writes running at once on the lane; more wait for a thread


def write_nice(environ: Mapping[str, str] = os.environ) -> int:
    """The lane's step below the process's priority: ``PATTERN_WRITE_NICE`` (0 to 19; anything
    else is ``InvalidInput``)."""
    raw = environ.get(WRITE_NICE_ENV, "").strip()
    if not raw:
        return WRITE_NICE
    value = int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 2 else -1
    if not 0 <= value <= 19:
        raise InvalidInput(
            f"{WRITE_NICE_ENV} must be a whole number from 0 to 19; found {raw[:40]!r}",
            variable=WRITE_NICE_ENV,
            value=raw[:40],
        )
    return value


def lower_this_thread(step: int) -> bool:
    """Lower the calling thread's CPU priority by ``step`` (Linux: a thread is a task of its
    own, with its own nice value); True when it was lowered. Elsewhere, or when the kernel
    refuses, the thread keeps the process's priority."""
    if step <= 0 or not sys.platform.startswith("linux"):
        return False
    tid = threading.get_native_id()
    try:
        now = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(19, now + step))
    except OSError:
        return False
    return True


class WriteLane:
    """Writes run on threads of their own, a few steps below the process's CPU priority, so
    that when the cores are busy the kernel runs a recall's thread (and the agents' own
    processes) before a write's. A lone write is not slowed: priority only orders threads that
    wait for a core. The step is one-way (an unprivileged thread cannot raise its priority
    back), hence threads kept for writes rather than a step taken and undone per call."""

    def __init__(self, step: int | None = None, threads: int = LANE_THREADS) -> None:
        self._step = step
        self._threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._mine = threading.local()
        self.lowered = False  # whether the kernel took the step (on the lane's first thread)

    @property
    def step(self) -> int:
        if self._step is None:
            self._step = write_nice()
        return self._step

    def _start_thread(self) -> None:
        self._mine.lane = True
        if lower_this_thread(self.step):
            self.lowered = True

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    self._threads, thread_name_prefix="write-lane", initializer=self._start_thread
                )
            return self._pool

    def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` on a lane thread (its context copied), its result or its exception; on the
        calling thread when that is a lane thread already."""
        if getattr(self._mine, "lane", False):
            return fn()
        ctx = contextvars.copy_context()
        return self._executor().submit(ctx.run, fn).result()

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)


WRITES = WriteLane()  # the process's lane (its step read from the environment at first use)
