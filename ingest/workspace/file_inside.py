"""Reading a regular file that lies inside a root when it is read, not only when it was found,
and never past a bound: the one reader of files found by a walk (the workspace walker,
citations of code, the importers' source folders).

Between a walk (or any check by path) and the read, the file can be swapped: for a symbolic
link to a file outside, for a named pipe nobody writes to (opening it would wait forever), for a
device, for a bigger file. So :func:`read_inside`

* resolves the path and requires it inside one of the roots (resolved too);
* opens the resolved path without following a final symbolic link (``O_NOFOLLOW``) and without
  waiting on a named pipe (``O_NONBLOCK``: the open returns at once, and the file is refused as
  not regular);
* requires the open file to be a regular file (``fstat``), and where the system tells where
  the open file is (Linux's ``/proc/self/fd``, macOS's ``F_GETPATH``), that it is inside a
  root; elsewhere, that the path still names the file opened (a folder on the way swapped for
  a link is caught either way);
* reads at most ``max_bytes`` (+1 to notice more): a larger file, or one that grows while it is
  read, is refused.

Every refusal is a :class:`NotRead` with its ``kind``; each caller says it in its own words
(the walker's ``PermissionError``/``ValueError``/``OSError``, the importers' ``SourceError``).
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

OPEN_FLAGS = (
    os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
)
CHUNK = 1 << 20


class NotRead(Exception):
    """Why a file was not read. ``kind``: ``outside`` (not inside a root), ``special`` (not a
    regular file: ``mode`` says what), ``too_large`` (``size`` over the bound), ``grew`` (past
    the bound while read), ``changed`` (the path names another file than the one opened),
    ``unreadable`` (``error``: missing, a link, no permission)."""

    def __init__(
        self, kind: str, *, mode: int = 0, size: int = 0, error: OSError | None = None
    ) -> None:
        super().__init__(kind)
        self.kind = kind
        self.mode = mode
        self.size = size
        self.error = error


def special(mode: int) -> str:
    """What a file that is not a regular file is."""
    for test, name in ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a folder")):  # fmt: skip
        if test(mode):
            return name
    return "a special file"


def inside(real: Path, root: Path) -> bool:
    return real == root or real.is_relative_to(root)


def opened_path(fd: int) -> Path | None:
    """Where the open file ``fd`` really is: Linux's ``/proc/self/fd``, macOS's ``F_GETPATH``;
    None where the system does not tell."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        pass
    if sys.platform == "darwin":
        try:
            import fcntl

            raw = fcntl.fcntl(fd, getattr(fcntl, "F_GETPATH", 50), b"\0" * 1024)
            return Path(os.fsdecode(raw.split(b"\0", 1)[0]))
        except OSError:
            return None
    return None


def read_inside(
    path: str | Path, roots: Sequence[str | Path], max_bytes: int
) -> tuple[bytes, os.stat_result]:
    """(the bytes, the ``fstat``) of the regular file ``path``, inside one of ``roots`` when
    it is opened, at most ``max_bytes`` long (module docstring); :class:`NotRead` otherwise."""
    resolved = [Path(os.path.realpath(r)) for r in roots]
    real = Path(os.path.realpath(path))
    if not any(inside(real, r) for r in resolved):
        raise NotRead("outside")
    with _regular_file(real, OPEN_FLAGS) as (fd, st):
        opened = opened_path(fd)
        if opened is not None:
            if not any(inside(opened, r) for r in resolved):
                raise NotRead("outside")
        else:
            now = os.stat(real, follow_symlinks=False)
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                raise NotRead("changed")
        if st.st_size > max_bytes:
            raise NotRead("too_large", size=st.st_size)
        data = _read_at_most(fd, max_bytes + 1)
        if len(data) > max_bytes:
            raise NotRead("grew", size=len(data))
        return data, st


def read_head(path: str | Path, max_bytes: int) -> bytes:
    """The first ``max_bytes`` of the regular file ``path`` (a link to one followed), opened
    without waiting on a named pipe (``O_NONBLOCK``) and checked with ``fstat`` before a byte
    is read: a transcript's start, whatever its size. :class:`NotRead` otherwise."""
    with _regular_file(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)) as (fd, _):
        return _read_at_most(fd, max_bytes)


@contextmanager
def _regular_file(path: str | Path, flags: int) -> Iterator[tuple[int, os.stat_result]]:
    """The regular file ``path`` opened with ``flags``: (its descriptor, its ``fstat``), closed
    after; :class:`NotRead` for any other kind of file, and for an ``OSError`` while it is open."""
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise NotRead("unreadable", error=exc) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRead("special", mode=st.st_mode)
        yield fd, st
    except OSError as exc:
        raise NotRead("unreadable", error=exc) from None
    finally:
        os.close(fd)


def _read_at_most(fd: int, limit: int) -> bytes:
    """At most ``limit`` bytes of ``fd``, read in chunks of :data:`CHUNK` at the most."""
    chunks, size = [], 0
    while size < limit and (data := os.read(fd, min(CHUNK, limit - size))):
        chunks.append(data)
        size += len(data)
    return b"".join(chunks)


__all__ = ["NotRead", "inside", "opened_path", "read_head", "read_inside", "special"]
