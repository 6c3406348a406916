"""What a daemon does once it serves: collection resumes with start-up's objects frozen, and
what the first answer did not need (the vector index's process, the MCP tools not built yet)
starts after that answer, in a thread of its own, unless the daemon is already stopping."""

from __future__ import annotations

import gc
import logging
import threading
import time

log = logging.getLogger(__name__)

# what the first answer does not need waits for it at most this long once the model loaded
FIRST_ANSWER_WAIT_S = 3.0
MODEL_WAIT_S = 60.0  # ... and for the model at most this long


def serving(rt, later=(), stopping=None):
    """Once the daemon serves: what start-up made is frozen (later collections skip it) and
    collection resumes; then :func:`after_first_answer` in a thread of its own (returned)."""
    gc.freeze()
    gc.enable()
    thread = threading.Thread(target=after_first_answer, args=(rt, later, stopping),
                              name="after-first-answer", daemon=True)  # fmt: skip
    thread.start()
    return thread


def after_first_answer(rt, later=(), stopping=None) -> None:
    """What the first answer does not need starts after it: the vector index's process (its
    start costs ~1 s of processor time beside the daemon's; until it has opened its store a
    search scores the stored vectors exactly) and ``later`` (the MCP tools not built yet:
    ~0.5 s holding the interpreter's lock). It waits for the model,
    then for the first search that ranked with it, at most :data:`FIRST_ANSWER_WAIT_S` (a
    daemon nobody asks). Once ``stopping`` is set (the daemon drains) it stops waiting and
    starts nothing more: the store is about to close."""
    if stopping is None:
        stopping = threading.Event()
    try:
        _wait_unless(stopping, rt.model_ready, MODEL_WAIT_S)
        _wait_unless(stopping, rt.engine.answered, FIRST_ANSWER_WAIT_S)
    finally:
        if not stopping.is_set():
            try:
                rt.start_vectors()
            except Exception:  # the index's process is not this thread's to fail: the tools
                log.exception("the vector index's process could not be started")
        for fn in later:
            if stopping.is_set():
                break
            fn()


def _wait_unless(stopping, event, timeout: float) -> None:
    """Wait for ``event`` at most ``timeout`` seconds, less if ``stopping`` is set meanwhile."""
    end = time.monotonic() + timeout
    while not event.is_set() and not stopping.is_set():
        left = end - time.monotonic()
        if left <= 0:
            return
        event.wait(min(left, 0.05))
