"""The stored vectors of records a search rescores, kept decoded in memory between searches.

The hybrid ranker scores the vector index's hits exactly from the stored vectors
(:meth:`~retrieval.ranking.hybrid.HybridRanker._rescored`: every node ranks alike), and searches read
the same records' windows again and again: the failure hook's lesson search rescores about 400
lessons (1,400 windows) of a project's few hundred each time. Read from SQLite, they cost more
than the rest of the vector side (6 ms of processor time of the hook's 40). Kept here, a search
reads each record's version (revision and content hash: one indexed query) and the windows of
the records whose version it has not seen yet.

An entry is served only for the version it was read at, so a replaced record (a new revision) is
read again; a deleted one has no version and is never served. The windows kept are bounded
(:data:`MAX_WINDOWS`, least recently used first out) and read-only.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

MAX_WINDOWS = 8192  # windows kept (384 floats each: ~12.6 MB with the default model)


class StoredVectors:
    """:meth:`~retrieval.storage.store.SQLiteStore.embeddings` of a store, kept between calls."""

    def __init__(self, store, max_windows: int = MAX_WINDOWS) -> None:
        self.store = store
        self.max_windows = max_windows
        # (record id, model id) -> ((revision, content hash), windows x dim)
        self._kept: OrderedDict[tuple[str, str], tuple[tuple, np.ndarray]] = OrderedDict()
        self._windows = 0
        self._lock = threading.Lock()

    def get(self, ids: Sequence[str], model_id: str) -> dict[str, np.ndarray]:
        """The stored windows of each of ``ids`` that has current ones for ``model_id`` (as
        :meth:`~retrieval.storage.store.SQLiteStore.embeddings`), read-only."""
        versions = {rid: (v[0], v[2]) for rid, v in self.store.versions(ids).items()}
        out: dict[str, np.ndarray] = {}
        missing = []
        with self._lock:
            for rid in dict.fromkeys(ids):
                if rid not in versions:
                    continue  # not stored (deleted): no vectors
                hit = self._kept.get((rid, model_id))
                if hit is not None and hit[0] == versions[rid]:
                    self._kept.move_to_end((rid, model_id))
                    out[rid] = hit[1]
                else:
                    missing.append(rid)
        if missing:
            fresh = self.store.embeddings(missing, model_id)
            with self._lock:
                for rid, vecs in fresh.items():
                    vecs.setflags(write=False)
                    # read after the versions: a record replaced in between is kept under the
                    # version read before, so it is read again by the next search
                    self._keep((rid, model_id), versions[rid], vecs)
            out.update(fresh)
        return out

    def _keep(self, key: tuple[str, str], version: tuple, vecs: np.ndarray) -> None:
        old = self._kept.pop(key, None)
        if old is not None:
            self._windows -= len(old[1])
        if len(vecs) > self.max_windows:
            return
        self._kept[key] = (version, vecs)
        self._windows += len(vecs)
        while self._windows > self.max_windows:
            _, (_, gone) = self._kept.popitem(last=False)
            self._windows -= len(gone)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._windows = 0
