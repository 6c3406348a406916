"""The vector index in a child process: :class:`VectorProcess` has the API of
:class:`~retrieval.vectors.VectorIndex` and forwards every call to a process that owns the
Chroma folder.

Why a process: Chroma's Python bindings keep the GIL while Rust does the work (an upsert holds
it ~10 ms per call whatever its size, a query ~2.5 ms), and ``import chromadb`` plus opening a
store hold it ~1.9 s. In the serving process that stalled every other request and the
embedding workers (docs/benchmarks.md, "Session 6"). In a child the cost runs beside them, on
the other core, and the server starts without importing chromadb at all: until the child has
opened the store, the ranker scores the stored vectors exactly (:attr:`VectorProcess.ready`).

Protocol: pickled tuples over a private socket pair, ``(call id, method, args)`` one way and
``(call id, ok, value or error text)`` back; id 0 is the child's "opened" message. Calls may be
in flight from several threads at once (the child runs them on a small pool). An error raised
in the child comes back as :class:`VectorIndexError` with its type name and text (no chromadb
exception is unpickled here, so this process never imports chromadb). If the child dies, the
calls in flight fail with :class:`~retrieval.errors.StoreUnavailable` and the next call starts
a new child: the outbox rows of a failed apply stay and are applied again
(:mod:`retrieval.vector_sync`).
"""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from multiprocessing.connection import Connection
from pathlib import Path

from .errors import StoreUnavailable

CALL_TIMEOUT_S = 600.0  # a reindex of a large collection is one long call
CLOSE_TIMEOUT_S = 30.0
_ROOT = str(Path(__file__).resolve().parent.parent)  # where the `retrieval` package lives


class VectorIndexError(RuntimeError):
    """An error the vector index raised in its process: ``kind`` is the exception's type name."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


class VectorProcess:
    """:class:`~retrieval.vectors.VectorIndex`'s API, served by a child process."""

    def __init__(self, path: str, *, start: bool = True) -> None:
        """``start=False``: the child starts at :meth:`start` or at the first call (a server
        starts it once it serves, so the child's start-up does not compete with its own)."""
        self.path = path
        self._lock = threading.Lock()  # the connection, the call table and (re)starting
        self._calls: dict[int, Future] = {}
        self._ids = itertools.count(1)
        self._closed = False
        self._proc: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._opened = threading.Event()
        self._dead = True  # no child yet
        self.error: str | None = None
        if start:
            self.start()

    def start(self) -> None:
        """Start the child unless it runs (or is closed)."""
        with self._lock:
            if self._proc is None and not self._closed:
                self._start()

    # ------------------------------------------------------------------ the child
    def _start(self) -> None:
        """Start a child (with ``_lock`` held, or from ``__init__``)."""
        mine, theirs = socket.socketpair()
        env = dict(os.environ)
        env["ANONYMIZED_TELEMETRY"] = "False"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH")) if p)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "retrieval.vector_process", str(theirs.fileno()), self.path],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=env,
            )
        except OSError as exc:
            mine.close()
            raise StoreUnavailable(f"cannot start the vector index: {exc}", path=self.path) from exc
        finally:
            theirs.close()
        self._conn = Connection(mine.detach())
        self._opened = threading.Event()
        self._dead = False
        self.error = None
        reader = threading.Thread(
            target=self._read, args=(self._conn, self._opened), name="vector-index-reader",
            daemon=True,
        )  # fmt: skip
        reader.start()

    def _read(self, conn: Connection, opened: threading.Event) -> None:
        """Deliver the child's answers until it closes the connection, then fail what is left."""
        while True:
            try:
                cid, ok, value = conn.recv()
            except (EOFError, OSError):
                break
            if cid == 0:
                if not ok:
                    self.error = value
                opened.set()
                continue
            with self._lock:
                fut = self._calls.pop(cid, None)
            if fut is None:
                continue
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(VectorIndexError(*value))
        with self._lock:
            if self._conn is conn:
                self._dead = True
            left, self._calls = list(self._calls.values()), {}
        opened.set()
        why = self.error or "the vector index process stopped"
        for fut in left:
            fut.set_exception(StoreUnavailable(why, path=self.path))

    @property
    def ready(self) -> bool:
        """True once the child has opened the store (a call before that waits for it)."""
        return self._opened.is_set() and not self._dead and self.error is None

    def wait_ready(self, timeout: float | None = None) -> bool:
        return self._opened.wait(timeout) and self.ready

    def _call(self, method: str, *args):
        fut: Future = Future()
        with self._lock:
            if self._closed:
                raise StoreUnavailable("the vector index is closed", path=self.path)
            if self._dead:  # not started, stopped, or never opened: start a child
                if self._proc is not None:
                    self._proc.wait()
                    self._conn.close()
                self._start()
            cid = next(self._ids)
            self._calls[cid] = fut
            try:
                self._conn.send((cid, method, args))
            except OSError as exc:  # the child is gone: the next call starts another
                self._calls.pop(cid, None)
                self._dead = True
                raise StoreUnavailable(f"the vector index process: {exc}", path=self.path) from exc
        return fut.result(CALL_TIMEOUT_S)

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

    def query(self, buckets, model_id: str, qvec, n: int, where: dict | None = None):
        return self._call("query", list(buckets), model_id, qvec, n, where)

    def count(self, bucket: str, model_id: str) -> int:
        return self._call("count", bucket, model_id)

    def drop_model(self, model_id: str) -> None:
        self._call("drop_model", model_id)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._proc is None:
                return
            try:
                self._conn.send(None)  # the child finishes its calls, closes Chroma, exits
            except OSError:
                pass
        try:
            self._proc.wait(CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._conn.close()


# ---------------------------------------------------------------------- the child's side
def hold_folder(path: str, timeout: float = CLOSE_TIMEOUT_S) -> None:
    """Take ``<path>.lock`` (an exclusive ``flock``, held until this process exits): a child
    whose server was killed may still be finishing a call, and a second process must not
    write the same Chroma folder; the new child waits for it (up to ``timeout``)."""
    import fcntl
    import time

    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return  # fd stays open: the lock lives as long as the process
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise StoreUnavailable(f"{path} is held by another process", path=path) from None
            time.sleep(0.05)


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
        pool.submit(answer, *msg)
    pool.shutdown(wait=True)
    index.close()
    return 0


if __name__ == "__main__":  # pragma: no cover - the child process
    sys.exit(serve(int(sys.argv[1]), sys.argv[2]))
