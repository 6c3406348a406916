"""Writing an export's files where the user keeps files: nothing there is replaced without a
backup, nothing is written through a link, and what is written is the user's alone. Every
export writes through here (``export-to``, ``export-graph``, ``export-memories``/``export``).

:func:`write_files` takes every file of one export (its path under the folder, its text);
:func:`write_paths` takes files each named by its own path (``export-graph``'s graph and
lessons files, ``export-memories``' one file). Both

* first check every file, writing nothing: a file already there with other content is refused
  (one error naming it, and how many more) unless ``force``; one with the same content is left
  as it is (counted unchanged); a folder, a named pipe or a device at a file's name is refused
  even with ``force`` (it is not a file an export could have written);
* with ``force``, rename each such file to ``<name>.bak-<UTC time>`` (a free name: ``-2``,
  ``-3`` … when taken) before writing the new one, and say so;
* walk to each file's folder by folder descriptors opened with ``O_NOFOLLOW``: a folder along
  the way that is a symbolic link (or not a folder) is refused, so a link planted in the export
  folder (``notes -> ~/.ssh``) never receives a file; a file's name that is a link (dangling or
  not) is an existing file: refused, or moved aside with ``force``, never followed; the final
  name is created with ``link(2)`` from a private temporary file, which fails rather than
  replace a file that appeared meanwhile;
* create files 0600 and folders 0700 (the folders they create; the export folder itself, when
  it exists, is left as the user keeps it, and a link the user names as that folder is theirs).

A path under a folder must be relative, without ``..``, ``.`` or empty parts (and without
hidden parts, unless the caller allows them).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from ingest.workspace.file_inside import special
from retrieval.errors import InvalidInput

FILE_MODE = 0o600
# the longest name of a file or folder written: its backup (``.bak-<time>-<n>``) and its
# temporary name (``.<name>.tmp-<pid>``) must still fit a file system's 255 bytes
NAME_BYTES = 230
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
        self.fds: dict[str, int] = {}
        if os.path.exists(folder):
            self._open()
            return
        p = folder  # created only when a file is written; a link to nothing is refused now
        while not os.path.exists(p):
            if os.path.lexists(p):
                raise InvalidInput(
                    f"{p} is a symbolic link to nothing; nothing was written (the export "
                    "creates only real folders)",
                    path=str(p),
                )
            p = p.parent
        if not os.path.isdir(p):
            raise InvalidInput(
                f"{p} is not a folder, so {folder} cannot be made; nothing was written",
                path=str(p),
            )

    def _open(self) -> int:
        try:
            fd = os.open(self.path, DIR_FLAGS)
        except OSError as exc:
            raise InvalidInput(
                f"{self.path} is not a folder an export can be written in ({exc.strerror}); "
                "nothing was written",
                path=str(self.path),
            ) from None
        self.fds[""] = fd
        return fd

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)

    def dir_fd(self, rel_dir: str, create: bool) -> int | None:
        """The descriptor of the subfolder ``rel_dir`` (None when it does not exist and
        ``create`` is false); a part that is a link or not a folder is refused."""
        if rel_dir in self.fds:
            return self.fds[rel_dir]
        if not rel_dir:  # the export folder, not there when the export began
            if not create:
                return None
            _make_dirs(self.path)
            return self._open()
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
            return st, fh.read(st.st_size + 1)  # a file that grew differs anyway


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
    ``hidden``: a path may have hidden parts). Paths are reported relative to ``folder``."""
    for rel in files:
        if safe_relative(rel, hidden=hidden) != rel:
            raise InvalidInput(f"export path {rel!r} would leave {folder}", path=rel)
    return _write([(folder, rel, rel, text) for rel, text in files.items()], force, now)


