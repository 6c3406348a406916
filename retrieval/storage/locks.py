"""File locks: an exclusive ``flock`` on a lock file, the one way processes of a store exclude
each other (the daemon's store lock, the ingestion lock, the Chroma child's folder lock, the
ONNX export lock).

The kernel releases a ``flock`` when its holder dies, so a crashed process never leaves a lock
behind. Standard library only, and cheap to import: the hook client and the bridge use
:func:`held` at start-up.

- :func:`acquire`: take the lock now or raise :class:`Held` (with what the holder wrote in the
  file, e.g. ``pid 123 (pattern-memory daemon)``); ``owner`` is written into the file once held.
- :func:`wait`: :func:`acquire`, retried until a deadline.
- :func:`release`: unlock and close.
- :func:`held`: whether some process holds the lock (without creating the file).
- :func:`exclusive`: a blocking lock for the length of a ``with`` block.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from retrieval.storage import private

OWNER_BYTES = 200  # what Held.owner reads of the holder's note


class Held(Exception):  # noqa: N818 - the lock's state, not an error of the caller
    """The lock is held by another process; ``owner``: the note its holder wrote ("" if none)."""

    def __init__(self, path: str, owner: str = "") -> None:
        super().__init__(f"{path} is held by {owner or 'another process'}")
        self.path = path
        self.owner = owner


def _open(path) -> int:
    path = os.fspath(path)
    private.folder(os.path.dirname(path) or ".")
    return os.open(path, os.O_RDWR | os.O_CREAT, private.FILE_MODE)


def acquire(path, owner: str | None = None) -> int:
    """An exclusive lock on ``path`` (created, mode 0600, with its folder), without waiting:
    the open file descriptor that holds it (the lock lives until :func:`release` or the
    process's end). Held by another process: :class:`Held`. ``owner``: a note written into the
    file once the lock is ours (who holds it, for the next one's message)."""
    fd = _open(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        note = os.read(fd, OWNER_BYTES).decode(errors="replace").strip()
        os.close(fd)
        raise Held(os.fspath(path), note) from None
    if owner is not None:
        os.ftruncate(fd, 0)
        os.write(fd, owner.encode())
        os.fsync(fd)
    return fd


def wait(path, timeout: float, poll: float = 0.05) -> int:
    """:func:`acquire`, tried every ``poll`` seconds until it succeeds or ``timeout`` seconds
    have passed (then :class:`Held`)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return acquire(path)
        except Held:
            if time.monotonic() > deadline:
                raise
            time.sleep(poll)


def release(fd: int) -> None:
    """Unlock and close a descriptor returned by :func:`acquire` or :func:`wait`."""
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def held(path) -> bool:
    """True while some process holds the lock on ``path``; a missing file is not created (no
    file: nobody holds it). The authoritative test of a holder's life: a dead holder's lock is
    released by the kernel, whatever files it left behind."""
    try:
        fd = os.open(os.fspath(path), os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


@contextmanager
def exclusive(path) -> Iterator[None]:
    """Hold the lock on ``path`` for the ``with`` block, waiting as long as another process
    holds it."""
    fd = _open(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        release(fd)
