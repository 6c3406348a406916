"""Writing an export's files into a folder the user already keeps: nothing there is replaced
without a backup, nothing is written through a link, and what is written is the user's alone.

:func:`write_files` takes every file of one export (its path under the folder, its text) and

* first checks them all, writing nothing: a file already there with other content is refused
  (one error naming it, and how many more) unless ``force``; one with the same content is left
  as it is (counted unchanged);
* with ``force``, renames each such file to ``<name>.bak-<UTC time>`` (a free name: ``-2``,
  ``-3`` … when taken) before writing the new one, and says so;
* walks to each file's folder by folder descriptors opened with ``O_NOFOLLOW``: a folder along
  the way that is a symbolic link (or not a folder) is refused, so a link planted in the export
  folder (``notes -> ~/.ssh``) never receives a file; the final name is created with
  ``link(2)`` from a private temporary file, which fails rather than replace a file that
  appeared meanwhile;
* creates files 0600 and folders 0700 (the folders it creates; the export folder itself, when
  it exists, is left as the user keeps it).

A path must be relative, without ``..``, ``.`` or empty parts (and without hidden parts, unless
the caller allows them).
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from retrieval.errors import InvalidInput

FILE_MODE = 0o600
DIR_MODE = 0o700
DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


@dataclass
class Written:
    """What :func:`write_files` did, paths relative to the folder."""

    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    backups: list[str] = field(default_factory=list)  # "old -> backup"


def safe_relative(path: str, *, hidden: bool = False) -> str | None:
    """``path`` as a relative posix path that stays in its folder, or None when it would not
    (absolute, ``..``, ``.`` or empty parts, a NUL or a backslash; hidden parts unless
    ``hidden``)."""
    if not path or "\x00" in path or "\\" in path or path.startswith("/"):
        return None
    parts = path.split("/")
    if any(p in ("", ".", "..") or (p.startswith(".") and not hidden) for p in parts):
        return None
    return "/".join(PurePosixPath(path).parts)


def _stamp(now: datetime | None) -> str:
    return (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def _refused(folder: Path, rel: str, why: str) -> InvalidInput:
    return InvalidInput(
        f"{folder / rel} {why}; nothing was written (the export writes only into real folders "
        "inside the one given)",
        path=str(folder / rel),
    )


class _Folder:
    """The export folder, opened once; its subfolders reached by descriptors, never by a
    link."""

    def __init__(self, folder: Path) -> None:
        self.path = folder
        if not folder.exists():
            _make_dirs(folder)
        try:
            self.fd = os.open(folder, DIR_FLAGS)
        except OSError as exc:
            raise InvalidInput(
                f"{folder} is not a folder the notes can be written in ({exc.strerror})",
                path=str(folder),
            ) from None
        self.fds: dict[str, int] = {"": self.fd}

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)

    def dir_fd(self, rel_dir: str, create: bool) -> int | None:
        """The descriptor of the subfolder ``rel_dir`` (None when it does not exist and
        ``create`` is false); a part that is a link or not a folder is refused."""
        if rel_dir in self.fds:
            return self.fds[rel_dir]
        parent, _, name = rel_dir.rpartition("/")
        pfd = self.dir_fd(parent, create)
        if pfd is None:
            return None
        try:
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
        except FileNotFoundError:
            if not create:
                return None
            os.mkdir(name, DIR_MODE, dir_fd=pfd)
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            raise _refused(self.path, rel_dir, "is a symbolic link")
        if not stat.S_ISDIR(st.st_mode):
            raise _refused(self.path, rel_dir, "is not a folder")
        try:
            fd = os.open(name, DIR_FLAGS | NOFOLLOW, dir_fd=pfd)
        except OSError as exc:  # swapped for a link since the stat
            raise _refused(self.path, rel_dir, f"cannot be opened ({exc.strerror})") from None
        self.fds[rel_dir] = fd
        return fd

    def existing(self, rel: str) -> tuple[os.stat_result | None, bytes | None]:
        """(its lstat, its bytes when it is a regular file) of what is at ``rel`` now."""
        rel_dir, _, name = rel.rpartition("/")
        fd = self.dir_fd(rel_dir, create=False)
        if fd is None:
            return None, None
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None, None
        if not stat.S_ISREG(st.st_mode) or st.st_size > 64 << 20:
            return st, None
        try:
            ffd = os.open(name, os.O_RDONLY | NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        except OSError:
            return st, None
        with os.fdopen(ffd, "rb") as fh:
            return st, fh.read()


def _make_dirs(folder: Path) -> None:
    """Create ``folder`` and its missing parents, each 0700."""
    missing = []
    p = folder
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, DIR_MODE)
        except FileExistsError:
            pass


def write_files(
    folder: Path, files: dict[str, str], *, force: bool = False, now: datetime | None = None,
    hidden: bool = False,
) -> Written:  # fmt: skip
    """Write ``files`` ({relative path: text}) under ``folder`` (see the module docstring;
    ``hidden``: a path may have hidden parts, as a single file named by the user may)."""
    for rel in files:
        if safe_relative(rel, hidden=hidden) != rel:
            raise InvalidInput(f"export path {rel!r} would leave {folder}", path=rel)
    out = Written()
    root = _Folder(folder)
    try:
        todo: dict[str, bytes] = {}
        taken: list[str] = []
        for rel, text in files.items():
            data = text.encode("utf-8")
            st, there = root.existing(rel)
            if st is None:
                todo[rel] = data
            elif there == data:
                out.unchanged.append(rel)
            else:
                taken.append(rel)
                todo[rel] = data
        if taken and not force:
            more = f" (and {len(taken) - 1} more)" if len(taken) > 1 else ""
            raise InvalidInput(
                f"{folder / taken[0]} already exists{more}; nothing was written. Export into "
                "an empty folder, or pass --force to keep each such file as "
                "<name>.bak-<time> and write the new one",
                path=str(folder / taken[0]), existing=taken[:50], count=len(taken),
            )  # fmt: skip
        stamp = _stamp(now)
        for rel, data in todo.items():
            if rel in taken:
                out.backups.append(f"{rel} -> {_backup(root, rel, stamp)}")
            _create(root, rel, data)
            out.written.append(rel)
    finally:
        root.close()
    return out


def _backup(root: _Folder, rel: str, stamp: str) -> str:
    """Rename what is at ``rel`` (a file, a link: never followed) to a free backup name."""
    rel_dir, _, name = rel.rpartition("/")
    fd = root.dir_fd(rel_dir, create=False)
    n = 1
    while True:
        backup = f"{name}.bak-{stamp}" + (f"-{n}" if n > 1 else "")
        try:
            os.stat(backup, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            break
        n += 1
    os.rename(name, backup, src_dir_fd=fd, dst_dir_fd=fd)
    return "/".join(p for p in (rel_dir, backup) if p)


def _create(root: _Folder, rel: str, data: bytes) -> None:
    """Create ``rel`` with ``data`` (0600), never replacing a file that is there."""
    rel_dir, _, name = rel.rpartition("/")
    fd = root.dir_fd(rel_dir, create=True)
    tmp = f".{name}.tmp-{os.getpid()}"
    tfd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                  FILE_MODE, dir_fd=fd)  # fmt: skip
    try:
        with os.fdopen(tfd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, name, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
        except FileExistsError:
            raise InvalidInput(
                f"{root.path / rel} appeared while the export was writing; it was left as it is",
                path=str(root.path / rel),
            ) from None
        except OSError as exc:  # a file system without hard links: rename, if still free
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                raise
            try:
                os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                os.rename(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
                return
            raise InvalidInput(
                f"{root.path / rel} appeared while the export was writing; it was left as it is",
                path=str(root.path / rel),
            ) from None
    finally:
        try:
            os.unlink(tmp, dir_fd=fd)
        except FileNotFoundError:
            pass


__all__ = ["DIR_MODE", "FILE_MODE", "Written", "safe_relative", "write_files"]
