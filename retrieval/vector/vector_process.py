"""The vector index in a child process: :class:`VectorProcess` has the API of
:class:`~retrieval.vector.vectors.VectorIndex` and forwards every call to a process that owns the
Chroma folder.

Why a process: Chroma's Python bindings keep the GIL while Rust does the work (an upsert holds
it ~10 ms per call whatever its size, a query ~2.5 ms), and ``import chromadb`` plus opening a
store hold it ~1.9 s. In the serving process that stalled every other request and the
embedding workers (docs/benchmarks.md, "the vector index in a child process"). In a child the cost runs beside them, on
the other core, and the server starts without importing chromadb at all: until the child has
opened the store, the ranker scores the stored vectors exactly (:attr:`VectorProcess.ready`).
And the process that writes a store's HNSW files must never have held a text: hnswlib writes
new blocks to disk before filling them. So the child is not started by this process, which
handles every text, but forked by its spawner (:mod:`retrieval.vector.vector_spawner`), and it is the
only way an :class:`~retrieval.engine.Engine` opens a store's index; two engines of one process
over one folder share its child (:meth:`VectorProcess.shared`).

Protocol (:mod:`retrieval.vector.vector_child`, which holds both sides of it): pickled tuples over a
private socket pair. Calls may be in flight from several threads at once (the child runs them
on a small pool). An error raised in the child comes back as :class:`VectorIndexError` with its
type name and text (no chromadb exception is unpickled here, so this process never imports
chromadb). If the child dies, the calls in flight to it fail with
:class:`~retrieval.errors.StoreUnavailable` (calls already sent to its replacement are that
one's), and a watchdog restarts it at once: the outbox rows of a failed apply stay and are
applied again (:mod:`retrieval.vector.vector_sync`). Until the new child has opened the store,
:attr:`VectorProcess.error` says why the index is unavailable (the daemon's health reports it)
and searches score the stored vectors exactly.

Deadlines and hangs (:class:`~retrieval.vector.vector_child.Liveness`): every call waits at most a
deadline that fits its caller; a child that stops answering is killed and restarted like a
dead one.
"""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import threading
import time
from concurrent.futures import Future
from multiprocessing.connection import Connection

from retrieval.errors import StoreUnavailable
from retrieval.vector import vector_spawner
from retrieval.vector.vector_child import Liveness, deadline_for, hang_seconds
from retrieval.vector.vector_spawner import Forked

CLOSE_TIMEOUT_S = 30.0
WATCH_S = 0.25  # how often the watchdog looks at the child (a death is seen within this)
DYING_S = 5.0  # a child that closed its end but lives on this long is killed
RESTART_DELAYS_S = (0.0, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)  # after consecutive crashes
STABLE_S = 60.0  # a child up this long resets the crash count


_SHARED: dict[tuple[int, str], VectorProcess] = {}  # (pid, folder) -> its open instance
_SHARED_LOCK = threading.Lock()


