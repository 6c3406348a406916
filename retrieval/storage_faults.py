"""What a failing disk looks like to a caller: SQLite's storage errors and the file system's
(a full disk, a read-only folder, an I/O error, a damaged file) become
:class:`~retrieval.errors.StoreUnavailable` with a message that names the fault and ``data``
that carries it (``reason``: disk_full, read_only, io_error, damaged, cannot_open; ``path``;
``error``: the underlying text). Any other error is left as it is (a bug stays a bug).

The store keeps the last write that failed this way until a write succeeds
(:attr:`~retrieval.store.SQLiteStore.write_failure`): ``pattern_health`` reports it.
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
from pathlib import Path

from .errors import StoreUnavailable

# SQLite's primary result names (the extended ones start with them), and errno values
_SQLITE = (
    ("SQLITE_FULL", "disk_full"),
    ("SQLITE_READONLY", "read_only"),
    ("SQLITE_IOERR", "io_error"),
    ("SQLITE_CORRUPT", "damaged"),
    ("SQLITE_NOTADB", "damaged"),
    ("SQLITE_CANTOPEN", "cannot_open"),
)
_ERRNO = {
    errno.ENOSPC: "disk_full",
    errno.EDQUOT: "disk_full",
    errno.EROFS: "read_only",
    errno.EACCES: "read_only",
    errno.EPERM: "read_only",
    errno.EIO: "io_error",
}
WHAT = {
    "disk_full": "the disk holding the store is full",
    "read_only": "the store's folder or files cannot be written (read-only)",
    "io_error": "the store's disk failed a read or a write (I/O error)",
    "damaged": "the store's file is damaged",
    "cannot_open": "the store's file cannot be opened (is its folder writable?)",
}
LOW_DISK_BYTES = 16 * 2**20  # health warns below this much free space


def reason_of(exc: BaseException) -> str | None:
    """The storage fault ``exc`` stands for, or None when it is not one."""
    if isinstance(exc, sqlite3.Error):
        name = getattr(exc, "sqlite_errorname", "") or ""
        return next((reason for prefix, reason in _SQLITE if name.startswith(prefix)), None)
    if isinstance(exc, OSError):
        return _ERRNO.get(exc.errno)
    return None


def storage_error(
    exc: BaseException, path: str | Path | None, doing: str
) -> StoreUnavailable | None:
    """``exc`` as a :class:`StoreUnavailable` naming the fault (``doing``: what that means for
    the call, e.g. "nothing was written"), or None when ``exc`` is not a storage fault."""
    reason = reason_of(exc)
    if reason is None:
        return None
    detail = getattr(exc, "strerror", None) or str(exc)
    where = f"; {path}" if path else ""
    data = {"reason": reason, "error": str(exc), **({"path": str(path)} if path else {})}
    return StoreUnavailable(f"{WHAT[reason]} ({detail}{where}): {doing}", **data)


def low_disk(path: str | Path) -> str | None:
    """A warning when the file system holding ``path`` has less than :data:`LOW_DISK_BYTES`
    free, else None."""
    try:
        free = shutil.disk_usage(path).free
    except OSError:
        return None
    if free >= LOW_DISK_BYTES:
        return None
    return f"the disk holding the store has {free / 2**20:.1f} MB free: writes fail once it is full"


__all__ = ["LOW_DISK_BYTES", "WHAT", "low_disk", "reason_of", "storage_error"]
