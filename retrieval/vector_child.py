"""The vector index's child process (:class:`~retrieval.vector_process.VectorProcess` starts it
as ``python -m retrieval.vector_child FD PATH``): opens the Chroma folder and answers calls on
the socket ``FD`` until told to stop or the parent goes away.

Protocol: pickled tuples, ``(call id, method, args)`` in, ``(call id, ok, value or (error type,
text))`` out; id 0 is the "opened" message. Calls run on a small pool; a :data:`PING` is
answered by the receiving loop itself, so the parent learns the process is alive even while
every worker is busy (as soon as the interpreter runs at all: a Chroma call that holds the GIL
delays it, one that never returns does not stop it).
"""

from __future__ import annotations

import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection

from .errors import StoreUnavailable

PING = "ping"  # a liveness probe: answered (id, True, None) by the loop, never by Chroma
HOLD_TIMEOUT_S = 30.0  # how long a new child waits for a previous one to release the folder


def hold_folder(path: str, timeout: float = HOLD_TIMEOUT_S) -> None:
    """Take ``<path>.lock`` (an exclusive ``flock``, held until this process exits): a child
    whose server was killed may still be finishing a call, and a second process must not
    write the same Chroma folder; the new child waits for it (up to ``timeout``)."""
    from . import locks

    try:
        locks.wait(f"{path}.lock", timeout)  # the descriptor stays open: held until exit
    except locks.Held:
        raise StoreUnavailable(f"{path} is held by another process", path=path) from None


def serve(fd: int, path: str) -> int:
    """Open the vector index at ``path`` and answer calls on ``fd`` until told to stop or the
    parent goes away (its end of the socket closes)."""
    conn = Connection(fd)
    try:
        hold_folder(path)
        from .vectors import VectorIndex

        index = VectorIndex(path)
    except Exception as exc:
        conn.send((0, False, f"cannot open the vector index: {type(exc).__name__}: {exc}"))
        return 1
    conn.send((0, True, None))
    send = threading.Lock()

    def answer(cid: int, method: str, args: tuple) -> None:
        try:
            out = (cid, True, getattr(index, method)(*args))
        except Exception as exc:  # sent back as text: the parent does not import chromadb
            out = (cid, False, (type(exc).__name__, str(exc)))
        with send:
            conn.send(out)

    pool = ThreadPoolExecutor(4, thread_name_prefix="vector-call")
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            break
        if msg is None:
            break
        if msg[1] == PING:
            with send:
                conn.send((msg[0], True, None))
            continue
        pool.submit(answer, *msg)
    pool.shutdown(wait=True)
    index.close()
    return 0


if __name__ == "__main__":  # pragma: no cover - the child process
    sys.exit(serve(int(sys.argv[1]), sys.argv[2]))
