"""Values the code derives from its own regular expressions, kept on disk between processes.

The scans build their tables when they are imported: every pattern is translated to RE2's
syntax (:mod:`.regex_translate`) and the injection rules' patterns are read for the facts that
bound their searches (``server/service/trust/injection_scan/pattern_facts.py``). Both are pure functions of
the pattern and of the code that derives them, and both are dear in Python: about 1.5 s of
processor time in every process that scans (the daemon, each command that writes). So each
process keeps what it derived in a :class:`Table`, and the next process reads it back:

* one JSON file per table and per version of the deriving code: its name holds a digest of
  the deriving modules' source, of the Python version (whose ``re`` parser they read) and of
  the RE2 library, so a change to any starts a new file and an old one is never read;
* under ``PATTERN_CACHE_DIR`` or the user cache folder (``~/.cache/pattern-memory/derived``);
* read only when the folder and the file are owned by this user and writable by nobody else,
  the file is a regular one (a link, a FIFO or a device is never opened for reading: the
  open neither follows nor waits) and at most :data:`MAX_BYTES`; each value is decoded by the
  table's own checked decoder, and any file or value that does not decode is ignored (the
  value is derived again). The files are as trusted as the user's own configuration: another
  user cannot change them, but a program running as the user could, as it could change the
  user's shell start-up files or the package itself;
* written only by the product's own processes (the command line and the daemon call
  :func:`write_new` at start; a program that imports the package, a test run, reads the files
  but never adds its own patterns to them), at exit: to a temporary file renamed over the old
  one, merged with what other processes wrote meanwhile; a table keeps at most
  :data:`MAX_ENTRIES` values (the code's patterns are a few hundred), and the files of older
  versions of the deriving code are removed once :data:`STALE_DAYS` old.

``PATTERN_DERIVED_CACHE=0`` turns the files off (every value is derived in the process).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import stat
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MAX_BYTES = 8 * 2**20
MAX_ENTRIES = 4096
STALE_DAYS = 7
_TABLES: list[Table] = []
_LOCK = threading.Lock()
_WRITE = False


def write_new(on: bool = True) -> None:
    """Let this process add what it derives to the files (the product's entry points)."""
    global _WRITE
    _WRITE = on


def enabled() -> bool:
    return os.environ.get("PATTERN_DERIVED_CACHE", "1").strip().lower() not in (
        "0",
        "false",
        "no",
        "off",
    )


def folder() -> Path:
    """``PATTERN_CACHE_DIR`` or the user cache folder, ``derived`` inside it."""
    root = os.environ.get("PATTERN_CACHE_DIR")
    if not root:
        import platformdirs

        root = platformdirs.user_cache_dir("pattern-memory")
    return Path(root).expanduser() / "derived"


class Table:
    """Derived values of one kind, keyed by a JSON-able key, kept between processes.

    ``sources``: the files of the modules whose code derives the values (their text is in the
    file's name, as a digest)."""

    def __init__(self, name: str, sources: tuple[str, ...], built: tuple[str, ...] = ()):
        """``built``: compiled modules the values depend on (their size and time stand for
        their content: hashing a library on every start would cost what the table saves)."""
        digest = hashlib.sha256(sys.version.encode())
        for src in sources:
            digest.update(Path(src).read_bytes())
        for lib in built:
            st = os.stat(lib)
            digest.update(f"{lib}:{st.st_size}:{st.st_mtime_ns}".encode())
        self.kind, self.name = name, f"{name}-{digest.hexdigest()[:16]}"
        self.folder = folder()  # where it was made: a later change of the setting moves nothing
        self._values: dict[str, Any] | None = None  # encoded values, as read and derived
        self._new = False
        with _LOCK:
            _TABLES.append(self)

    @property
    def path(self) -> Path:
        return self.folder / f"{self.name}.json"

    def get(
        self,
        key: Any,
        derive: Callable[[], Any],
        encode: Callable[[Any], Any],
        decode: Callable[[Any], Any],
    ) -> Any:
        """The value for ``key``: read back (``decode``), or derived and kept (``encode``)."""
        if not enabled():
            return derive()
        k = json.dumps(key, ensure_ascii=False, separators=(",", ":"))
        with _LOCK:
            if self._values is None:
                self._values = self._read()
            kept = self._values.get(k)
        if kept is not None:
            try:
                return decode(kept)
            except (TypeError, ValueError, KeyError, IndexError):  # a bad value: derived again
                pass
        value = derive()
        with _LOCK:
            if len(self._values) < MAX_ENTRIES:
                self._values[k] = encode(value)
                self._new = True
        return value

    def _read(self) -> dict[str, Any]:
        if not _private(self.folder):
            return {}
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        try:
            fd = os.open(self.path, flags)  # (a FIFO planted there never blocks the open)
        except OSError:
            return {}
        try:
            if not _private(fd, regular=True):
                return {}
            st = os.fstat(fd)
            if st.st_size > MAX_BYTES:
                return {}
            with os.fdopen(fd, "rb", closefd=False) as fh:
                data = json.loads(fh.read(MAX_BYTES + 1))
        except (OSError, ValueError, RecursionError):
            return {}
        finally:
            os.close(fd)
        if not isinstance(data, dict):
            return {}
        return dict(list(data.items())[:MAX_ENTRIES])

    def save(self) -> None:
        """Write the values derived here, merged with the file's (never raises)."""
        with _LOCK:
            if not _WRITE or not self._new or self._values is None:
                return
            merged = {**self._read(), **self._values}
            self._new = False
        try:
            target = self.path
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not _private(target.parent):
                return
            tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(dict(list(merged.items())[:MAX_ENTRIES]), fh, ensure_ascii=False)
            os.replace(tmp, target)
            self._drop_stale()
        except OSError:  # a read-only or full cache folder: the values are derived next time
            try:
                tmp.unlink()  # type: ignore[possibly-undefined]
            except (OSError, NameError):
                pass

    def _drop_stale(self) -> None:
        """Remove the files of other versions of the deriving code, once they are old."""
        cutoff = time.time() - STALE_DAYS * 86400
        for old in self.folder.glob(f"{self.kind}-*.json"):
            try:
                if old.name != f"{self.name}.json" and old.lstat().st_mtime < cutoff:
                    old.unlink()
            except OSError:
                pass


def _private(where, regular: bool = False) -> bool:
    """A folder (a path) or an open file (a descriptor) owned by this user and writable by
    nobody else; ``regular``: a regular file."""
    try:
        st = os.fstat(where) if isinstance(where, int) else os.stat(where)
    except OSError:
        return False
    mine = not hasattr(os, "getuid") or st.st_uid == os.getuid()
    kind = stat.S_ISREG(st.st_mode) if regular else stat.S_ISDIR(st.st_mode)
    return mine and kind and not st.st_mode & 0o022


def save_all() -> None:
    """Write every table with new values (at exit too)."""
    with _LOCK:
        tables = list(_TABLES)
    for table in tables:
        table.save()


atexit.register(save_all)
