"""A store is private to the user who owns it: what it holds (every memory, every indexed
session) is no other local user's to read.

- Folders of a store are created 0700 and its files 0600, whatever the process's umask: the
  store folder and the SQLite file (SQLite creates its ``-wal`` and ``-shm`` with the file's
  own mode), Chroma's folder, the artifacts, the postings file, ``daemon.log``, ``hooks.log``,
  the lock files, ``daemon.json`` and ``tokens.json``.
- A process that serves a store (the daemon, and the vector index's child it starts) runs with
  a umask of 077 (:func:`restrict_umask`), so what libraries create inside (Chroma's own files)
  is private too.
- A store that is not (made by an earlier version, or opened up by hand) is found by
  :func:`exposure`, which ``pattern_health`` reports with the command that fixes it
  (:func:`fix_command`). A store is never made private behind its owner's back.

Standard library only, and few modules of it: the hook client imports it.
"""

from __future__ import annotations

import os
import stat

FOLDER_MODE = 0o700
FILE_MODE = 0o600
SHOWN = 4  # exposed entries named in a report


def folder(path: str | os.PathLike) -> None:
    """Make sure the folder ``path`` exists, with its missing parents; created here, it is
    made 0700 (its parents are left as the umask makes them)."""
    if not os.path.isdir(path):
        os.makedirs(path, mode=FOLDER_MODE, exist_ok=True)
        os.chmod(path, FOLDER_MODE)  # makedirs' mode passes through the umask


def opener(path: str, flags: int) -> int:
    """For ``open(…, opener=private.opener)``: a file created by the call is made 0600."""
    return os.open(path, flags, FILE_MODE)


def touch(path: str | os.PathLike) -> None:
    """Create the file ``path`` (0600) unless it exists; its content is left alone."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, FILE_MODE))


def restrict_umask() -> None:
    """From now on, this process creates nothing that other users may read or enter."""
    os.umask(os.umask(0o077) | 0o077)


def _mode(path: str) -> int | None:
    """The permission bits of ``path`` (None: gone, or a symbolic link, whose own bits mean
    nothing)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return None if stat.S_ISLNK(st.st_mode) else stat.S_IMODE(st.st_mode)


def exposure(home: str | os.PathLike) -> list[str]:
    """What of the store folder ``home`` other users may read, write or enter: the folder
    itself and the entries in it, as ``name (0o755)``; [] when it is private."""
    root = os.fspath(home)
    found: list[str] = []
    mode = _mode(root)
    if mode is None:
        return found
    if mode & 0o077:
        found.append(f"{os.path.basename(root.rstrip(os.sep)) or root} ({oct(mode)})")
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return found
    for name in names:
        mode = _mode(os.path.join(root, name))
        if mode is not None and mode & 0o077:
            found.append(f"{name} ({oct(mode)})")
    return found


def fix_command(home: str | os.PathLike) -> str:
    """The shell command that makes the store folder ``home`` private again."""
    import shlex  # for health only, not for every hook

    return f"chmod -R go-rwx {shlex.quote(os.fspath(home))}"


def exposure_issue(home: str | os.PathLike) -> str | None:
    """One line for health when other users may read the store (None when it is private)."""
    found = exposure(home)
    if not found:
        return None
    more = f" and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
    return (
        f"the store is readable by other users of this machine: {', '.join(found[:SHOWN])}"
        f"{more}; make it private with `{fix_command(home)}`"
    )
