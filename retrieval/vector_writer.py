"""The background vector writer: applies the outbox to the vector index after commits, in one
thread, so a write returns at COMMIT and concurrent writes share Chroma calls.

Chroma's cost is per call more than per vector (~10 ms of CPU for an upsert of 1 vector, ~15
for 8, docs/benchmarks.md "Session 6"), and each visibility bucket is its own collection, so
applying every write's row on its own thread (as :meth:`VectorSync.after_commit` does inline)
costs one call per write. The writer applies whatever accumulated while it was busy: under load
its rounds grow, and the calls per write fall.

Read-your-writes is kept by the ranker: records whose rows are still in the outbox are scored
exactly from their stored vectors (:meth:`VectorSync.pending_ids`). A failing vector index is
retried with exponential backoff; the writer's last error is reported with the next writes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class BackgroundWriter:
    """Runs ``apply`` in one thread after each :meth:`kick`, again while kicks arrive during a
    run, and with exponential backoff (``first`` doubled up to ``cap`` s) while it raises."""

    def __init__(
        self,
        apply: Callable[[], object],
        *,
        first: float = 0.5,
        cap: float = 30.0,
        name: str = "vector-writer",
    ) -> None:
        self._apply = apply
        self.first, self.cap, self.name = first, cap, name
        self._cond = threading.Condition()
        self._wanted = False  # kicked since the last run started
        self._busy = False
        self._stop = False
        self._thread: threading.Thread | None = None
        self.runs = 0
        self.last_error: str | None = None

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
        delay = self.first
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._wanted or self._stop)
                if not self._wanted:
                    return  # stopped with nothing left to apply
                self._wanted, self._busy = False, True
            ok = True
            try:
                self._apply()
            except Exception as exc:  # the vector index raises many kinds: try again later
                ok = False
                log.warning("vector index update failed (next try in %.1f s): %s", delay, exc)
                error = f"{type(exc).__name__}: {exc}"
            with self._cond:
                self._busy = False
                self.runs += 1
                if ok:
                    self.last_error, delay = None, self.first
                else:
                    self.last_error, self._wanted = error, True
                self._cond.notify_all()
                if not ok:
                    if self._cond.wait_for(lambda: self._stop, delay):
                        return  # closing while the index fails: the outbox keeps the rows
                    delay = min(self.cap, delay * 2)

    @property
    def idle(self) -> bool:
        """Nothing asked for and nothing running."""
        with self._cond:
            return not self._wanted and not self._busy

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every kick so far has been applied; False on timeout (or while the index
        keeps failing)."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._wanted and not self._busy, timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Apply what is asked for (up to ``timeout``; not while the index fails: the outbox
        keeps the rows for the next start), then stop the thread."""
        if self.last_error is None:
            self.wait_idle(timeout)
        with self._cond:
            self._stop = True
            thread = self._thread
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)


__all__ = ["BackgroundWriter"]
