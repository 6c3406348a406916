"""One vector collection across every bucket of a model, for a recall that may see them all.

A recall asks the collection of each bucket its caller may see (:mod:`retrieval.vector.vectors`),
and Chroma answers a query of one collection in about the same time whatever its size: 1.3 ms
at 2,000 vectors, 1.9 ms at 100,000 (measured with ``chromadb`` 1.5 on a 2-core machine, 120
hits asked; ten collections of 2,000 took 18 ms). A recall over every bucket of a store of 44
buckets (20 agents in 3 projects) waited 94 ms for its vector side alone.

So a store of :func:`across_from` buckets or more (default 16) keeps every vector of the
model in one more collection, named :data:`ACROSS`: the *across* collection. A search whose
buckets include every bucket the engine knows asks that collection alone, one query, and its
hits pass the same SQLite filter as any others. It is started by the first such search (until
it is built, searches ask bucket by bucket): a store whose searches are all an agent's own
never pays for it. A search of fewer buckets (an agent's
own) asks its buckets' collections as before: a filter inside Chroma costs 50 ms at 100k
(:mod:`retrieval.vector.vectors`), so the across collection cannot serve it.

Its price is a second copy of every vector in the index (disk, the index process's memory,
one more upsert for each round of the outbox: filling a store of 44 buckets to 100k records,
vectors included, ran at 416 records/s with it against 1,298/s without), which is why it waits
for a search that needs it, and a store of few buckets does without: below the threshold a
recall over all of them costs a few queries.

State, per model, node-local in ``meta`` like :mod:`retrieval.vector.index_size`:
``vector_across:<model>`` is absent (not wanted yet), ``build <rowid>`` (the outbox applies
every change to it; records up to that row id are copied in, the rest are being copied) or
``built`` (searches use it); any other value is a copy from the start. The copy runs in
rounds of :data:`FILL_ROUND` records on a thread of its own, each round under the outbox's
lock (:class:`~retrieval.vector.vector_sync.VectorSync`): a change committed during the copy
is applied after the round that read the record before it, and writes are applied between
rounds. One engine per store copies: two engines of one process over the same store hold an
outbox lock each (a store has one writer, its daemon). A rebuild of the
index (``reindex``, or the index's first build) builds it in the same pass.

``PATTERN_VECTOR_ACROSS_FROM`` sets the threshold in buckets (``0``: never).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from retrieval.storage.store import SQLiteStore

# The across collection's bucket name. A record's bucket is one of "private/<project>/<agent>",
# "personal/<agent>", "team/<project>" or "public" (retrieval/storage/buckets.py): this is none.
# (This module imports nothing heavy: the bridge checks the setting before it starts a daemon.)
ACROSS = "every-bucket"
DEFAULT_ACROSS_FROM = 16
FILL_ROUND = 1000  # records copied into the across collection per round of the outbox's lock
BUILT = "built"
_BUILD = "build "


def across_from(env: Mapping[str, str] | None = None) -> int:
    """The threshold in buckets: ``PATTERN_VECTOR_ACROSS_FROM`` (``0``: never), else
    :data:`DEFAULT_ACROSS_FROM`. Raises ValueError for anything but a whole number."""
    raw = ((os.environ if env is None else env).get("PATTERN_VECTOR_ACROSS_FROM") or "").strip()
    if not raw:
        return DEFAULT_ACROSS_FROM
    if not raw.isdigit() or not raw.isascii() or len(raw) > 9:
        raise ValueError(
            f"PATTERN_VECTOR_ACROSS_FROM={raw[:40]!r}: use a whole number of buckets (0: never "
            f"keep a collection across buckets; default {DEFAULT_ACROSS_FROM})"
        )
    return int(raw)


def meta_key(model_id: str) -> str:
    return f"vector_across:{model_id}"


class Across:
    """The across collection's state for one store (see the module docstring)."""

    def __init__(self, store: SQLiteStore, *, threshold: int | None = None) -> None:
        self.store = store
        self.threshold = across_from() if threshold is None else max(0, threshold)
        self.asked = False  # a search over every bucket asked for it (in this process)
        self._wrote: dict[str, int] = {}  # model -> the cursor this process's last round wrote

    def state(self, model_id: str) -> str | int | None:
        """None (not kept), :data:`BUILT`, or the copy's cursor (a row id). Read from the store
        each time (one key: another engine of this process over the same store may have
        changed it). A value that is none of these (damaged) is a copy from the start."""
        raw = self.store.meta(meta_key(model_id))
        if raw is None or raw == BUILT:
            return raw
        tail = raw[len(_BUILD) :] if raw.startswith(_BUILD) else ""
        if tail.isascii() and tail.isdigit() and len(tail) <= 18:
            return int(tail)
        return 0

    def _write(self, model_id: str, value: str | None) -> None:
        with self.store.local_transaction() as conn:
            if value is None:
                conn.execute("DELETE FROM meta WHERE key=?", (meta_key(model_id),))
            else:
                self.store.set_meta(conn, meta_key(model_id), value)

    def enough(self, buckets: int) -> bool:
        """True when a store of this many buckets is at the threshold or above."""
        return 0 < self.threshold <= buckets

    def wanted(self, model_id: str, buckets: int) -> bool:
        """True when a store of this many buckets keeps the across collection of ``model_id``:
        at the threshold or above, once a search over every bucket asked for it (or it is
        kept already)."""
        return self.enough(buckets) and (self.asked or self.active(model_id))

    def covers(self, buckets: Collection[str], known: Collection[str]) -> bool:
        """True when ``buckets`` hold every bucket the engine knows (``known``), more than one."""
        known = set(known)  # one copy first: a write may add a bucket meanwhile
        return len(known) > 1 and known <= set(buckets)

    def active(self, model_id: str) -> bool:
        """True when the outbox applies every change to the across collection too."""
        return self.state(model_id) is not None

    def cursor(self, model_id: str) -> int | None:
        """The row id up to which records are copied in while it is being built; None when it
        is built or not kept."""
        state = self.state(model_id)
        return state if isinstance(state, int) else None

    def begin(self, model_id: str) -> None:
        """From now on the outbox applies every change to it, and the records are copied in."""
        self._write(model_id, f"{_BUILD}0")

    def copied(self, model_id: str, rowid: int) -> None:
        self._write(model_id, f"{_BUILD}{rowid}")
        self._wrote[model_id] = rowid

    def built(self, model_id: str) -> None:
        self._write(model_id, BUILT)

    def forget(self, model_id: str) -> None:
        """Not kept (the index was dropped and not rebuilt with it)."""
        self._write(model_id, None)

    def next_round(self, model_id: str) -> list[tuple[int, str]] | None:
        """The (row id, record id) of the next :data:`FILL_ROUND` records to copy in while it
        is being built (the caller holds the outbox's lock, copies them, then calls
        :meth:`copied`); empty when the copy starts again from the first record (a damaged
        cursor), None once no record is left (it is then built)."""
        cursor = self.cursor(model_id) or 0
        rows = self.store.reader.execute(
            "SELECT rowid, id FROM records WHERE rowid > ? ORDER BY rowid LIMIT ?",
            (cursor, FILL_ROUND),
        ).fetchall()
        if rows:
            return [(int(r[0]), str(r[1])) for r in rows]
        last = self.store.reader.execute("SELECT max(rowid) FROM records").fetchone()[0]
        if cursor > (last or 0) and cursor != self._wrote.get(model_id):
            # past every row, and not where this process's last round left it (the newest
            # records copied and then deleted): a damaged value, copied again from the start
            self._write(model_id, f"{_BUILD}0")
            return []
        self.built(model_id)
        return None

    def serves(
        self, model_id: str | None, buckets: Collection[str], known: Collection[str]
    ) -> bool:
        """True when a search of ``buckets`` asks the across collection alone: ``buckets``
        hold every bucket the engine knows (``known``), more than one, and it is built (read
        only then: an agent's own search reads nothing)."""
        if model_id is None or not self.covers(buckets, known):
            return False
        return self.state(model_id) == BUILT


__all__ = ["ACROSS", "DEFAULT_ACROSS_FROM", "FILL_ROUND", "Across", "across_from", "meta_key"]
