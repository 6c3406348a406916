"""Concurrent calls done together: many writers' texts embedded in one model call, many
writers' transactions committed in one SQLite transaction (group commit).

:class:`Group` is the mechanism: the first caller to arrive runs the work of every call
queued at that moment in one go (``run_many``); calls that arrive meanwhile queue, and when
the round ends the first of them runs the next round. Nobody waits for a timer: a lone caller
runs at once, and under load each round takes what queued while the previous one ran. Every
caller gets its own result or its own exception.

:class:`CommitGroup` is the store's group commit: each write is a *body* (its checks and
statements) run inside one ``BEGIN IMMEDIATE … COMMIT`` with the other queued bodies, each in
its own savepoint. A body that raises is rolled back to its savepoint and only its caller gets
the error; the others commit. Every caller returns after the COMMIT: a write is acknowledged
only once it is durable, as when it had its own transaction. A failing COMMIT (or a storage
error that ends the transaction) fails every body of the round: none was written. A caller
already inside a transaction of the store, and PostgreSQL mode (where the transaction runs in
PostgreSQL), run their body alone.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from retrieval.storage.store import storage_error

from .timings import timings

T = TypeVar("T")
R = TypeVar("R")
Body = Callable[[sqlite3.Connection], Any]


class _Call(Generic[T]):
    __slots__ = ("item", "wake", "done", "ok", "value", "ran")

    def __init__(self, item: T) -> None:
        self.item = item
        self.wake = threading.Event()
        self.done = False
        self.ok = False
        self.value: Any = None
        self.ran = 0.0  # seconds of the round that ran this call's own work (CommitGroup)

    def result(self) -> Any:
        """What the caller gets: the call's value, or its exception raised."""
        if self.ok:
            return self.value
        raise self.value


class Group(Generic[T, R]):
    """Calls of ``run_many`` grouped: ``run_many(items)`` returns, per item, its result or the
    exception its caller gets (an exception raised by ``run_many`` itself goes to all)."""

    def __init__(self, run_many: Callable[[list[_Call[T]]], None], limit: int = 64) -> None:
        self._run_many = run_many
        self.limit = limit  # calls per round at most
        self._lock = threading.Lock()
        self._queue: list[_Call[T]] = []
        self._busy = False

    def __call__(self, item: T) -> R:
        return self.run(item).result()

    def run(self, item: T) -> _Call[T]:
        """The call of ``item`` once its round ended (``ok``, ``value``: result or exception)."""
        call = _Call(item)
        with self._lock:
            self._queue.append(call)
            lead = not self._busy
            self._busy = True
        try:
            while not lead:
                call.wake.wait()
                if call.done:
                    break
                call.wake.clear()  # woken to run the next round
                lead = True
        except BaseException:  # interrupted while waiting (a signal's handler raised)
            self._withdraw(call, lead)
            raise
        if lead:
            self._round()
        return call

    def _withdraw(self, call: _Call[T], lead: bool) -> None:
        """``call``'s caller stopped waiting: a call no round took yet leaves the queue (its
        caller got the error: its work never runs); one woken to run the next round passes
        that on, or nobody would run it and every later call would wait forever."""
        with self._lock:
            if call not in self._queue:
                return  # taken by a round: it runs, its result goes unread
            lead = lead or call.wake.is_set()
            self._queue.remove(call)
            if lead:
                if self._queue:
                    self._queue[0].wake.set()
                else:
                    self._busy = False

    def _round(self) -> None:
        with self._lock:
            calls, self._queue = self._queue[: self.limit], self._queue[self.limit :]
        try:
            self._run_many(calls)
        except BaseException as exc:
            for c in calls:
                settle(c, False, exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            for c in calls:
                c.done = True
                c.wake.set()
            with self._lock:
                if self._queue:
                    self._queue[0].wake.set()  # the next round's runner
                else:
                    self._busy = False


def settle(call: _Call, ok: bool, value: Any) -> None:
    call.ok, call.value = ok, value


class CommitGroup:
    """Group commit of a store's write transactions (see the module)."""

    SAVEPOINT = "pattern_write"

    def __init__(self, store) -> None:
        self.store = store
        self._group: Group[Body, Any] = Group(self._run_many)

    def __call__(self, body: Body) -> Any:
        store = self.store
        if store.canonical is not None or store.in_write():
            with timings.stage("commit"), store.transaction() as conn:
                return body(conn)
        t0, c0 = time.perf_counter(), time.thread_time()
        with timings.paused():  # the round may run other writes' bodies on this thread
            call = self._group.run(body)
        waited = time.perf_counter() - t0
        # the processor time of this thread: its round's bodies and COMMIT, if it ran one
        timings.add("commit", min(call.ran, waited), time.thread_time() - c0)
        timings.add("waiting", max(0.0, waited - call.ran))
        return call.result()

    def _run_many(self, calls: list[_Call[Body]]) -> None:
        commit = 0.0
        try:
            with self.store.transaction() as conn:
                for c in calls:
                    b0 = time.perf_counter()
                    conn.execute(f"SAVEPOINT {self.SAVEPOINT}")
                    try:
                        settle(c, True, c.item(conn))
                        conn.execute(f"RELEASE {self.SAVEPOINT}")
                    except Exception as exc:
                        if not conn.in_transaction:  # SQLite ended the transaction: all fail
                            raise
                        conn.execute(f"ROLLBACK TO {self.SAVEPOINT}")
                        conn.execute(f"RELEASE {self.SAVEPOINT}")
                        failed = (storage_error(exc, self.store.path, "nothing was written")
                                  if isinstance(exc, sqlite3.Error) else None)  # fmt: skip
                        settle(c, False, failed or exc)
                    c.ran = time.perf_counter() - b0
                c0 = time.perf_counter()
            commit = time.perf_counter() - c0
        except Exception as exc:  # nothing of the round was written
            for c in calls:
                settle(c, False, exc)
        for c in calls:
            c.ran += commit


__all__ = ["CommitGroup", "Group"]
