"""The clean process every vector index child is forked from.

Why: hnswlib (inside Chroma) writes a new collection's HNSW blocks to disk straight after
``malloc``, before any element is in them (and again after a resize), so whatever the writing
process freed before can reach ``data_level0.bin`` and ``length.bin``. The process that writes
a store's HNSW files must therefore never have held a text, an environment of secrets or
another store's data. The process that opens stores (the daemon, a CLI command, a library
:class:`~retrieval.engine.Engine`) handles every text, so it never writes them: it asks its
*spawner* for a child per store.

The spawner is a fresh interpreter (``python -P -m retrieval.vector.vector_spawner FD``), started once per
opening process (:func:`spawner`), with:

- a minimal environment (:func:`child_env`): no variable of the user's, the Chroma settings
  set explicitly; an empty folder of its own as its working directory while it imports Chroma
  (``chromadb``'s settings read ``.env`` from the working directory), then ``/``; no file
  descriptor of its parent but its control socket; no core files; a umask of 077;
- ``malloc`` that returns zeroed memory and ``free`` that overwrites what it frees
  (:data:`ZEROED_MALLOC`, glibc's tunables): a block the index writes before filling it holds
  zeros, not bytes of the process's earlier work (the vectors of a collection since dropped).

It imports Chroma, then only forks: each child (:func:`_child`) gets its socket and its store's
Chroma folder (its working directory from then on), closes the spawner's descriptors and
serves the index (:func:`~retrieval.vector.vector_child.serve`). So a child costs a fork and opening
the store (~0.13 s), not an interpreter and the import of Chroma (~0.9 s of CPU): a process
that opens many stores (a test run, a script) pays the import once.

A child dies with the spawner (``PR_SET_PDEATHSIG``) and leaves when its opener's end of its
socket closes; the spawner leaves when its opener's end of the control socket closes (once its
children have), or when the opener closes it after :data:`IDLE_S` without a child.

Control protocol (a ``SOCK_SEQPACKET`` pair; JSON messages): to the spawner ``{"fork": id,
"path": folder}`` carrying the child's socket (``SCM_RIGHTS``) and ``{"kill": id}``; from it
``{"forked": id, "pid": pid}`` and ``{"exit": id, "code": returncode}``.
"""

from __future__ import annotations

import gc
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from retrieval.errors import StoreUnavailable

# glibc: malloc returns memory filled with 0x00 (the complement of the perturb byte) and free
# fills what it frees with 0xff; the per-thread cache, which skips both, is off
ZEROED_MALLOC = "glibc.malloc.perturb=255:glibc.malloc.tcache_count=0"
IDLE_S = 30.0  # a spawner without a child this long is closed (the next store starts another)
PID_WAIT_S = 60.0  # how long Forked.pid waits for the spawner to report the fork
_ROOT = str(Path(__file__).resolve().parents[2])  # where the `retrieval` package lives
_MAX_MSG = 65536


def child_env() -> dict[str, str]:
    """The whole environment of the spawner and its children: what Python needs to find this
    package and Chroma (this process's ``PYTHONPATH``, made absolute, and ``LD_LIBRARY_PATH``
    when the interpreter was started with one), Chroma's settings, one thread per numeric
    library, :data:`ZEROED_MALLOC`. Nothing else of the caller's."""
    given = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    libraries = os.environ.get("LD_LIBRARY_PATH")
    return {
        **({"LD_LIBRARY_PATH": libraries} if libraries else {}),
        "PATH": os.defpath,
        "PYTHONPATH": os.pathsep.join(dict.fromkeys([_ROOT, *given])),
        "LC_ALL": "C.UTF-8",
        "ANONYMIZED_TELEMETRY": "False",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",  # else OpenBLAS starts a thread at import: no clean fork
        "MKL_NUM_THREADS": "1",
        "GLIBC_TUNABLES": ZEROED_MALLOC,
    }


