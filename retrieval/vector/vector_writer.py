"""The background vector writer: applies the outbox to the vector index after commits, in one
thread, so a write returns at COMMIT and concurrent writes share Chroma calls.

Chroma's cost is per call more than per vector (~10 ms of CPU for an upsert of 1 vector, ~15
for 8, docs/benchmarks.md, "the vector index in a child process"), and each visibility bucket is its own collection, so
applying every write's row on its own thread (as :meth:`VectorSync.after_commit` does inline)
costs one call per write. The writer applies whatever accumulated while it was busy: under load
its rounds grow, and the calls per write fall. A round starts at least ``gap`` seconds after
the one before (``PATTERN_VECTOR_WRITE_GAP_MS``, default 200): under a stream of writes the
rounds are fewer and larger, and the index's process has time between them for the queries of
recalls and of write candidates (which otherwise wait behind upserts). A first write after a
pause is applied at once.

Read-your-writes is kept by the ranker: records whose rows are still in the outbox are scored
exactly from their stored vectors (:meth:`VectorSync.pending_ids`). A failing vector index is
retried with exponential backoff; the writer's last error is reported with the next writes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class BackgroundWriter:
    """Runs ``apply`` in one background thread after :meth:`kick`, again when kicked during a
    run, and with exponential backoff while it raises: the pause after a failure doubles the
    one before it, from ``first`` up to ``cap`` seconds. ``pause_first``: every run waits
    ``first`` seconds before it starts (a retry timer); otherwise a run starts at once unless
    the one before failed. The thread ends once a run succeeds with no kick since it started;
    the next kick starts another (:attr:`active`)."""

    def __init__(
        self,
        apply: Callable[[], object],
        *,
        first: float = 0.5,
        cap: float = 30.0,
        name: str = "vector-writer",
        pause_first: bool = False,
        gap: float = 0.0,
    ) -> None:
        self._apply = apply
        self.gap = gap  # seconds between the start of a round and the next (see the module)
        self.first, self.cap, self.name = first, cap, name
        self.pause_first = pause_first
        self._cond = threading.Condition()
        self._wanted = False  # kicked since the last run started
        self._busy = False
        self._stop = False
        self._thread: threading.Thread | None = None
        self.attempts = 0
        self.last_error: str | None = None

    @property
    def active(self) -> bool:
        """A thread runs, waits to run again, or backs off."""
        with self._cond:
            return self._thread is not None

    def kick(self) -> None:
        with self._cond:
            if self._stop:
                return
            self._wanted = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _loop(self) -> None:
        pause = self.first if self.pause_first else 0.0
        while True:
            with self._cond:
                stopped = pause > 0 and self._cond.wait_for(lambda: self._stop, pause)
                if stopped or self._stop or not self._wanted:
                    self._thread = None  # done, or closing (the outbox keeps what is left)
                    self._cond.notify_all()
                    return
                self._wanted, self._busy = False, True
            started = time.monotonic()
            error = None
            try:
                self._apply()
            except Exception as exc:  # the vector index raises many kinds: try again later
                error = f"{type(exc).__name__}: {exc}"
                pause = min(self.cap, max(self.first, 2 * pause))
                log.warning("vector index update failed (next try in %.1f s): %s", pause, exc)
            else:
                pause = self.first if self.pause_first else 0.0
                pause = max(pause, self.gap - (time.monotonic() - started))
            with self._cond:
                self._busy = False
                self.attempts += 1
                self.last_error = error
                if error is not None:
                    self._wanted = True
                self._cond.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every kick so far has been applied; False on timeout (or while the index
        keeps failing)."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._wanted and not self._busy, timeout)

    def close(self, timeout: float = 30.0, *, drain: bool = True) -> None:
        """Stop the thread; with ``drain``, first apply what is asked for (up to ``timeout``,
        and not past a failed run: the outbox keeps the rows for the next start)."""
        with self._cond:
            if drain:
                self._cond.wait_for(
                    lambda: not self._busy and (not self._wanted or self.last_error is not None),
                    timeout,
                )
            self._stop = True
            thread = self._thread
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)


__all__ = ["BackgroundWriter"]
