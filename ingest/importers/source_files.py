"""The files of a source folder, read inside it and nowhere else.

A folder source (basic-memory's notes, a project's ``CLAUDE.md`` files, ``~/.claude``) is a tree
someone else may have written: it can hold symbolic links to anything on the machine
(``notes/aws.md -> ~/.aws/credentials``), named pipes, devices, or more files than anyone
keeps. So:

* the folder given is resolved once (a link *to* the folder is the user's own choice), and a
  file is read only when its real path lies inside it: a link to a file inside is read, a link
  out of it is skipped and reported; a link to a folder is never entered (:func:`walk`);
* a file is read by ``ingest.workspace.file_inside`` (:func:`read_text`): opened by its real path without
  following a final symbolic link (``O_NOFOLLOW``) and without waiting on a named pipe
  (``O_NONBLOCK``); it must be a regular file, and where the system tells, the open file's own
  path is checked against the folder again, so a link swapped in between the check and the
  open is caught;
* at most :data:`MAX_FILE_BYTES` of a file are read, at most :data:`MAX_FILES` files walked,
  at most :data:`MAX_DEPTH` folders deep.

Whatever is not read is reported with the reason (``(path, reason)``), never followed.
"""

from __future__ import annotations

import itertools
import os
import stat
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from ingest.workspace.file_inside import OPEN_FLAGS, NotRead, inside, read_inside, special

from .bounded import SourceError, size_text

MAX_FILE_BYTES = 8 << 20  # a Markdown note or instruction file
MAX_FILES = 100_000
MAX_DEPTH = 32
OUTSIDE = "a symbolic link to a file outside the source folder (not read)"
FOLDER_LINK = "a symbolic link to a folder (not followed)"
NOT_UTF8 = "a name that is not UTF-8 (not read)"


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def root_of(path: Path) -> Path:
    """The real path of the source PATH: the folder (or the one file) everything read must
    lie in."""
    return Path(os.path.realpath(path))


def shown(path: Path) -> str:
    """A path as reported when it is not read: its folder resolved, its own name as it is
    (a link is named, not its target)."""
    return (Path(os.path.realpath(path.parent)) / path.name).as_posix()


def read_bytes(path: Path, root: Path, max_bytes: int = MAX_FILE_BYTES) -> tuple[bytes, datetime]:
    """(the bytes, the modification time) of the regular file ``path``, which must lie inside
    ``root`` when it is opened (``ingest.workspace.file_inside``). Raises :class:`~.bounded.SourceError`
    saying why it was not read (outside the folder, not a regular file, too large,
    unreadable)."""
    try:
        data, st = read_inside(path, [root], max_bytes)
    except NotRead as exc:
        raise SourceError(_why(exc, max_bytes)) from None
    return data, datetime.fromtimestamp(st.st_mtime, UTC)


def _why(exc: NotRead, max_bytes: int) -> str:
    if exc.kind == "outside":
        return OUTSIDE
    if exc.kind == "special":
        return f"{special(exc.mode)}, not a file"
    if exc.kind == "changed":
        return "changed while it was opened (not read)"
    if exc.kind == "too_large":
        return (f"too large (a file of {size_text(exc.size)}; at most {size_text(max_bytes)} "
                "are read)")  # fmt: skip
    if exc.kind == "grew":
        return f"too large (grew past {size_text(max_bytes)} while it was read)"
    err = exc.error
    return f"unreadable ({(err.strerror if err else None) or type(err).__name__})"


def read_text(path: Path, root: Path, max_bytes: int = MAX_FILE_BYTES) -> tuple[str, datetime]:
    """:func:`read_bytes` decoded as UTF-8 (a byte-order mark dropped); a file that is not
    UTF-8 text is :class:`~.bounded.SourceError`."""
    data, mtime = read_bytes(path, root, max_bytes)
    try:
        return data.decode("utf-8-sig"), mtime
    except UnicodeDecodeError:
        raise SourceError("not UTF-8 text") from None


def walk(
    root: Path,
    want_file: Callable[[str], bool],
    want_dir: Callable[[str, int], bool],
    max_depth: int = MAX_DEPTH,
    *,
    links: bool = False,
) -> tuple[list[Path], list[tuple[Path, str]]]:
    """(files, skipped) under the folder ``root`` (a real path), in name order, folders depth
    first: the files whose name ``want_file`` accepts, in the folders ``want_dir(name,
    depth)`` accepts. Links to folders are not entered; links to files outside ``root``,
    and anything that is not a regular file, are skipped with the reason (with ``links``, a
    link to a file is listed wherever it points: the caller's :func:`read_text` decides)."""
    files: list[Path] = []
    skipped: list[tuple[Path, str]] = []
    stack: list[tuple[Path, int]] = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(itertools.islice(it, MAX_FILES + 1), key=lambda e: e.name)
        except OSError as exc:
            skipped.append((folder, f"unreadable folder ({exc.strerror})"))
            continue
        if len(entries) > MAX_FILES:
            skipped.append((folder, f"more than {MAX_FILES} entries (the rest not read)"))
            entries = entries[:MAX_FILES]
        below: list[Path] = []
        for entry in entries:
            path = Path(entry.path)
            if not entry.name.isascii() and not _utf8(entry.name):
                skipped.append((path, NOT_UTF8))
                continue
            try:
                is_link = entry.is_symlink()
                is_dir = entry.is_dir(follow_symlinks=False)
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if is_dir:
                if depth + 1 <= max_depth and want_dir(entry.name, depth + 1):
                    below.append(path)
                continue
            target = Path(os.path.realpath(path)) if is_link else path
            if is_link and target.is_dir():
                if want_dir(entry.name, depth + 1):
                    skipped.append((path, FOLDER_LINK))
                continue
            if not want_file(entry.name):
                continue
            if is_link:
                if not links and not inside(target, root):
                    skipped.append((path, OUTSIDE))
                    continue
            elif not stat.S_ISREG(mode):
                skipped.append((path, f"{special(mode)}, not a file"))
                continue
            if len(files) >= MAX_FILES:
                skipped.append((folder, f"more than {MAX_FILES} files (the rest not read)"))
                return files, skipped
            files.append(path)
        stack.extend((p, depth + 1) for p in reversed(below))
    return files, skipped


__all__ = [
    "FOLDER_LINK", "MAX_DEPTH", "MAX_FILES", "MAX_FILE_BYTES", "OPEN_FLAGS", "OUTSIDE", "inside",
    "read_bytes",
    "read_text", "root_of", "shown", "walk",
]  # fmt: skip