class Forked:
    """A child forked by the spawner, with what :class:`~retrieval.vector.vector_process.VectorProcess`
    uses of ``subprocess.Popen``: ``pid``, ``poll``, ``wait``, ``kill``, ``returncode``."""

    def __init__(self, owner: Spawner, cid: int) -> None:
        self._owner, self._id = owner, cid
        self._pid: int | None = None
        self._known = threading.Event()  # forked (or never will be)
        self._done = threading.Event()
        self.returncode: int | None = None

    @property
    def pid(self) -> int | None:
        """The child's pid, once the spawner has forked it (None if it never did)."""
        self._known.wait(PID_WAIT_S)
        return self._pid

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(f"vector index child {self._id}", timeout)
        return self.returncode

    def kill(self) -> None:
        """SIGKILL, sent by the spawner (it knows whether the pid is still its child's)."""
        self._owner.kill(self._id)

    def _forked(self, pid: int) -> None:
        self._pid = pid
        self._known.set()

    def _exited(self, code: int | None) -> None:
        self.returncode = code
        self._known.set()
        self._done.set()


class Spawner:
    """The opener's side: starts the spawner process, asks it for children, learns their ends."""

    def __init__(self) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        start = tempfile.mkdtemp(prefix="pattern-vectors-")  # empty, 0700: no .env in it
        try:
            self.proc = subprocess.Popen(
                # -P: nothing is imported from its working folder
                [sys.executable, "-P", "-m", "retrieval.vector.vector_spawner", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), cwd=start, env=child_env(),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, close_fds=True,
            )  # fmt: skip
        except OSError as exc:
            mine.close()
            os.rmdir(start)
            raise StoreUnavailable(f"cannot start the vector index: {exc}") from exc
        finally:
            theirs.close()
        self.start_dir = start  # the spawner leaves and removes it once Chroma is imported
        self._sock = mine
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._children: dict[int, Forked] = {}
        self._idle: threading.Timer | None = None
        self.closed = False  # the control socket is closed: the spawner leaves
        threading.Thread(target=self._read, name="vector-spawner", daemon=True).start()

    def fork(self, path: str, sock: socket.socket) -> Forked:
        """A child serving the Chroma folder ``path`` over ``sock`` (its end of a socket pair;
        the caller closes its copy)."""
        with self._lock:
            if self.closed:
                raise StoreUnavailable("the vector index spawner stopped", path=path)
            cid = next(self._ids)
            child = self._children[cid] = Forked(self, cid)
            self._cancel_idle()
            msg = json.dumps({"fork": cid, "path": path}).encode()
            try:
                socket.send_fds(self._sock, [msg], [sock.fileno()])
            except OSError as exc:
                del self._children[cid]
                raise StoreUnavailable(f"cannot start the vector index: {exc}", path=path) from exc
        return child

    def kill(self, cid: int) -> None:
        with self._lock:
            if not self.closed:
                try:
                    self._sock.send(json.dumps({"kill": cid}).encode())
                except OSError:
                    pass  # the spawner is gone, and its children with it

    def _read(self) -> None:
        while True:
            try:
                data = self._sock.recv(_MAX_MSG)
            except OSError:
                break
            if not data:
                break
            msg = json.loads(data)
            with self._lock:
                child = self._children.get(msg.get("forked", msg.get("exit")))
                if "exit" in msg:
                    self._children.pop(msg["exit"], None)
                    if not self._children:
                        self._arm_idle()
            if child is not None:
                child._forked(msg["pid"]) if "forked" in msg else child._exited(msg["code"])
        with self._lock:
            self.closed = True
            left, self._children = list(self._children.values()), {}
            self._cancel_idle()
        self._sock.close()
        code = self.proc.wait()
        try:
            os.rmdir(self.start_dir)  # left behind by a spawner that died importing Chroma
        except OSError:
            pass
        for child in left:  # a forked child died with the spawner (PR_SET_PDEATHSIG)
            child._exited(-signal.SIGKILL if child._pid is not None else code)

    def _arm_idle(self) -> None:
        self._cancel_idle()
        self._idle = threading.Timer(IDLE_S, self._close_if_idle)
        self._idle.daemon = True
        self._idle.start()

    def _cancel_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None

    def _close_if_idle(self) -> None:
        with _lock, self._lock:  # no fork() between the test and the close
            if self._children or self.closed:
                return
            self.closed = True
            self._sock.shutdown(socket.SHUT_RDWR)  # it leaves; its reader here ends


_lock = threading.Lock()  # taken before a Spawner's own lock, never after it
_current: tuple[int, Spawner] | None = None  # (the pid that started it, it)


