"""The vector outbox applied to Chroma: after each commit, in the background after a failure,
at start-up; orphan vectors; reindex.

Chroma is derived from SQLite. Every write commits one ``vector_outbox`` row per changed record
(``insert``, ``upsert`` or ``delete``, with the bucket) in the same transaction as the record,
so a write is durable at COMMIT whatever Chroma does next. :class:`VectorSync` then applies the
rows and clears them, a row only once Chroma has accepted it:

- **After every commit** either the writing thread applies the outbox before it returns
  (inline), or the background writer applies it (``background=True``, what a serving runtime
  uses: :mod:`retrieval.vector.vector_writer`). Until a record's rows are applied, a search scores it
  exactly from its stored vector (:meth:`VectorSync.pending_ids`), so a write is found by
  meaning as soon as it returns. If Chroma fails, the write still succeeded: the caller gets a
  warning that the vector index is catching up (:func:`catching_up`), and the outbox is
  replayed in the background with exponential backoff (:class:`RetryTimer` inline, the writer
  itself in the background) until it succeeds, without waiting for the next write.
- **One application at a time**: :attr:`VectorSync.lock` (owned here, taken by nothing else).
  Writers that commit while another applies the outbox find their rows applied, or apply them
  together next: concurrent single writes share Chroma calls (a group commit).
- Rows left by a crash are replayed when the model attaches (:meth:`Engine.set_embedder`).
- **A small store has no index** (:mod:`retrieval.vector.index_size`): its rows only get their
  records embedded, and searches score the stored vectors exactly. The run that finds the
  store large enough builds the index from the stored vectors, then applies rows as above.
- **A store of many buckets** keeps every vector in one collection across them as well
  (:mod:`retrieval.vector.across`): every row is applied to it too, and a store that reaches
  the threshold is copied into it one round of :data:`~retrieval.vector.across.FILL_ROUND`
  records at a time by a thread of its own (:attr:`VectorSync.copier`), each round under
  :attr:`VectorSync.lock`, so the outbox is applied between rounds.
- **Orphans** are vectors whose record is gone, lives in another bucket, or has fewer windows
  now; :meth:`VectorSync.orphans` counts them (``pattern-memory stats``) and
  :meth:`VectorSync.remove_orphans` / :meth:`VectorSync.reindex` remove them. A Chroma error
  while deleting keeps the outbox row (only "collection not found" means "nothing to delete").
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from retrieval.errors import NotFound
from retrieval.vector.across import ACROSS, Across
from retrieval.vector.index_size import EXACT, meta_key
from retrieval.vector.vector_writer import BackgroundWriter
from retrieval.vector.vectors import VectorItem

if TYPE_CHECKING:  # pragma: no cover
    from retrieval.embedding.embedder import Embedder
    from retrieval.records import Record
    from retrieval.storage.store import SQLiteStore
    from retrieval.vector.index_size import IndexSize
    from retrieval.vector.vector_process import VectorProcess
    from retrieval.vector.vectors import VectorIndex

log = logging.getLogger(__name__)

# {record id: (the record as just committed, its windows x dim vectors)}
Known = dict[str, tuple["Record", "np.ndarray"]]

OUTBOX_BATCH = 2000  # outbox rows applied per round
# records waiting in the outbox that a search scores exactly (pending_ids); more than this is a
# bulk re-embedding (a model change), whose records are found by vector once the index has them
PENDING_EXACT_MAX = 5000
WRITE_GAP_MS = 200  # the background writer's rounds at most this often (vector_writer.py)
RETRY_FIRST_S = 0.5  # first background retry after a failed application, doubled up to
RETRY_MAX_S = 30.0


class VectorOwner(Protocol):
    """What :class:`VectorSync` reads from its owner (the engine) on every run: its store, its
    current model and vector index (either may attach or change later), and how it embeds."""

    store: SQLiteStore
    embedder: Embedder | None
    vectors: VectorIndex | VectorProcess | None
    index_size: IndexSize

    def vectors_for(
        self, records: Sequence[Record], embedder: Embedder | None
    ) -> dict[str, np.ndarray]: ...

    def bucket_count(self) -> int: ...


def catching_up(exc: BaseException | str) -> str:
    """The warning a write returns when it committed but Chroma failed afterwards (or, with
    the background writer, is failing)."""
    why = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    return (
        f"saved; the vector index is catching up ({why}): search finds this now (its stored "
        "vector is scored directly until the index has it; the index replays it in the "
        "background); do not write it again"
    )


class RetryTimer(BackgroundWriter):
    """Replays the outbox in one background thread after an inline application failed: a
    :class:`~retrieval.vector.vector_writer.BackgroundWriter` whose every run waits ``first`` seconds
    first, again with exponential backoff (``first`` doubled up to ``cap`` seconds) while it
    raises, until it succeeds with no kick since its last start."""

    def __init__(
        self,
        fn: Callable[[], object],
        *,
        first: float = RETRY_FIRST_S,
        cap: float = RETRY_MAX_S,
        name: str = "vector-index-retry",
    ) -> None:
        super().__init__(fn, first=first, cap=cap, name=name, pause_first=True)


class OwnedLock:
    """A lock that knows whether the calling thread holds it: with PostgreSQL, embedding a
    record that has no vector is a canonical write whose log apply asks for a sync again on
    the same thread (``Engine._replicated``), which must not wait for itself."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None

    def __enter__(self) -> None:
        self._lock.acquire()
        self._owner = threading.get_ident()

    def __exit__(self, *exc) -> None:
        self._owner = None
        self._lock.release()

    def mine(self) -> bool:
        return self._owner == threading.get_ident()


