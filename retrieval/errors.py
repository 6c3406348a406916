"""The root of the typed error tree and the errors the storage layers raise themselves.

Every error carries a stable ``code`` and JSON-able ``data``. The service's own rule errors
(``AccessDenied``, ``CoreProtected``, ``LimitExceeded``) live with the service, in
``server/service/core/errors.py``, which re-exports these so the faces import one module. The MCP
layer turns errors into tool errors; the CLI turns them into messages. Nothing below
``server/`` raises anything else on purpose.

A failing disk (:func:`storage_error`): SQLite's storage errors and the file system's (a full
disk, a read-only folder, an I/O error, a damaged file) become :class:`StoreUnavailable` with a
message that names the fault and ``data`` that carries it (``reason``: disk_full, read_only,
io_error, damaged, cannot_open; ``path``; ``error``: the underlying text). Any other error is
left as it is (a bug stays a bug). The store keeps the last write that failed this way until a
write succeeds (:attr:`~retrieval.storage.store.SQLiteStore.write_failure`): ``pattern_health``
reports it. Standard library only, and its light part (the ``serve`` bridge imports this).
"""

from __future__ import annotations

import errno
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path


class PatternError(Exception):
    """Base of every error the memory service raises on purpose."""

    code = "pattern_error"

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__(message)
        self.message = message
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "data": self.data}

    def __str__(self) -> str:  # pragma: no cover - trivial
        return f"[{self.code}] {self.message}"


class NotFound(PatternError):
    code = "not_found"


class InvalidInput(PatternError):
    code = "invalid_input"


class Conflict(PatternError):
    code = "conflict"


class StoreUnavailable(PatternError):
    code = "store_unavailable"


# SQLite's primary result names (the extended ones start with them), and errno values
_SQLITE = (
    ("SQLITE_FULL", "disk_full"),
    ("SQLITE_READONLY", "read_only"),
    ("SQLITE_IOERR", "io_error"),
    ("SQLITE_CORRUPT", "damaged"),
    ("SQLITE_NOTADB", "damaged"),
    ("SQLITE_CANTOPEN", "cannot_open"),
)
_ERRNO = (
    (errno.ENOSPC, "disk_full"),
    (errno.EDQUOT, "disk_full"),
    (errno.EROFS, "read_only"),
    (errno.EACCES, "read_only"),
    (errno.EPERM, "read_only"),
    (errno.EIO, "io_error"),
)
WHAT = MappingProxyType({
    "disk_full": "the disk holding the store is full",
    "read_only": "the store's folder or files cannot be written (read-only)",
    "io_error": "the store's disk failed a read or a write (I/O error)",
    "damaged": "the store's file is damaged",
    "cannot_open": "the store's file cannot be opened (is its folder writable?)",
})  # fmt: skip
LOW_DISK_BYTES = 16 * 2**20  # health warns below this much free space


def reason_of(exc: BaseException) -> str | None:
    """The storage fault ``exc`` stands for, or None when it is not one."""
    name = getattr(exc, "sqlite_errorname", None)  # a sqlite3.Error (not imported here)
    if isinstance(name, str):
        return next((reason for prefix, reason in _SQLITE if name.startswith(prefix)), None)
    if isinstance(exc, OSError):
        return next((reason for code, reason in _ERRNO if code == exc.errno), None)
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
    import shutil

    try:
        free = shutil.disk_usage(path).free
    except OSError:
        return None
    if free >= LOW_DISK_BYTES:
        return None
    return f"the disk holding the store has {free / 2**20:.1f} MB free: writes fail once it is full"