def write_paths(
    files: Sequence[tuple[str | Path, str]], *, force: bool = False, now: datetime | None = None
) -> Written:
    """Write ``files`` ((path, text) pairs), each at the path the user named (see the module
    docstring): all of them are checked before any is written, and one path given twice is
    refused. Paths are reported as given, made absolute."""
    items: list[tuple[Path, str, str, str]] = []
    seen: set[Path] = set()
    for raw, text in files:
        path = Path(os.path.abspath(Path(raw).expanduser()))
        if path.name in ("", ".", ".."):
            raise InvalidInput(f"{raw} names a folder; give the file to write", path=str(raw))
        key = Path(os.path.realpath(path.parent)) / path.name
        if key in seen:
            raise InvalidInput(
                f"{path} is given twice; nothing was written (give each file its own name)",
                path=str(path),
            )
        seen.add(key)
        items.append((path.parent, path.name, str(path), text))
    return _write(items, force, now)


def _write(items: list[tuple[Path, str, str, str]], force: bool, now: datetime | None) -> Written:
    """``items``: (folder, path under it, path as reported, text). Check all, then write."""
    out = Written()
    roots: dict[Path, _Folder] = {}
    try:
        todo: list[tuple[_Folder, str, str, bytes]] = []
        taken: list[tuple[_Folder, str, str]] = []
        for folder, rel, shown, text in items:
            _check_name(folder, rel)
            root = roots.get(folder) or roots.setdefault(folder, _Folder(folder))
            data = text.encode("utf-8")
            st, there = root.existing(rel)
            if st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                raise InvalidInput(
                    f"{folder / rel} is {special(st.st_mode)}, not a file; nothing was written "
                    "(give the file to write another name)",
                    path=str(folder / rel),
                )
            if st is None:
                todo.append((root, rel, shown, data))
            elif there == data:
                out.unchanged.append(shown)
            else:
                taken.append((root, rel, shown))
                todo.append((root, rel, shown, data))
        if taken and not force:
            first = taken[0][0].path / taken[0][1]
            more = f" (and {len(taken) - 1} more)" if len(taken) > 1 else ""
            raise InvalidInput(
                f"{first} already exists{more}; nothing was written. Export to another name "
                "or an empty folder, or pass --force (the tool's force) to keep each such file "
                "as <name>.bak-<time> and write the new one",
                path=str(first), existing=[s for _r, _p, s in taken[:50]], count=len(taken),
            )  # fmt: skip
        for root, rel, _shown, _data in todo:  # every folder first: a file is written only
            _folder_of(root, rel)  # once none can fail to be made
        stamp = _stamp(now)
        replaced = {(id(r), rel) for r, rel, _s in taken}
        for root, rel, shown, data in todo:
            if (id(root), rel) in replaced:
                backup = _backup(root, rel, stamp)
                shown_dir = shown[: len(shown) - len(rel.rpartition("/")[2])]
                out.backups.append(f"{shown} -> {shown_dir}{backup.rpartition('/')[2]}")
            _create(root, rel, data)
            out.written.append(shown)
    finally:
        for root in roots.values():
            root.close()
    return out


def _check_name(folder: Path, rel: str) -> None:
    for part in rel.split("/"):
        if len(os.fsencode(part)) > NAME_BYTES:
            raise InvalidInput(
                f"{folder / rel}: a name too long ({len(os.fsencode(part))} bytes, at most "
                f"{NAME_BYTES}); nothing was written (give it a shorter name)",
                path=str(folder / rel),
            )


def _folder_of(root: _Folder, rel: str) -> int | None:
    """The descriptor of ``rel``'s folder, made (0700) when missing; one clear error when it
    cannot be."""
    rel_dir = rel.rpartition("/")[0]
    try:
        fd = root.dir_fd(rel_dir, create=True)
    except OSError as exc:
        where = root.path / rel_dir if rel_dir else root.path
        raise InvalidInput(
            f"{where} cannot be made ({exc.strerror or exc}); nothing was written",
            path=str(where),
        ) from None
    return fd


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


__all__ = ["DIR_MODE", "FILE_MODE", "NAME_BYTES", "Written", "safe_relative", "write_files",
           "write_paths"]  # fmt: skip