class VectorSync:
    """Applies the outbox of one engine's store to its vector index (see the module docstring).

    ``background``: after a commit the rows are applied by one background thread
    (:mod:`retrieval.vector.vector_writer`) instead of the writing thread, and the write returns at
    COMMIT; searches then score the records still in the outbox exactly (:meth:`pending_ids`)."""

    def __init__(
        self, engine: VectorOwner, *, background: bool = False, across_from: int | None = None
    ) -> None:
        self.engine = engine
        self.store = engine.store
        self.across = Across(engine.store, threshold=across_from)  # retrieval/vector/across.py
        self.copier = BackgroundWriter(self._copy_step, name="vector-across-copy")
        self.lock = OwnedLock()
        self.retry = RetryTimer(self.run)
        gap = float(os.environ.get("PATTERN_VECTOR_WRITE_GAP_MS") or WRITE_GAP_MS) / 1000
        self.writer = BackgroundWriter(self._drain, gap=gap) if background else None
        self._known: Known = {}  # records committed since the writer's last round
        self._known_lock = threading.Lock()
        # commits noted (after their COMMIT) vs. the last one known applied: while they differ
        # the outbox may hold rows and searches ask it (pending_ids); rows left by a crash or a
        # model change count as one commit at start
        self._commits, self._applied = 1, 0

    # ------------------------------------------------------------------ applying the outbox
    def run(self, known: Known | None = None) -> int:
        """Apply pending outbox rows to Chroma (embedding records that have no vector yet).
        Returns the number of rows applied; a no-op without an embedder. Raises what Chroma
        raises, leaving the rows not applied in the outbox.

        ``known``: records the caller just committed, with their vectors; those still at the
        stored version are applied from memory instead of being read back from SQLite."""
        embedder = self.engine.embedder  # read once: every vector of this run is this model's
        if embedder is None:
            return 0
        model = embedder.model_id
        size = self.engine.index_size
        applied = 0
        with self.lock:
            noted = self._commits  # every commit noted by now is applied once the outbox is empty
            if size.refresh(model) == EXACT:  # a small store: scanned exactly, no index to update
                applied = self._run_exact(embedder, known)
                if not size.grew(model):
                    self._applied = max(self._applied, noted)
                    return applied
            across, buckets = self.across, self.engine.bucket_count()
            if not size.in_use(model):  # large enough now (or a rebuild cut short): build it
                if size.windows(model):  # (none yet: the outbox brings every vector to it)
                    self._rebuild(embedder)
                elif across.wanted(model, buckets):
                    across.built(model)  # (empty: the outbox brings every vector to it too)
                size.built(model)
            elif not across.active(model) and across.wanted(model, buckets):
                across.begin(model)  # copied in below, round by round
            vectors = self.engine.vectors
            also = across.active(model)  # every change goes to the across collection too
            while rows := self.store.outbox(OUTBOX_BATCH):
                last = rows[-1]["seq"]
                latest: dict[str, str] = {}
                deletes: dict[str, dict[str, None]] = defaultdict(dict)
                for r in rows:  # the last op per record wins
                    latest[r["record_id"]] = r["op"]
                    if r["op"] != "insert":  # a new record has no vectors to clear yet;
                        # every bucket named (a moved record left one); upserts clear stale windows
                        deletes[r["bucket"]][r["record_id"]] = None
                        if also:
                            deletes[ACROSS][r["record_id"]] = None
                for bucket, rids in deletes.items():
                    vectors.delete(bucket, model, list(rids))
                upserts = [rid for rid, op in latest.items() if op != "delete"]
                self._upsert(upserts, embedder, known, also)
                self.store.clear_outbox(last)
                applied += len(rows)
            self._applied = max(self._applied, noted)
            if across.cursor(model) is not None:
                self.copier.kick()  # its rounds take the lock one at a time: writes go between
        return applied

    def ask_across(self) -> None:
        """A search over every bucket of a store of many: start the across collection (the
        next run of the outbox begins it, on the background writer or, without one, the retry
        timer's thread; :attr:`copier` then copies the records in)."""
        if not self.across.asked:
            self.across.asked = True
            (self.writer or self.retry).kick()

    def _copy_step(self) -> None:
        """One round of the copy into the across collection (the copier thread), under
        :attr:`lock`; kicks itself again while records are left."""
        embedder = self.engine.embedder
        if embedder is None or self.engine.vectors is None:
            return
        with self.lock:
            more = self.across.cursor(embedder.model_id) is not None
            more = more and self._copy_across(embedder)
        if more:
            self.copier.kick()

    def _copy_across(self, embedder: Embedder) -> bool:
        """One round of copying records into the across collection while it is being built,
        with :attr:`lock` held; False once every record is in (it is then built)."""
        model = embedder.model_id
        rows = self.across.next_round(model)
        if rows is None:
            return False
        if rows:
            recs, stored = self._vectors([rid for _, rid in rows], embedder)
            items = [VectorItem(r, w, v) for r in recs for w, v in enumerate(stored[r])]
            self.engine.vectors.upsert(ACROSS, model, items)
            self.across.copied(model, rows[-1][0])
        return True

    def _run_exact(self, embedder: Embedder, known: Known | None) -> int:
        """The outbox of a store scanned exactly (:mod:`retrieval.vector.index_size`): records
        that have no vector yet are embedded and their vectors stored; nothing else is done
        with the rows (the index, once built, is built from the stored vectors)."""
        model, size = embedder.model_id, self.engine.index_size
        applied = 0
        while rows := self.store.outbox(OUTBOX_BATCH):
            latest = {r["record_id"]: r["op"] for r in rows}
            self._vectors([rid for rid, op in latest.items() if op != "delete"], embedder, known)
            # cleared only while the store is still exact: once an index is being built (by
            # another engine of this process too) its rows are the index's to apply
            if not self.store.clear_outbox_while(rows[-1]["seq"], meta_key(model), EXACT):
                break
            applied += len(rows)
            if size.grew(model):  # (a store given a model embeds batch by batch: stop here)
                break
        return applied

    def after_commit(self, known: Known | None = None) -> list[str]:
        """Apply the outbox after a commit (inline, or by the background writer); a failure
        becomes a warning and a retry (the write itself is durable: it must not be reported as
        an error)."""
        with self._known_lock:
            self._commits += 1
            if known and self.writer is not None:
                self._known.update(known)
        if self.writer is None:
            return self.flush(known)
        self.writer.kick()
        failing = self.writer.last_error
        return [catching_up(failing)] if failing else []

    def _drain(self) -> None:
        """One round of the background writer: every row committed so far."""
        with self._known_lock:
            known, self._known = self._known, {}
        self.run(known or None)

    def pending_ids(self) -> set[str]:
        """Records whose outbox rows are not applied yet (a search scores them exactly from
        their stored vectors); empty when every commit is known applied, and when there are
        more than :data:`PENDING_EXACT_MAX` (a bulk re-embedding)."""
        if self._applied >= self._commits:
            return set()
        rows = self.store.reader.execute(
            "SELECT DISTINCT record_id FROM vector_outbox LIMIT ?", (PENDING_EXACT_MAX + 1,)
        ).fetchall()
        return {r[0] for r in rows} if len(rows) <= PENDING_EXACT_MAX else set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the background writer has applied every commit so far (True at once
        without one), and a copy into the across collection is done; False on timeout or
        while the vector index fails."""
        end = None if timeout is None else time.monotonic() + timeout
        threads = [t for t in (self.writer, self.copier) if t is not None]
        while True:  # until both are idle at once (a round of one may kick the other)
            for t in threads:
                left = None if end is None else max(0.0, end - time.monotonic())
                if not t.wait_idle(left):
                    return False
            if all(t.wait_idle(0) for t in threads):
                return True

    def flush(self, known: Known | None = None) -> list[str]:
        """Apply the outbox now, on this thread; a failure becomes a warning and a background
        retry."""
        try:
            self.run(known)
        except Exception as exc:  # Chroma raises many kinds
            log.warning("vector index update failed after commit (will retry): %s", exc)
            self.retry.kick()
            return [catching_up(exc)]
        return []

    def _current(self, ids: list[str], known: Known | None) -> Known:
        """The entries of ``known`` for ``ids`` that are still the stored version (another
        writer may have replaced a record after this one committed it)."""
        cand = [rid for rid in ids if rid in known] if known else []
        if not cand:
            return {}
        stored = self.store.versions(cand)
        return {
            rid: known[rid]
            for rid in cand
            if stored.get(rid)
            == (known[rid][0].revision, known[rid][0].bucket, known[rid][0].content_hash)
        }

    def _vectors(
        self, ids: list[str], embedder: Embedder, known: Known | None = None
    ) -> tuple[dict[str, Record], dict[str, np.ndarray]]:
        """The stored records of ``ids`` and their vectors of ``embedder``'s model: from
        ``known`` when still current, else from SQLite; records without one are embedded and
        their vectors stored."""
        model = embedder.model_id
        ready = self._current(ids, known)
        recs = self.store.get([rid for rid in ids if rid not in ready])
        stored = self.store.embeddings(list(recs), model)
        dim = int(getattr(embedder, "dimension", 0) or 0)
        for rid, m in list(stored.items()):  # a damaged stored vector (NaN, inf, another
            if (dim and m.shape[1] != dim) or not np.isfinite(m).all():  # size): embedded
                del stored[rid]  # again and stored in its place (the index refuses it)
        missing = [recs[r] for r in recs if r not in stored]
        if missing:
            fresh = self.engine.vectors_for(missing, embedder)
            with self.store.transaction() as conn:
                self.store.put_embeddings(
                    conn, model, [(r.id, r.content_hash, fresh[r.id]) for r in missing]
                )
            stored.update(fresh)
        for rid, (rec, vecs) in ready.items():
            recs[rid], stored[rid] = rec, vecs
        return recs, stored

    def _upsert(self, ids: list[str], embedder: Embedder, known: Known | None, also: bool) -> None:
        """Upsert the records' vectors into their buckets' collections, and into the across
        collection when ``also`` (it is kept: :mod:`retrieval.vector.across`)."""
        model = embedder.model_id
        recs, stored = self._vectors(ids, embedder, known)
        by_bucket: dict[str, list[VectorItem]] = defaultdict(list)
        # Chroma keeps only `record_id` beside a vector (VectorIndex.upsert): every filter is
        # applied to the candidates in SQLite, so more metadata would cost each write ~0.3 ms
        # of Chroma's metadata indexing for nothing (docs/benchmarks.md, "Scale")
        for rid, rec in recs.items():
            for w, vec in enumerate(stored[rid]):
                item = VectorItem(rid, w, vec)
                by_bucket[rec.bucket].append(item)
                if also:
                    by_bucket[ACROSS].append(item)
        for bucket, items in by_bucket.items():
            self.engine.vectors.upsert(bucket, model, items)

    # ------------------------------------------------------------------ orphans, reindex
    def _model(self) -> str:
        if self.engine.embedder is None or self.engine.vectors is None:
            raise NotFound("no embedding model is loaded; the vector index needs one")
        return self.engine.embedder.model_id

    def orphans(self) -> dict[str, list[str]]:
        """Vector ids of the current model whose record is gone, lives in another bucket, or
        has fewer windows now, per bucket (in the across collection: gone or fewer windows;
        every vector there while it is not kept). Records with pending outbox rows are left
        out (the outbox will fix them)."""
        model = self._model()
        if not self.engine.index_size.in_use(model):
            return {}  # scanned exactly: the index is not read (and is rebuilt when it is built)
        pending = {r[0] for r in self.store.reader.execute("SELECT record_id FROM vector_outbox")}
        out: dict[str, list[str]] = {}
        kept = self.across.active(model)
        for bucket in self.engine.vectors.buckets(model):
            ids = self.engine.vectors.ids(bucket, model)
            if bucket == ACROSS and not kept:
                bad = list(ids)
                if bad:
                    out[bucket] = bad
                continue
            windows = self._windows(model, {vid.split("#", 1)[0] for vid in ids})
            bad = []
            for vid in ids:
                rid, _, w = vid.partition("#")
                if rid in pending:
                    continue
                found = windows.get(rid)
                elsewhere = found is not None and bucket != ACROSS and found[0] != bucket
                if found is None or elsewhere or (found[1] and int(w or 0) >= found[1]):
                    bad.append(vid)
            if bad:
                out[bucket] = bad
        return out

    def _windows(self, model: str, rids: set[str]) -> dict[str, tuple[str, int]]:
        """{record id: (bucket, windows stored for the model's current vectors)}."""
        out: dict[str, tuple[str, int]] = {}
        ids = list(rids)
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            rows = self.store.reader.execute(
                "SELECT r.id, r.bucket, (SELECT count(*) FROM embeddings e WHERE "
                "e.record_rowid = r.rowid AND e.model_id = ? AND e.content_hash = r.content_hash) "
                f"FROM records r WHERE r.id IN ({','.join('?' * len(part))})",
                [model, *part],
            ).fetchall()
            out.update((r[0], (r[1], r[2])) for r in rows)
        return out

    def remove_orphans(self) -> int:
        """Delete every orphan vector (see :meth:`orphans`); returns how many."""
        model = self._model()
        with self.lock:
            found = self.orphans()
            for bucket, ids in found.items():
                self.engine.vectors.delete_ids(bucket, model, ids)
        return sum(map(len, found.values()))

    def reindex(self) -> tuple[int, int]:
        """Rebuild every Chroma collection of the current model from SQLite (stored vectors;
        records without one are embedded). Returns (records indexed, orphans removed). A store
        scanned exactly has no index to rebuild: its records without a vector are embedded."""
        embedder = self.engine.embedder
        model = self._model()
        size = self.engine.index_size
        with self.lock:
            if not size.wanted(model):
                total = 0
                for ids in self.store.all_ids_by_bucket().values():
                    for i in range(0, len(ids), OUTBOX_BATCH):
                        self._vectors(list(ids[i : i + OUTBOX_BATCH]), embedder)
                    total += len(ids)
                return total, 0
            orphans = sum(map(len, self.orphans().values()))
            total = self._rebuild(embedder)
            size.built(model)
        return total, orphans

    def _rebuild(self, embedder: Embedder) -> int:
        """Drop the model's collections and index every record's stored vectors (embedding
        records that have none), in the across collection too when the store wants it now;
        the number of records. With :attr:`lock` held."""
        model = embedder.model_id
        self.engine.vectors.drop_model(model)
        also = self.across.wanted(model, self.engine.bucket_count())
        if also:
            self.across.begin(model)
        else:
            self.across.forget(model)
        total = 0
        for ids in self.store.all_ids_by_bucket().values():
            for i in range(0, len(ids), OUTBOX_BATCH):
                part: Sequence[str] = ids[i : i + OUTBOX_BATCH]
                self._upsert(list(part), embedder, None, also)
                total += len(part)
        if also:
            self.across.built(model)
        return total

    def close(self) -> None:
        self.copier.close(drain=False)  # the copy goes on from its cursor at the next start
        if self.writer is not None:
            self.writer.close()
        self.retry.close(drain=False)


__all__ = ["OUTBOX_BATCH", "RetryTimer", "VectorSync", "catching_up"]
