"""The ``files`` table: what was ingested from which file version (schema in retrieval/storage/schema.py).

One row per (bucket, absolute path): content sha256, size, mtime (ns), chunk count, state
(``indexed`` or ``skipped`` with a reason), the chunker signature and when it was checked. A
row is written in the same transaction as its file's chunks, so the table and the records
always agree, and an interrupted run resumes from the rows that exist.

Chunk ids are derived, not stored: ``uuid5(bucket, path, sha256, index)``; the ids of a file's
current chunks follow from its row.
"""

from __future__ import annotations

import sqlite3
import uuid
from dataclasses import dataclass

from retrieval.records import utcnow
from retrieval.storage.store import ts

NAMESPACE = uuid.UUID("5b0c3a59-86c1-4c43-9d8e-8f1a5d1ac0de")
INDEXED = "indexed"
SKIPPED = "skipped"
# a file modified within this window of the last check may have kept its mtime: re-hash it
RACY_NS = 2_000_000_000


def chunk_id(bucket: str, path: str, sha: str, index: int) -> str:
    return str(uuid.uuid5(NAMESPACE, f"{bucket}\x00{path}\x00{sha}\x00{index}"))


@dataclass(frozen=True)
class FileRow:
    path: str
    sha256: str
    size: int
    mtime_ns: int
    chunks: int
    state: str
    reason: str | None
    chunker: str
    checked_ns: int

    def chunk_ids(self, bucket: str) -> list[str]:
        return [chunk_id(bucket, self.path, self.sha256, i) for i in range(self.chunks)]

    def unchanged(self, size: int, mtime_ns: int, chunker: str) -> bool:
        """True when the stat values prove the file is as recorded (no read needed)."""
        return (
            self.size == size
            and self.mtime_ns == mtime_ns
            and self.chunker == chunker
            and mtime_ns + RACY_NS < self.checked_ns
        )


_COLS = "path, sha256, size, mtime_ns, chunks, state, reason, chunker, checked_ns"


def _prefix_bounds(root: str) -> tuple[str, str]:
    base = root.rstrip("/") + "/"
    return base, base[:-1] + chr(ord("/") + 1)


def rows_under(conn: sqlite3.Connection, bucket: str, root: str) -> dict[str, FileRow]:
    """Every row of ``bucket`` whose path lies under ``root`` (a range scan on the key)."""
    lo, hi = _prefix_bounds(root)
    rows = conn.execute(
        f"SELECT {_COLS} FROM files WHERE bucket=? AND path>=? AND path<?", (bucket, lo, hi)
    ).fetchall()
    return {r[0]: FileRow(*r) for r in rows}


def put_rows(conn: sqlite3.Connection, bucket: str, rows: list[FileRow]) -> None:
    conn.executemany(
        f"INSERT OR REPLACE INTO files(bucket, {_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
        [
            (bucket, r.path, r.sha256, r.size, r.mtime_ns, r.chunks, r.state, r.reason,
             r.chunker, r.checked_ns)
            for r in rows
        ],
    )  # fmt: skip


def delete_rows(conn: sqlite3.Connection, bucket: str, paths: list[str]) -> None:
    conn.executemany("DELETE FROM files WHERE bucket=? AND path=?", [(bucket, p) for p in paths])


def all_shas(conn: sqlite3.Connection) -> set[str]:
    """Every file version some row refers to (what :meth:`ArtifactStore.prune` must keep)."""
    return {r[0] for r in conn.execute("SELECT DISTINCT sha256 FROM files")}


def record_run(conn: sqlite3.Connection, bucket: str, root: str, report_json: str) -> None:
    """Remember an ingested root and its last run's report (``ingest_runs``, schema v7)."""
    conn.execute(
        "INSERT OR REPLACE INTO ingest_runs(bucket, root, finished_at, report) VALUES (?,?,?,?)",
        (bucket, root, ts(utcnow()), report_json),
    )
