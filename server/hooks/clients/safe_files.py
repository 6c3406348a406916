"""The file I/O of ``pattern-memory hooks install``: a client's config file read, backed up and
replaced without following a link it should not, reading a device, leaving a temporary file
behind, or letting another user read a private file's bytes.

- :func:`target`: the file a config path names. A symbolic link is edited where it points (the
  link stays a link: a dotfiles manager's ``~/.claude/settings.json``); in the project scope a
  path that resolves outside the project is refused (a repository can commit
  ``.cursor/mcp.json -> ../../home/.claude.json``: its content must never be copied into the
  working tree), and so is anything that is not a regular file (``/dev/zero``, a FIFO, a
  folder) or a link to nothing;
- :func:`read`: a regular file only (``lstat``, then ``fstat`` of what was opened, never
  following a link), at most :data:`MAX_CONFIG_BYTES` bytes (one more is read to tell);
- :func:`replace`: the new bytes go to a temporary file made by ``mkstemp`` beside the file
  (``O_EXCL``, mode 0600: never a planted name), given the old file's mode before a byte is
  written, then renamed over it; it is removed on any failure;
- :func:`backup`: the old bytes in ``NAME.bak-<time>``, created ``O_CREAT | O_EXCL |
  O_NOFOLLOW`` with the old file's mode (a 0600 file's copy is never readable by others, not
  even for a moment); the first backup (the file before any install) and the newest
  :data:`KEEP_NEWEST` are kept, older ones deleted.
"""

from __future__ import annotations

import os
import stat
import tempfile
import time
from pathlib import Path

from retrieval.errors import InvalidInput

MAX_CONFIG_BYTES = 16 * 2**20  # a config file larger than this is not ours to rewrite
MAX_BACKUPS_READ = 20  # newest backups compared on uninstall
KEEP_NEWEST = 9  # backups kept besides the first: 10 at most, all read by uninstall
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO opens at once (then is refused)
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a symbolic link"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"),
          (stat.S_ISSOCK, "a socket"))  # fmt: skip


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _cannot(verb: str, path: Path, exc: OSError) -> InvalidInput:
    return InvalidInput(f"cannot {verb} {path}: {exc.strerror or exc}; not touching it")


def target(path: Path, inside: Path | None = None) -> Path:
    """The file to read and write for ``path``: itself, or the file its links lead to.
    ``inside``: the project root (project scope), which the file must be in."""
    real = Path(os.path.realpath(path))
    linked = os.path.islink(path)
    if inside is not None:
        root = Path(os.path.realpath(inside))
        if real != root and not real.is_relative_to(root):
            how = "is a symbolic link to" if linked else "resolves (through a linked folder) to"
            raise InvalidInput(f"{path} {how} {real}, outside the project {root}; not touching "
                               "it (a project's config must not edit or copy a file elsewhere)")  # fmt: skip
    try:
        st = os.lstat(real)
    except FileNotFoundError:
        if os.path.lexists(path):
            raise InvalidInput(f"{path} is a symbolic link to {real}, which does not exist; "
                               "not touching it") from None  # fmt: skip
        _check_folder(real.parent, path)
        return real
    except OSError as exc:
        raise _cannot("read", path, exc) from None
    if not stat.S_ISREG(st.st_mode):
        where = f" (through a symbolic link to {real})" if linked else ""
        raise InvalidInput(f"{path} is {_kind(st.st_mode)}{where}, not a regular file; "
                           "not touching it")  # fmt: skip
    return real


def _check_folder(folder: Path, path: Path) -> None:
    """The nearest existing folder above a missing file must be a folder (so it can be made)."""
    while not os.path.lexists(folder) and folder != folder.parent:
        folder = folder.parent
    if not os.path.isdir(folder):
        raise InvalidInput(f"cannot create {path}: {folder} is not a folder; not touching it")


def read(path: Path, shown: Path | None = None) -> tuple[bytes, int] | None:
    """The bytes and permission bits of the regular file at ``path`` (None: no file). A link,
    anything but a regular file, a file over :data:`MAX_CONFIG_BYTES` or one that cannot be
    read is refused (``InvalidInput`` naming ``shown``)."""
    shown = shown or path
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _cannot("read", shown, exc) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InvalidInput(f"{shown} is {_kind(st.st_mode)}, not a regular file; "
                               "not touching it")  # fmt: skip
        chunks, size = [], 0
        while size <= MAX_CONFIG_BYTES:
            chunk = os.read(fd, min(1 << 20, MAX_CONFIG_BYTES + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise _cannot("read", shown, exc) from None
    finally:
        os.close(fd)
    if size > MAX_CONFIG_BYTES:
        raise InvalidInput(f"{shown} is larger than {MAX_CONFIG_BYTES} bytes; not touching it")
    return b"".join(chunks), stat.S_IMODE(st.st_mode)


def new_file_mode() -> int:
    """A new file's mode: 0666 less the umask (read without a moment of a looser one)."""
    mask = os.umask(0o077)
    os.umask(mask)
    return 0o666 & ~mask


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _unlink(path: Path | str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def replace(path: Path, data: bytes, mode: int | None) -> None:
    """``path`` replaced atomically by ``data`` with permission bits ``mode`` (None: a new
    file's); the temporary file is never left behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        try:
            os.fchmod(fd, new_file_mode() if mode is None else mode)  # before any byte
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _backup_key(rest: str) -> tuple[str, int] | None:
    """(time, n) of a backup name's ``YYYYMMDD-HHMMSS[-n]`` (n of at most 6 digits), else None."""
    stamp, extra = rest[:15], rest[15:]
    if not (len(stamp) == 15 and _digits(stamp[:8]) and stamp[8] == "-" and _digits(stamp[9:])):
        return None
    if extra and not (extra[0] == "-" and 1 <= len(extra) - 1 <= 6 and _digits(extra[1:])):
        return None
    return stamp, int(extra[1:] or 0)


def backups(path: Path) -> list[Path]:
    """This file's backups (regular files of our naming, links never), newest first."""
    found = []
    prefix = path.name + ".bak-"
    try:
        with os.scandir(path.parent) as entries:
            for entry in entries:
                if not entry.name.startswith(prefix):
                    continue
                key = _backup_key(entry.name[len(prefix) :])
                if key and entry.is_file(follow_symlinks=False):
                    found.append((key, path.with_name(entry.name)))
    except OSError:
        return []
    return [p for _, p in sorted(found, reverse=True)]


def backup(path: Path, data: bytes, mode: int) -> Path:
    """``data`` (the file's old bytes) written to a new ``NAME.bak-<time>[-n]`` beside it,
    created with ``mode``; older backups beyond the first and the newest kept are deleted."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    for n in range(1000):
        name = path.with_name(f"{path.name}.bak-{stamp}" + (f"-{n}" if n else ""))
        try:
            fd = os.open(name, flags, mode & 0o777)
        except FileExistsError:
            continue
        try:
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)
        except BaseException:
            _unlink(name)
            raise
        prune(path)
        return name
    raise InvalidInput(f"cannot name a backup of {path} (1000 taken this second); not touching it")


def prune(path: Path) -> None:
    """Keep the first backup and the newest :data:`KEEP_NEWEST`; delete the others."""
    for old in backups(path)[KEEP_NEWEST:-1]:
        _unlink(old)