class VectorIndexError(RuntimeError):
    """An error the vector index raised in its process: ``kind`` is the exception's type name."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


def exit_reason(code: int | None) -> str:
    if code is None:
        return "its connection closed"
    if code < 0:
        try:
            import signal

            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


_WRITES = frozenset({"upsert", "delete", "delete_ids"})
QUERIES_FIRST_S = 0.5  # a write waits at most this long for the queries in flight


class _Child:
    """One child process: its connection and the calls sent to it (a call is answered or
    failed by the reader of the child it was sent to, never by another's)."""

    def __init__(self, proc: Forked, conn: Connection, sock: socket.socket,
                 opened: threading.Event) -> None:  # fmt: skip
        self.proc, self.conn, self.sock, self.opened = proc, conn, sock, opened
        self.calls: dict[int, Future] = {}
        self.dead = False  # the connection is gone (no call may be sent to it)
        self.open_error: str | None = None  # the child could not open the store
        self.ended = threading.Event()  # its reader finished
        self.started = self.heard = time.monotonic()  # heard: its last message
        self.ping: tuple[int, float] | None = None  # (call id, sent at) of the ping out
        self.missed: str | None = None  # a call missed its deadline: why it is suspect
        self.hung = False  # killed for leaving a ping unanswered


class VectorProcess(Liveness):
    """:class:`~retrieval.vector.vectors.VectorIndex`'s API, served by a child process.

    A watchdog thread per child waits on it: a child that dies (killed, out of memory) is seen
    at once (its reader gets EOF; the watchdog looks every ``WATCH_S`` too) and restarted,
    after a short pause when it keeps dying (``RESTART_DELAYS_S``). Until the new one has
    opened its store, :attr:`error` says why the index is unavailable and :attr:`ready` is
    False (searches score the stored vectors exactly). A child that could not open its store is
    started again by the next call, as before."""

    def __init__(self, path: str, *, start: bool = True, hang_s: float | None = None) -> None:
        """``start=False``: the child starts at :meth:`start` or at the first call (a server
        starts it once it serves, so the child's start-up does not compete with its own).
        ``hang_s``: see the module's docstring (default :func:`hang_seconds`)."""
        self.path = os.path.abspath(path)  # the child works in it: no relative path
        self.hang_s = hang_s if hang_s is not None else hang_seconds()
        self._local = threading.local()  # a thread's own query deadline (query_deadline())
        self._lock = threading.Lock()  # the current child, the call tables and (re)starting
        self._ids = itertools.count(1)
        self._closed = False
        self._child: _Child | None = None
        self._opened = threading.Event()
        self._restarting = False  # a dead child's replacement is on its way
        self._crashes = 0  # consecutive deaths of children that did not stay up
        self._stop = threading.Event()  # closing: a pending restart gives up
        self.restarts = 0  # children started after a death (health, tests)
        self._key = (os.getpid(), self.path)
        self._users = 1  # see shared()
        self.error: str | None = None
        self._queries = 0  # queries sent and not yet answered (see _call: queries first)
        self._idle = threading.Condition()
        if start:
            self.start()

    @classmethod
    def shared(cls, path: str, *, start: bool = True) -> VectorProcess:
        """The open instance of this process for the folder ``path``, else a new one: two
        engines of one process over one store share its child (a second child would wait for
        the first to let go of the folder). Each caller closes it once."""
        key = (os.getpid(), os.path.abspath(path))
        with _SHARED_LOCK:
            vp = _SHARED.get(key)
            if vp is None or vp._closed:
                vp = _SHARED[key] = cls(path, start=start)
                return vp
            vp._users += 1
        if start:
            vp.start()
        return vp

    @property
    def _proc(self) -> Forked | None:
        child = self._child
        return child.proc if child is not None else None

    def start(self) -> None:
        """Start the child unless it runs (or is closed)."""
        with self._lock:
            if self._child is None and not self._closed:
                self._start()

    # ------------------------------------------------------------------ the child
    def _start(self) -> None:
        """Start a child (with ``_lock`` held, or from ``__init__``): forked by this process's
        spawner (:mod:`retrieval.vector.vector_spawner`), never by this process, which holds texts."""
        mine, theirs = socket.socketpair()
        try:
            proc = vector_spawner.fork(self.path, theirs)
        except StoreUnavailable:
            mine.close()
            raise
        finally:
            theirs.close()
        if self._opened.is_set():  # a fresh event: wait_ready waits for this child
            self._opened = threading.Event()
        # the reader owns a duplicate; ``mine`` stays for shutdown() (wakes a blocked recv)
        child = _Child(proc, Connection(os.dup(mine.fileno())), mine, self._opened)
        self._child = child
        for target, name in ((self._read, "vector-index-reader"),
                             (self._watch, "vector-index-watchdog")):  # fmt: skip
            threading.Thread(target=target, args=(child,), name=name, daemon=True).start()

    def _read(self, child: _Child) -> None:
        """Deliver the child's answers until it closes the connection, then fail the calls
        still waiting on it (calls sent to a later child are not this reader's)."""
        while True:
            try:
                cid, ok, value = child.conn.recv()
            except (EOFError, OSError):
                break
            child.heard = time.monotonic()
            if cid == 0:
                with self._lock:
                    child.open_error = None if ok else value
                    if self._child is child:
                        self.error = child.open_error
                child.opened.set()
                continue
            if child.ping is not None and cid == child.ping[0]:
                self._answered(child)
                continue
            with self._lock:
                fut = child.calls.pop(cid, None)
            if fut is None:
                continue
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(VectorIndexError(*value))
        with self._lock:
            child.dead = True
            left, child.calls = list(child.calls.values()), {}
        child.conn.close()
        child.ended.set()
        if child.open_error is not None:
            child.opened.set()  # wait_ready: opening failed
        why = child.open_error or self._stopped(child, wait=0.5 if left else 0.0)
        for fut in left:
            fut.set_exception(StoreUnavailable(why, path=self.path))

    @staticmethod
    def _stopped(child: _Child, wait: float) -> str:
        """What failed calls to a child that went away say: how it ended when it has (its
        connection closes as it dies: ``wait`` a moment for the exit status)."""
        try:
            code = child.proc.wait(wait) if wait else child.proc.poll()
        except subprocess.TimeoutExpired:
            code = None
        if code is None:
            return "the vector index process stopped"
        return f"the vector index process stopped ({exit_reason(code)})"

    def _watch(self, child: _Child) -> None:
        """Wait on the child; when it is gone, wake its reader, reap it, and start another
        unless it was closed, replaced, or could not open its store."""
        dying = None
        while True:
            try:
                code = child.proc.wait(WATCH_S)
                break
            except subprocess.TimeoutExpired:
                if child.ended.is_set():  # the connection closed but the process lives on
                    dying = dying or time.monotonic()
                    if time.monotonic() - dying > DYING_S:
                        child.proc.kill()
                else:
                    self._check_alive(child)
        try:
            child.sock.shutdown(socket.SHUT_RDWR)  # its reader sees EOF now, if not yet
        except OSError:
            pass
        child.ended.wait(CLOSE_TIMEOUT_S)
        child.sock.close()
        with self._lock:
            if self._closed or self._child is not child or child.open_error is not None:
                return
            if child.hung:
                self.error = (f"the vector index process did not answer for {self.hang_s:g} s "
                              "(hung): killed, restarting it")  # fmt: skip
            else:
                self.error = (f"the vector index process stopped ({exit_reason(code)}); "
                              "restarting it")  # fmt: skip
            up = time.monotonic() - child.started
            self._crashes = 1 if up > STABLE_S else self._crashes + 1
            delay = RESTART_DELAYS_S[min(self._crashes, len(RESTART_DELAYS_S)) - 1]
            self._restarting = True
            if self._opened.is_set():
                self._opened = threading.Event()
        if delay and self._stop.wait(delay):
            with self._lock:
                self._restarting = False
            return
        with self._lock:
            try:
                if not self._closed and self._child is child:
                    self._start()
                    self.restarts += 1
            except StoreUnavailable as exc:
                self.error = str(exc)  # the next call tries again
                self._child = None
            finally:
                self._restarting = False

    @property
    def ready(self) -> bool:
        """True once the child has opened the store (a call before that waits for it)."""
        child = self._child
        return (child is not None and self._opened.is_set() and not child.dead
                and self.error is None)  # fmt: skip

    @property
    def down(self) -> bool:
        """A child died and its replacement has not opened the store yet."""
        return self._restarting or (self.error is not None and self._child is not None
                                    and self._child.open_error is None)  # fmt: skip

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the child has opened the store (True), could not (False), or
        ``timeout``; a restart under way is waited for."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            if self.ready:
                return True
            child = self._child
            settled = child is not None and child.open_error is not None
            if self._closed or (settled and not self._restarting):
                return False
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                return False
            self._opened.wait(0.05 if left is None else min(0.05, left))

    def _call(self, method: str, *args):
        """Queries first: a write (an upsert or delete of the background writer) is sent only
        once no query is in flight (or after :data:`QUERIES_FIRST_S`), so a recall waits for at
        most the one write the child is already running, not for a whole round of them."""
        if method in _WRITES:
            with self._idle:
                self._idle.wait_for(lambda: self._queries == 0, QUERIES_FIRST_S)
            return self._send(method, *args)
        if method != "query":
            return self._send(method, *args)
        with self._idle:
            self._queries += 1
        try:
            return self._send(method, *args)
        finally:
            with self._idle:
                self._queries -= 1
                if not self._queries:
                    self._idle.notify_all()

    def _send(self, method: str, *args):
        deadline = deadline_for(method)
        if method == "query":
            deadline = getattr(self._local, "deadline", None) or deadline
        fut: Future = Future()
        with self._lock:
            if self._closed:
                raise StoreUnavailable("the vector index is closed", path=self.path)
            child = self._child
            if child is None or child.dead:  # not started, stopped, or never opened
                self._start()
                child = self._child
            cid = next(self._ids)
            child.calls[cid] = fut
            failed = None
            try:
                child.conn.send((cid, method, args))
            except OSError as exc:  # the child is gone: the next call starts another
                child.calls.pop(cid, None)
                child.dead = True
                failed = exc
        if failed is not None:  # how it ended, waited for without the lock
            why = self._stopped(child, wait=0.5)
            raise StoreUnavailable(why, path=self.path, error=str(failed)) from failed
        try:
            return fut.result(deadline)
        except TimeoutError:
            raise self._missed(child, cid, method, deadline) from None

    # ------------------------------------------------------------------ the VectorIndex API
    def upsert(self, bucket: str, model_id: str, items) -> None:
        if items:
            self._call("upsert", bucket, model_id, list(items))

    def delete(self, bucket: str, model_id: str, record_ids) -> None:
        if record_ids:
            self._call("delete", bucket, model_id, list(record_ids))

    def delete_ids(self, bucket: str, model_id: str, vector_ids) -> None:
        if vector_ids:
            self._call("delete_ids", bucket, model_id, list(vector_ids))

    def buckets(self, model_id: str) -> list[str]:
        return self._call("buckets", model_id)

    def ids(self, bucket: str, model_id: str) -> list[str]:
        return self._call("ids", bucket, model_id)

    def query(self, buckets, model_id: str, qvec, n: int):
        return self._call("query", list(buckets), model_id, qvec, n)

    def count(self, bucket: str, model_id: str) -> int:
        return self._call("count", bucket, model_id)

    def drop_model(self, model_id: str) -> None:
        self._call("drop_model", model_id)

    def close(self) -> None:
        """Stop the child (it finishes its calls first); an instance from :meth:`shared` stops
        it when its last user closes it."""
        with _SHARED_LOCK:
            self._users -= 1
            if self._users > 0:
                return
            if _SHARED.get(self._key) is self:
                del _SHARED[self._key]
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._stop.set()
            child = self._child
            if child is None:
                return
            if self._silent(child):
                child.proc.kill()  # not answering: nothing to wait for
            elif not child.dead:
                try:
                    child.conn.send(None)  # the child finishes its calls, closes Chroma, exits
                except OSError:
                    pass
        try:
            child.proc.wait(CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            child.proc.kill()
            child.proc.wait()
        child.ended.wait(CLOSE_TIMEOUT_S)
