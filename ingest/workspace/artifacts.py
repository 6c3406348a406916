"""Managed artifacts: every ingested file version, stored once by content hash.

Layout: ``<store home>/artifacts/<sha256[:2]>/<sha256>`` holding the exact bytes that were
chunked. A chunk's metadata carries ``sha256``, ``start_line`` and ``end_line``, so
:meth:`ArtifactStore.lines` shows the text a chunk came from even after the file changed or
vanished. Writes go to a temporary file that is renamed into place, so a crash never leaves a
partial artifact under its final name; writing the same version twice is a no-op.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path

from retrieval.storage import private

_SHA = re.compile(r"^[0-9a-f]{64}$")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ArtifactStore:
    def __init__(self, home: str | Path) -> None:
        self.root = Path(home) / "artifacts"

    def path(self, sha: str) -> Path:
        if not _SHA.match(sha):
            raise ValueError(f"not a sha256: {sha!r}")
        return self.root / sha[:2] / sha

    def has(self, sha: str) -> bool:
        return self.path(sha).is_file()

    def put(self, data: bytes, sha: str | None = None) -> str:
        """Store ``data`` (once); returns its sha256."""
        sha = sha or sha256_bytes(data)
        dest = self.path(sha)
        if dest.is_file():
            return sha
        private.folder(self.root)
        private.folder(dest.parent)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, dest)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return sha

    def get(self, sha: str) -> bytes:
        return self.path(sha).read_bytes()

    def text(self, sha: str) -> str:
        text = self.get(sha).decode("utf-8", errors="replace")
        return text[1:] if text.startswith("\ufeff") else text

    def lines(self, sha: str, start: int, end: int) -> str:
        """Lines ``start..end`` (1-based, inclusive) of a stored version."""
        return "\n".join(self.text(sha).splitlines()[max(0, start - 1) : end])

    def all(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.glob("??/*") if _SHA.match(p.name))

    def prune(self, keep: Iterable[str]) -> int:
        """Delete artifacts not in ``keep`` (e.g. the versions no chunk refers to); returns
        how many were removed. Temporary files left by a crash go too."""
        keep = set(keep)
        removed = 0
        if not self.root.is_dir():
            return 0
        for p in self.root.glob("??/*"):
            if p.name not in keep:
                try:
                    p.unlink()
                    removed += 1
                except OSError:
                    pass
        return removed


def chunk_source(store: ArtifactStore, metadata: dict) -> str | None:
    """The exact text a chunk came from, from its file version's artifact (None if missing)."""
    sha = metadata.get("sha256")
    try:
        return store.lines(sha, int(metadata["start_line"]), int(metadata["end_line"]))
    except (KeyError, TypeError, ValueError, OSError):
        return None
