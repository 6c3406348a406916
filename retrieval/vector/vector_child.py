"""The vector index's child process, both sides of it.

The child (:func:`serve`; :class:`~retrieval.vector.vector_process.VectorProcess` has it forked by
:mod:`retrieval.vector.vector_spawner`, never by itself) opens the Chroma folder and answers calls on
its socket until told to stop or the parent goes away. It is given record ids, bucket names,
model ids and vectors, never a text. Protocol: pickled tuples, ``(call id,
method, args)`` in, ``(call id, ok, value or (error type, text))`` out; id 0 is the "opened"
message. Calls run on a small pool; a :data:`PING` is answered by the receiving loop itself,
so the parent learns the process is alive even while every worker is busy (as soon as the
interpreter runs at all: a Chroma call that holds the GIL delays it, one that never returns
does not stop it).

The parent (:class:`Liveness`, mixed into ``VectorProcess``) waits on no call for ever. Each
waits at most its kind's deadline (:func:`deadline_for`: a query :data:`RECALL_S`, a write
:data:`WRITE_S`, a rebuild's listing or drop :data:`REBUILD_S`); a thread's queries wait what it
set with :meth:`Liveness.query_deadline` instead (a hook sets its own, shorter one). A call that
misses it raises :class:`VectorTimeout` (a search then ranks its lexical candidates, saying
so), and the index counts as unavailable until the child answers a :data:`PING`. The watchdog
pings it then, and whenever it has heard nothing from it for :data:`HEARTBEAT_S`: a child that
leaves a ping unanswered for ``hang_s`` (:data:`HANG_S`, ``PATTERN_VECTOR_HANG_S``) is hung
(stopped, deadlocked) and is treated as a dead one: killed and restarted, with ``error`` saying
so. ``hang_s`` is longer than one Chroma call ever holds the GIL (an upsert of 4,000 vectors
into a large collection holds it for seconds, and the ping waits for it; measured: 3.5 s for
3,000 vectors into 27k).
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from multiprocessing.connection import Connection
from typing import Protocol

from retrieval.errors import StoreUnavailable

PING = "ping"  # a liveness probe: answered (id, True, None) by the loop, never by Chroma
HOLD_TIMEOUT_S = 30.0  # how long a new child waits for a previous one to release the folder
RECALL_S = 2.0  # a query (a recall; a hook sets a shorter deadline of its own)
WRITE_S = 120.0  # an upsert or delete of one outbox round (4,000 vectors: seconds at 1M)
REBUILD_S = 600.0  # a rebuild's calls: listing a collection's ids, dropping a model's
_REBUILD_CALLS = frozenset({"ids", "buckets", "drop_model"})
HANG_S = 30.0  # a ping unanswered this long: the child is hung, killed and restarted
HEARTBEAT_S = 5.0  # a child heard from less recently than this is pinged


class VectorTimeout(StoreUnavailable):
    """A call to the vector index's process missed its deadline (``data``: method,
    deadline_s, path); the process is probed and, if it stays silent, restarted."""


def deadline_for(method: str) -> float:
    """The default deadline of a call (seconds), by what it is for."""
    if method == "query":
        return RECALL_S
    return REBUILD_S if method in _REBUILD_CALLS else WRITE_S


def hang_seconds(env=os.environ) -> float:
    """``PATTERN_VECTOR_HANG_S`` when it is a positive finite number, else :data:`HANG_S`."""
    try:
        value = float(env.get("PATTERN_VECTOR_HANG_S") or HANG_S)
    except ValueError:
        return HANG_S
    return value if 0 < value and math.isfinite(value) else HANG_S


class Killable(Protocol):
    """The child's process handle (a :class:`~retrieval.vector.vector_spawner.Forked`)."""

    def kill(self) -> None: ...


class ChildState(Protocol):
    """What :class:`Liveness` reads and sets on the parent's record of one child process."""

    proc: Killable
    conn: Connection
    opened: threading.Event
    open_error: str | None
    calls: dict[int, Future]
    dead: bool
    heard: float
    ping: tuple[int, float] | None
    missed: str | None
    hung: bool


class Liveness:
    """The deadline and ping half of :class:`~retrieval.vector.vector_process.VectorProcess`: it
    uses the process's ``_lock``, ``_ids``, ``_child``, ``_local``, ``error``, ``hang_s`` and
    ``path``, and the child's ``ping``, ``missed``, ``hung`` and ``heard``."""

    def _check_alive(self, child: ChildState) -> None:
        """The watchdog's look at a running child: ping it when a call missed its deadline or
        nothing was heard from it for HEARTBEAT_S; kill it when a ping stays unanswered for
        ``hang_s`` (the watchdog then restarts it, as after any death)."""
        if not child.opened.is_set() or child.open_error is not None:
            return  # still opening its store (or it could not): pings wait for that
        now = time.monotonic()
        if child.ping is not None:
            if now - child.ping[1] > self.hang_s and not child.hung:
                child.hung = True
                child.proc.kill()
        elif child.missed is not None or now - child.heard > HEARTBEAT_S:
            with self._lock:
                if child.dead:
                    return
                child.ping = (next(self._ids), now)  # before sending: the answer may be quick
                try:
                    child.conn.send((child.ping[0], PING, ()))
                except OSError:
                    child.ping = None  # the reader sees the connection end

    def _answered(self, child: ChildState) -> None:
        """The child answered a ping: it is alive, and no longer suspect."""
        with self._lock:
            child.ping = None
            missed, child.missed = child.missed, None
            if missed is not None and self._child is child and self.error == self._suspect(missed):
                self.error = None

    def _silent(self, child: ChildState) -> bool:
        """A call missed its deadline, or a ping has waited longer than a heartbeat."""
        ping = child.ping
        return child.missed is not None or (
            ping is not None and time.monotonic() - ping[1] > HEARTBEAT_S
        )

    @staticmethod
    def _suspect(missed: str) -> str:
        return f"the vector index process {missed}; checking whether it is alive"

    def _missed(self, child: ChildState, cid: int, method: str, deadline: float) -> VectorTimeout:
        """A call missed its deadline: forget it (a late answer is dropped), count the index
        unavailable until the child answers a ping (the watchdog sends one now)."""
        with self._lock:
            child.calls.pop(cid, None)
            if child.missed is None and not child.dead:
                child.missed = f"did not answer a {method} within {deadline:g} s"
                if self._child is child:
                    self.error = self._suspect(child.missed)
        return VectorTimeout(
            f"the vector index did not answer a {method} within {deadline:g} s",
            method=method, deadline_s=deadline, path=self.path,
        )  # fmt: skip

    @contextlib.contextmanager
    def query_deadline(self, seconds: float):
        """Queries made by this thread inside the block wait at most ``seconds`` each
        (instead of :data:`RECALL_S`); writes keep theirs (an inline write's vectors are
        worth the wait: its caller has its answer from the COMMIT)."""
        before = getattr(self._local, "deadline", None)
        self._local.deadline = seconds
        try:
            yield
        finally:
            self._local.deadline = before


# ---------------------------------------------------------------------- the child's side
def hold_folder(path: str, timeout: float = HOLD_TIMEOUT_S) -> None:
    """Take ``<path>.lock`` (an exclusive ``flock``, held until this process exits): a child
    whose server was killed may still be finishing a call, and a second process must not
    write the same Chroma folder; the new child waits for it (up to ``timeout``)."""
    from retrieval.storage import locks

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
        from retrieval.vector.vectors import VectorIndex

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
