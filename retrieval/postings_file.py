"""The in-memory postings (:mod:`retrieval.postings`) saved beside the store, so that a restart
loads them instead of re-reading every FTS5 instance (the build reads every token of the
store through Python: minutes at a million records; the file loads in about a second).

The file (``pattern.sqlite3.postings.npz``) holds the arrays as they were at change-log
sequence ``seq``. It is used only when the store can bring it up to date: its change log still
reaches back to ``seq`` and holds at most the backlog :class:`~retrieval.postings.Postings`
catches up on (the records changed since are then re-read, as after any write), the record it
names as the newest of the file is still there under the same rowid, and the column weights
are the same. Otherwise the postings are built from FTS5 again and the file replaced. It is
written after each build and when the engine closes; a crash leaves an older file, which the
change log brings up to date.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

import numpy as np

from . import private

log = logging.getLogger(__name__)
FORMAT = 1


def path_for(store_path: str) -> Path | None:
    if not store_path or store_path == ":memory:":
        return None
    p = Path(store_path)
    return p.with_name(p.name + ".postings.npz")


def save(postings, path: Path) -> bool:
    """Write the ready postings to ``path`` (atomically); False when they are not ready."""
    with postings._lock:
        if postings.state != "ready":
            return False
        if postings.extra:
            postings._merge()
        n = postings.n
        names = list(postings.post)
        parts = [postings.post[t] for t in names]
        arrays = {
            "format": np.int64(FORMAT),
            "seq": np.int64(postings.seq),
            "weight": postings.weight.copy(),
            "rowid": postings.rowid[:n].copy(),
            "bucket": postings.bucket[:n].copy(),
            "dl": postings.dl[:n].copy(),
            "alive": postings.alive[:n].copy(),
            "bucket_names": np.array(sorted(postings.bucket_ids, key=postings.bucket_ids.get)),
            "terms": np.array(names),
            "lengths": np.array([len(s) for s, _ in parts], dtype=np.int64),
            "slots": np.concatenate([s for s, _ in parts]) if parts else np.zeros(0, np.int32),
            "freq": np.concatenate([f for _, f in parts]) if parts else np.zeros(0),
            "total_tokens": np.float64(postings.total_tokens),
        }
        last = _last_alive(postings)  # once: inside the scan it made the save O(n²)
        newest = next((rid for rid, slot in postings.slot_of.items() if slot == last), None)
        arrays["newest"] = np.array([newest] if newest is not None else [])
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb", opener=private.opener) as fh:
        np.savez(fh, **arrays)
    os.replace(tmp, path)
    return True


def _last_alive(postings) -> int:
    alive = np.flatnonzero(postings.alive[: postings.n])
    return int(alive[-1]) if len(alive) else -1


def load(postings, conn: sqlite3.Connection, path: Path, seq_now: int, max_backlog: float):
    """(arrays for :meth:`Postings._swap`, seq) from ``path``, or None when it is missing,
    unreadable or cannot be brought up to date (see the module's docstring). ``conn`` is in a
    read transaction."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except (OSError, ValueError, KeyError) as exc:
        log.warning("postings file %s unreadable (%s): rebuilding", path, exc)
        return None
    seq = int(data["seq"])
    if int(data["format"]) != FORMAT or not np.array_equal(data["weight"], postings.weight):
        return None
    if seq > seq_now:
        return None  # a file newer than the store: another store's, or a restored backup
    if seq < seq_now:
        oldest = conn.execute("SELECT min(seq) FROM changes").fetchone()[0]
        if oldest is None or oldest > seq + 1:
            return None
        (backlog,) = conn.execute(
            "SELECT count(DISTINCT record_id) FROM changes WHERE seq > ?", (seq,)
        ).fetchone()
        if backlog > max(1000, max_backlog * int(data["alive"].sum())):
            return None
    rowid, alive = data["rowid"], data["alive"]
    n = len(rowid)
    if len(data["newest"]):
        last = int(np.flatnonzero(alive)[-1])
        row = conn.execute("SELECT id FROM records WHERE rowid=?", (int(rowid[last]),)).fetchone()
        if row is None or row[0] != str(data["newest"][0]):
            # deleted since (the change log re-reads it) or not this store's file
            gone = conn.execute(
                "SELECT 1 FROM changes WHERE record_id=? AND seq > ?", (str(data["newest"][0]), seq)
            ).fetchone()
            if gone is None:
                return None
    slot_by_rowid = {int(r): i for i, r in enumerate(rowid.tolist()) if alive[i]}
    slot_of = {}
    for r, rid in conn.execute("SELECT rowid, id FROM records"):
        slot = slot_by_rowid.get(r)
        if slot is not None:
            slot_of[rid] = slot
    bounds = np.cumsum(data["lengths"])[:-1]
    post = dict(
        zip(
            data["terms"].tolist(),
            zip(np.split(data["slots"], bounds), np.split(data["freq"], bounds), strict=True),
            strict=True,
        )
    )
    size = max(n, 1024)

    def padded(a: np.ndarray) -> np.ndarray:
        out = np.zeros(size, dtype=a.dtype)
        out[:n] = a
        return out

    built = {
        "n": n,
        "rowid": padded(rowid),
        "bucket": padded(data["bucket"]),
        "dl": padded(data["dl"]),
        "alive": padded(alive),
        "slot_of": slot_of,
        "bucket_ids": {b: i for i, b in enumerate(data["bucket_names"].tolist())},
        "post": post if len(data["terms"]) else {},
        "n_alive": int(alive.sum()),
        "total_tokens": float(data["total_tokens"]),
    }
    return built, seq


__all__ = ["load", "path_for", "save"]
