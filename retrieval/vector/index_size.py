"""When a store's vectors are scanned exactly and when its vector index is built.

A small store needs no approximate index. Scoring every stored window against the query is
exact (the index only proposes candidates, which are rescored exactly anyway), costs a few
milliseconds below :data:`DEFAULT_INDEX_FROM` windows (docs/benchmarks.md, "exact scan of a
small store"), and needs no process beside the server: no fork of the index's child, no
Chroma folder opened, no second copy of the vectors. Most stores are small for a long time
(a project's first memories, a test's handful of records).

So each store starts *exact* for a model: writes store their vectors in SQLite as always, the
outbox is cleared without touching Chroma, and searches score the stored windows exactly.
Once the store holds :func:`index_from` windows of the model (or records: a store given a new
model is as large as its records before they are embedded), the index is *built* from the
stored vectors (one rebuild, by whoever applies the outbox: the background writer in a
server), and from then on it is used as before; it is never given up again (a store that
shrinks keeps its index: no rebuild back and forth around the threshold).

The state is node-local (``meta``, like the outbox): ``vector_index:<model>`` is ``exact``,
``build`` (large enough, the rebuild not finished: done again after a crash) or ``built``. It
is written before the model is first attached. So a store that has no key but whose last
attached model is this one was written by a release that applied every write to its index:
it counts as built (no rebuild on upgrade).
With a Chroma server (``chroma_host``) the index is always used: :class:`IndexSize` with
``always=True``.

``PATTERN_VECTOR_INDEX_FROM`` sets the threshold (windows; ``0`` builds the index at once,
every write goes to the index).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from retrieval.storage.store import SQLiteStore

# windows of one model below which a store is scanned exactly (each ~1.5 KB: ~6 MB in all)
DEFAULT_INDEX_FROM = 4000
MAX_INDEX_FROM = 2**62  # a threshold SQLite can count to (a larger one is never reached anyway)
EXACT, BUILD, BUILT = "exact", "build", "built"


def index_from(env: Mapping[str, str] | None = None) -> int:
    """The threshold in windows: ``PATTERN_VECTOR_INDEX_FROM`` of ``env`` (the process's
    environment by default), else :data:`DEFAULT_INDEX_FROM`; at most :data:`MAX_INDEX_FROM`
    (a larger number means the same: never). Raises ValueError for anything but a whole
    number of 0 or more."""
    raw = ((os.environ if env is None else env).get("PATTERN_VECTOR_INDEX_FROM") or "").strip()
    if not raw:
        return DEFAULT_INDEX_FROM
    if not raw.isdigit() or not raw.isascii():
        raise ValueError(
            f"PATTERN_VECTOR_INDEX_FROM={raw[:40]!r}: use a whole number of windows (0: every "
            f"store has its vector index; default {DEFAULT_INDEX_FROM})"
        )
    return min(int(raw[:20]) if len(raw) <= 20 else MAX_INDEX_FROM, MAX_INDEX_FROM)


def meta_key(model_id: str) -> str:
    return f"vector_index:{model_id}"


class IndexSize:
    """The exact-or-index state of one store, per model (see the module docstring)."""

    def __init__(self, store: SQLiteStore, *, threshold: int | None = None,
                 always: bool = False) -> None:  # fmt: skip
        self.store = store
        raw = index_from() if threshold is None else threshold
        self.threshold = min(max(0, raw), MAX_INDEX_FROM)
        self.always = always
        self._state: dict[str, str] = {}  # model -> EXACT | BUILD | BUILT
        self._lock = threading.Lock()

    def state(self, model_id: str) -> str:
        """The model's state, read from the store the first time it is asked."""
        with self._lock:
            got = self._state.get(model_id)
            if got is None:
                got = self._state[model_id] = self._read(model_id)
            return got

    def refresh(self, model_id: str) -> str:
        """The model's state read again from the store unless it is built (another engine of
        this process over the same store may have built the index since)."""
        with self._lock:
            if self._state.get(model_id) != BUILT:
                self._state[model_id] = self._read(model_id)
            return self._state[model_id]

    def _read(self, model_id: str) -> str:
        if self.always:
            return BUILT
        saved = self.store.meta(meta_key(model_id))
        if saved == BUILT:
            return BUILT
        if saved is None and self.store.meta("attached_model") == model_id:
            return BUILT  # indexed by a release that applied every write to the index
        # saved before the model is first attached: a store that has the key was never built
        now = BUILD if self.size(model_id) >= self.threshold else EXACT
        if saved != now:
            with self.store.local_transaction() as conn:
                self.store.set_meta(conn, meta_key(model_id), now)
        return now

    def in_use(self, model_id: str | None) -> bool:
        """True when searches ask the index for ``model_id`` (it is built)."""
        return model_id is not None and self.state(model_id) == BUILT

    def wanted(self, model_id: str | None) -> bool:
        """True when the index's process is needed for ``model_id``: built, or to be built."""
        return model_id is not None and self.state(model_id) != EXACT

    def grew(self, model_id: str) -> bool:
        """After exact writes: True (and the state is BUILD) once the store is as large as the
        threshold (:meth:`size`); True as well when the state is no longer EXACT."""
        with self._lock:
            if self._state.get(model_id) != EXACT:
                return True
            saved = self.store.meta(meta_key(model_id))
            if saved in (BUILD, BUILT):  # another engine of this process over the store
                self._state[model_id] = saved
                return True
            if self.size(model_id) < self.threshold:
                return False
            with self.store.local_transaction() as conn:
                row = conn.execute("SELECT value FROM meta WHERE key=?", (meta_key(model_id),))
                saved = row.fetchone()
                if saved is not None and saved[0] == BUILT:  # another engine built it
                    self._state[model_id] = BUILT
                    return True
                self.store.set_meta(conn, meta_key(model_id), BUILD)
            self._state[model_id] = BUILD
        return True

    def built(self, model_id: str) -> None:
        """The index of ``model_id`` holds every stored vector: searches use it from now on."""
        with self.store.local_transaction() as conn:
            self.store.set_meta(conn, meta_key(model_id), BUILT)
        with self._lock:
            self._state[model_id] = BUILT

    def windows(self, model_id: str) -> int:
        """Stored windows of ``model_id``, counted up to the threshold (an exact store is
        small: the count stops there)."""
        row = self.store.reader.execute(
            "SELECT count(*) FROM (SELECT 1 FROM embeddings WHERE model_id = ? LIMIT ?)",
            (model_id, self.threshold + 1),
        ).fetchone()
        return int(row[0])

    def size(self, model_id: str) -> int:
        """What decides: the model's stored windows, or the records if there are more (each
        will have a window at least: a store switching models, or given its first model, is as
        large as its records before they are embedded); counted up to the threshold."""
        windows = self.windows(model_id)
        if windows > self.threshold:
            return windows
        row = self.store.reader.execute(
            "SELECT count(*) FROM (SELECT 1 FROM records LIMIT ?)", (self.threshold + 1,)
        ).fetchone()
        return max(windows, int(row[0]))


__all__ = ["BUILD", "BUILT", "DEFAULT_INDEX_FROM", "EXACT", "IndexSize", "index_from"]