def fork(path: str, sock: socket.socket) -> Forked:
    """A child serving the Chroma folder ``path`` over ``sock``, forked by this process's
    spawner (started if there is none, it stopped, or this process is a fork of the one that
    started it)."""
    global _current
    with _lock:
        if _current is None or _current[0] != os.getpid() or _current[1].closed:
            _current = (os.getpid(), Spawner())
        return _current[1].fork(path, sock)


# ---------------------------------------------------------------------- the spawner's side
def _preload() -> None:
    """What every child needs, imported once here (a child only forks and opens its store)."""
    os.umask(0o077)  # what a child creates in its store is its user's alone
    import chromadb  # noqa: F401
    import chromadb.api.rust  # noqa: F401
    import chromadb.telemetry.product.posthog  # noqa: F401 - imported by every client

    from retrieval.vector import vector_child, vectors  # noqa: F401


def _die_with(parent: int) -> None:
    """Ask the kernel to SIGKILL this process when ``parent`` (the spawner) ends (Linux)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it ended before the request was made
        os._exit(1)


def _child(fd: int, path: str, inherited: list, parent: int) -> None:
    """A forked child of the spawner ``parent``: let go of the spawner's descriptors, work in
    the store's Chroma folder, serve the index on ``fd``; never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for thing in inherited:
            thing.close() if hasattr(thing, "close") else os.close(thing)
        _die_with(parent)
        os.makedirs(path, mode=0o700, exist_ok=True)
        os.chdir(path)
        from retrieval.vector.vector_child import serve

        code = serve(fd, path)
    except BaseException:  # noqa: BLE001 - a child reports and ends, it never unwinds
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


def _send(ctl: socket.socket, msg: dict) -> None:
    try:
        ctl.send(json.dumps(msg).encode())
    except OSError:
        pass  # the opener is gone; the children leave as their sockets close


def main(fd: int) -> int:
    import resource
    import selectors

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # it ends with its opener, not at a ^C
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    ctl = socket.socket(fileno=fd)
    _preload()
    gc.collect()
    gc.freeze()  # a child's collections skip what it inherits: fewer pages copied on write
    start = os.getcwd()
    os.chdir("/")
    try:
        os.rmdir(start)
    except OSError:
        pass  # not empty (nothing of ours is in it) or gone already
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the loop through wake_w
    sel = selectors.DefaultSelector()
    sel.register(ctl, selectors.EVENT_READ)
    sel.register(wake_r, selectors.EVENT_READ)
    pids: dict[int, int] = {}  # child pid -> its id
    ids: dict[int, int] = {}  # id -> child pid
    me, opener = os.getpid(), True
    while opener or pids:
        for key, _ in sel.select():
            if key.fileobj is not ctl:
                while True:
                    try:
                        if not os.read(wake_r, 512):
                            break
                    except BlockingIOError:
                        break
                continue
            try:
                data, fds, _flags, _addr = socket.recv_fds(ctl, _MAX_MSG, 1)
            except OSError:
                data, fds = b"", []
            if not data:
                opener = False
                sel.unregister(ctl)
                continue
            msg = json.loads(data)
            if "kill" in msg:
                if msg["kill"] in ids:  # not reaped yet: the pid is still the child's
                    os.kill(ids[msg["kill"]], signal.SIGKILL)
                continue
            if not fds:
                _send(ctl, {"exit": msg["fork"], "code": 1})
                continue
            try:
                pid = os.fork()
            except OSError as exc:
                print(f"vector index spawner: cannot fork: {exc}", file=sys.stderr, flush=True)
                os.close(fds[0])
                _send(ctl, {"exit": msg["fork"], "code": 1})
                continue
            if pid == 0:
                _child(fds[0], msg["path"], [sel, ctl, wake_r, wake_w], me)
            os.close(fds[0])
            pids[pid], ids[msg["fork"]] = msg["fork"], pid
            _send(ctl, {"forked": msg["fork"], "pid": pid})
        while pids:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            cid = pids.pop(pid, None)
            if cid is not None:
                ids.pop(cid, None)
                _send(ctl, {"exit": cid, "code": os.waitstatus_to_exitcode(status)})
    return 0


if __name__ == "__main__":  # pragma: no cover - the spawner process
    sys.exit(main(int(sys.argv[1])))
