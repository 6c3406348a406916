"""How a ``pattern-memory`` process ends once its command has returned.

The interpreter's own exit stops every daemon thread that still runs with ``pthread_exit`` at
the thread's next hand-over of the GIL. When that thread is in Python called from Rust or C++
(pydantic building a tool's schema, a model runtime's callback), the unwinding cannot pass those
frames and the process crashes (SIGABRT, at times SIGSEGV, and a core file) after a command (a
daemon's drain, checkpoint and close) that had finished cleanly. A daemon stopped soon after it started
still has such threads: the tools being built after the first answer, the model loading, the
prompt gate's word list.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading


def leave(code: int) -> int:
    """What the interpreter's exit does first (join the threads that are not daemons, run the
    ``atexit`` functions), then ``os._exit(code)`` if a daemon thread still runs; ``code`` when
    none does, for the normal exit."""
    shutdown = getattr(threading, "_shutdown", None)  # what Py_FinalizeEx calls first
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()
    if not any(t.daemon and t.is_alive() for t in threading.enumerate()):
        return code
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or gone: nothing more can be said there
            pass
    os._exit(code)
