"""How a ``pattern-memory`` process ends once its command has returned.

The interpreter's own exit stops every daemon thread that still runs with ``pthread_exit`` at
the thread's next hand-over of the GIL. When that thread is in Python called from Rust or C++
(pydantic building a tool's schema, a model runtime's callback), the unwinding cannot pass those
frames and the process crashes (SIGABRT, at times SIGSEGV, and a core file) after a command (a
daemon's drain, checkpoint and close) that had finished cleanly. A daemon stopped soon after it
started still has such threads: the tools being built after the first answer, the model
loading, the prompt gate's word list.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import traceback

# the status of a process whose last output could not be written (as the interpreter's own exit)
UNWRITTEN = 120


def status(code: object) -> int:
    """A ``SystemExit`` code as the interpreter turns it into a status: None is 0, an int is
    itself, anything else is printed to stderr and is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def leave(code: int) -> int:
    """What the interpreter's exit does first (join the threads that are not daemons, run the
    ``atexit`` functions), then ``os._exit`` if a daemon thread still runs; ``code`` when none
    does, for the normal exit. Output that cannot be written makes a status 0 into
    :data:`UNWRITTEN`, as the interpreter's exit does; an interrupt while it waits for the
    threads stops the wait."""
    shutdown = getattr(threading, "_shutdown", None)  # what Py_FinalizeEx calls first
    try:
        if shutdown is not None:
            shutdown()
        atexit._run_exitfuncs()
    except KeyboardInterrupt:  # a second Ctrl-C: the threads are not waited for any longer
        pass
    if not any(t.daemon and t.is_alive() for t in threading.enumerate()):
        return code
    code = _flushed(code)
    os._exit(code)


def _flushed(code: int) -> int:
    try:
        sys.stdout.flush()
    except (OSError, ValueError) as exc:  # a full disk, a closed pipe
        _say(f"pattern-memory: the output could not be written: {exc}")
        code = code or UNWRITTEN
    try:
        sys.stderr.flush()
    except (OSError, ValueError):  # nowhere left to say anything
        pass
    return code


def _say(text: str) -> None:
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def run(main) -> int:
    """``main()``'s status, its ``SystemExit`` or an exception it let through included (the
    exception's traceback printed, status 1), then :func:`leave`."""
    try:
        code = main()
    except SystemExit as exc:
        code = status(exc.code)
    except Exception:  # the traceback, as the interpreter prints it, before leaving
        traceback.print_exc()
        code = 1
    return leave(status(code))
