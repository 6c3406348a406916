"""The in-memory postings (:mod:`retrieval.fulltext.postings`) saved beside the store, so that a restart
loads them instead of re-reading every FTS5 instance (the build reads every token of the
store through Python: minutes at a million records; the file loads in about a second).

The file (``pattern.sqlite3.postings.npz``) holds the arrays as they were at change-log
sequence ``seq``, and beside each live entry a 64-bit digest of its record's id. It is used
only when it matches the store exactly, which the load verifies against the store itself (one
scan of ``records``' rowids and ids, vectorised: a fraction of the load's time):

- its change log still reaches back to ``seq`` and holds at most the backlog
  :class:`~retrieval.fulltext.postings.Postings` catches up on, and the column weights are the same;
- every record not changed since ``seq`` has exactly one live entry, under its rowid, with
  its id's digest, and every other live entry belongs to a record changed since (another
  store's file, or one from a restored backup, fails here).

The entries of the records changed since ``seq`` are dropped at load: those records are then
read again from FTS5, as after any write (a record deleted before the file was written never
comes back, not even under a rowid that a later record reuses). A file that fails any of this,
or raises anything while it is read, is not used: the postings are built from FTS5 again and
the file replaced (:attr:`Rejected.fault` says whether that was damage or just a file too far
behind). It is written after each build and when the engine closes; a crash leaves an older
file, which the change log brings up to date.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

import numpy as np

from retrieval.storage import private

log = logging.getLogger(__name__)
FORMAT = 2
_FNV_OFFSET, _FNV_PRIME = np.uint64(0xCBF29CE484222325), np.uint64(0x100000001B3)


class Rejected(Exception):
    """The file cannot be used: ``reason`` says why; ``fault`` when it is damaged or not this
    store's (health reports it), not merely too far behind the store."""

    def __init__(self, reason: str, *, fault: bool) -> None:
        super().__init__(reason)
        self.reason, self.fault = reason, fault


def digests(ids: list[str]) -> np.ndarray:
    """A 64-bit digest of each id (its UTF-8 bytes read as little-endian 64-bit words, mixed
    FNV-style after the length), computed word column by word column over all ids at once:
    0.2 s for a million ids."""
    if not ids:
        return np.zeros(0, np.uint64)
    encoded = [i.encode() for i in ids]
    lengths = np.fromiter(map(len, encoded), np.int64, len(ids))
    width = max(8, -(-int(lengths.max()) // 8) * 8)
    words = np.array(encoded, dtype=f"S{width}").view("<u8").reshape(len(ids), width // 8)
    h = _FNV_OFFSET ^ lengths.astype(np.uint64)
    shortest = int(lengths.min())
    for j in range(words.shape[1]):
        step = (h ^ words[:, j]) * _FNV_PRIME
        step ^= step >> np.uint64(29)
        h = step if 8 * j < shortest else np.where(lengths > 8 * j, step, h)
    return h


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
        digest = np.zeros(n, np.uint64)
        ids = list(postings.slot_of)
        digest[[postings.slot_of[i] for i in ids]] = digests(ids)
        arrays["digest"] = digest
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb", opener=private.opener) as fh:
        np.savez(fh, **arrays)
    os.replace(tmp, path)
    return True


def load(postings, conn: sqlite3.Connection, path: Path, seq_now: int, max_backlog: float):
    """(arrays for :meth:`Postings._swap`, seq) from ``path``; None when there is no file.
    Raises :class:`Rejected` when it cannot be used (see the module's docstring): anything
    raised while reading or checking it counts as damage. ``conn`` is in a read transaction."""
    if not path.is_file():
        return None
    try:
        return _load(postings, conn, path, seq_now, max_backlog)
    except Rejected:
        raise
    except sqlite3.Error:
        raise  # the store's trouble, not the file's
    except Exception as exc:  # a truncated, empty or foreign file raises anything numpy can
        raise Rejected(f"unreadable ({type(exc).__name__}: {exc})", fault=True) from exc


def _load(postings, conn: sqlite3.Connection, path: Path, seq_now: int, max_backlog: float):
    with np.load(path, allow_pickle=False) as z:
        data = {k: z[k] for k in z.files}
    if int(data["format"]) != FORMAT:
        raise Rejected(f"of format {int(data['format'])}, not {FORMAT}", fault=False)
    if not np.array_equal(data["weight"], postings.weight):
        raise Rejected("made with other column weights", fault=False)
    seq = int(data["seq"])
    if seq > seq_now:  # another store's, or the store is a restored backup
        raise Rejected(f"ahead of the store (change {seq}, the store's last is {seq_now})",
                       fault=True)  # fmt: skip
    rowid, alive = data["rowid"], data["alive"]
    changed: set[str] = set()
    if seq < seq_now:
        oldest = conn.execute("SELECT min(seq) FROM changes").fetchone()[0]
        if oldest is None or oldest > seq + 1:
            raise Rejected("older than the change log reaches back", fault=False)
        changed = {r[0] for r in conn.execute(
            "SELECT DISTINCT record_id FROM changes WHERE seq > ?", (seq,))}  # fmt: skip
        if len(changed) > max(1000, max_backlog * int(alive.sum())):
            raise Rejected(f"{len(changed)} changed records behind the store", fault=False)
    slot_of, live = _match(conn, rowid, alive, data["digest"], changed)
    n = len(rowid)
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
        "alive": padded(live),
        "slot_of": slot_of,
        "bucket_ids": {b: i for i, b in enumerate(data["bucket_names"].tolist())},
        "post": post if len(data["terms"]) else {},
        "n_alive": int(live.sum()),
        "total_tokens": float(data["dl"][live].sum()),
    }
    return built, seq


def _match(conn: sqlite3.Connection, rowid, alive, digest, changed: set[str]):
    """({record id: slot}, live mask) for the records of the store not in ``changed``, checked
    against the file's live entries; raises :class:`Rejected` when they do not match."""
    rows = conn.execute("SELECT rowid, id FROM records").fetchall()
    ids = [r[1] for r in rows if r[1] not in changed] if changed else [r[1] for r in rows]
    rowids = np.fromiter((r[0] for r in rows if not changed or r[1] not in changed), np.int64,
                         len(ids))  # fmt: skip
    slots = np.flatnonzero(alive)
    order = np.argsort(rowid[slots], kind="stable")
    by_rowid = rowid[slots][order]
    if len(by_rowid) > 1 and not np.all(np.diff(by_rowid)):
        raise Rejected("holding two live entries for one row", fault=True)
    pos = np.searchsorted(by_rowid, rowids)
    found = pos < len(by_rowid)
    found[found] = by_rowid[pos[found]] == rowids[found]
    if not found.all():
        raise Rejected(f"missing {int((~found).sum())} of the store's records", fault=True)
    mine = slots[order[pos]]
    if not np.array_equal(digest[mine], digests(ids)):
        raise Rejected("holding other records than the store's (another store's file?)",
                       fault=True)  # fmt: skip
    if len(slots) - len(ids) > len(changed):
        raise Rejected(f"holding {len(slots) - len(ids) - len(changed)} records the store "
                       "does not", fault=True)  # fmt: skip
    live = np.zeros(len(alive), bool)
    live[mine] = True  # the entries of records changed since are dropped: they are read again
    return dict(zip(ids, mine.tolist(), strict=True)), live


__all__ = ["Rejected", "digests", "load", "path_for", "save"]
