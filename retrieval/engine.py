"""The engine: one object that owns a store folder (SQLite + Chroma) and exposes the public
record API: add, update, delete, get, list, search, sync (outbox), reindex.

Write path (:meth:`Engine.apply`, and :meth:`Engine.add` for batches):

0. screen every added or replaced record with the write policy (:attr:`Engine.screen`, given
   by the service), before anything is embedded: what is embedded is what is stored;
1. read the embedder once (the model may attach while a write runs: a write is embedded by
   one model or by none, never split between the two);
2. embed, holding no lock (callers may pass vectors made earlier by :meth:`Engine.embed`);
3. one SQLite transaction (record, FTS, tags, embeddings, change log, outbox row), which runs
   the caller's ``check`` first and ``extra`` last: the store's write lock and ``BEGIN
   IMMEDIATE`` make this transaction the one coordination point of all writers. Concurrent
   writes share one transaction (group commit, :mod:`retrieval.group`): each runs in its own
   savepoint, one that fails is rolled back alone, and each returns after the COMMIT;
4. COMMIT: the write is durable and will be reported as done;
5. apply the outbox to Chroma (:mod:`retrieval.vector.vector_sync`): if that fails, the write still
   returns success, with a warning that the vector index is catching up, and a background
   retry replays the outbox. A crash after COMMIT leaves outbox rows that are replayed when the
   model attaches at the next start.

Locks: the engine takes none of its own; the store owns the write lock, :class:`VectorSync`
the outbox lock and the retry timer.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import weakref
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from retrieval.embedding.embedder import Embedder
from retrieval.fulltext.lexical import LexicalIndex
from retrieval.group import CommitGroup
from retrieval.priority import ReadersFirst
from retrieval.ranking import grouping
from retrieval.ranking.hybrid import EXACT_SCAN_LIMIT, FusionConfig, HybridRanker
from retrieval.storage import private
from retrieval.storage.store import SQLiteStore, parse_ts
from retrieval.vector.across import ACROSS
from retrieval.vector.index_size import BUILD, BUILT, EXACT, IndexSize
from retrieval.vector.vector_process import VectorProcess
from retrieval.vector.vector_sync import VectorSync
from retrieval.vector.vectors import VectorIndex, window_spans, windows, words_of

from .records import Hit, Record, RecordFilter

EmbedText = Callable[[Record], str]
# The write policy: (record to store, warnings) for a record about to be written; raises (a
# PatternError) to refuse it. Given by the service (retrieval knows no policy of its own). A
# policy with a ``forgotten`` method (a history.Forget) also has a secret removed from a memory
# redacted from the memory's kept versions.
Screen = Callable[[Record], tuple[Record, list[str]]]
log = logging.getLogger(__name__)


@dataclass
class Applied:
    """What a committed write reports: the records it deleted, and warnings for the caller
    (the vector index catching up after a Chroma failure)."""

    deleted: list[Record] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


# Words per embedding window. all-MiniLM-L6-v2 reads 256 tokens but was trained on 128: a
# vector per ~60 words (plus the record's context in front) keeps each vector about one thing,
# and a record scores by its best window. Measured on SciFact train (docs/benchmarks.md,
# "Relevance"), vector nDCG@10 by window: 153 words 0.682, 80 0.696, 60 0.706.
DEFAULT_WINDOW_WORDS = 60

# weight of the bare window beside the context-led one (the context-led view weighs 1 - this)
BARE_VIEW_WEIGHT = 1 / 3


def embed_views(rec: Record, max_words: int, overlap: int = 0) -> list[list[tuple[str, float]]]:
    """The texts embedded for a record: one list of weighted *views* per window. A window's
    vector is the normalised weighted sum of its views' vectors; a record's similarity is its
    best window's.

    - No context: the content's word windows, one view each.
    - With context: every content window is embedded with the context in front (each window
      of a long chunk knows its file, a turn its session and neighbours). The context gets the
      room the content leaves, at least half a window; beyond that it is cut (it stays fully
      indexed lexically).
    - When that context is at least as long as the content window, it would dominate the
      vector (a short chat turn with its neighbouring turns): the window alone is a second view,
      so the vector keeps the record's own meaning and its situation (weights
      ``1 - BARE_VIEW_WEIGHT`` : ``BARE_VIEW_WEIGHT``). Measured on LoCoMo (docs/benchmarks.md):
      vector recall@10 0.51 content alone, 0.53 context+content, 0.557 the two views with
      equal weights, 0.570 with weights 2:1.
    """
    if not rec.context:
        return [[(w, 1.0)] for w in windows(rec.content, max_words, overlap)]
    context, ctx, size = _context_fit(rec, max_words)
    out = []
    for w in windows(rec.content, size, min(overlap, size // 2)):
        n = len(words_of(w))
        if len(ctx) >= n:
            out.append([(f"{context}\n{w}", 1.0 - BARE_VIEW_WEIGHT), (w, BARE_VIEW_WEIGHT)])
        else:
            out.append([(f"{context}\n{w}", 1.0)])
    return out


def _context_fit(rec: Record, max_words: int) -> tuple[str, list[str], int]:
    """(the context put in front of each window, its words, content words per window)."""
    content_words = len(words_of(rec.content))
    ctx = words_of(rec.context)
    room = max(max_words // 2, max_words - content_words)
    context = rec.context
    if len(ctx) > room:
        ctx = ctx[:room]
        context = " ".join(ctx)
    return context, ctx, max(max_words - len(ctx), max_words // 2)


def content_spans(rec: Record, max_words: int, overlap: int = 0) -> list[tuple[int, int]]:
    """The word ranges of ``rec.content`` that :func:`embed_views`' windows hold, in window
    order (window ``i``'s stored vector is the content's words ``spans[i]``)."""
    if rec.context:
        size = _context_fit(rec, max_words)[2]
        overlap = min(overlap, size // 2)
    else:
        size = max_words
    return window_spans(len(words_of(rec.content)), size, overlap)


class Engine:
    def __init__(
        self,
        home: str | Path,
        embedder: Embedder | None = None,
        *,
        chroma_host: str | None = None,
        chroma_port: int = 8000,
        fusion: FusionConfig | None = None,
        embed_text: EmbedText | None = None,
        window_words: int | None = None,
        window_overlap: int = 16,
        screen: Screen | None = None,
        store_url: str | None = None,
        vector_process: bool | None = None,
        background_vectors: bool = False,
        index_from: int | None = None,
        across_from: int | None = None,
    ) -> None:
        """The store folder's vector index always runs in a child process
        (:mod:`retrieval.vector.vector_process`, forked by :mod:`retrieval.vector.vector_spawner`): the
        process that writes its HNSW files never holds a text (docs/security.md). With a
        Chroma host it is out of process already. ``vector_process=False`` is not honoured
        (a warning is logged). ``background_vectors``: the outbox is applied by a background
        thread and writes return at COMMIT (:mod:`retrieval.vector.vector_writer`); a serving runtime
        turns it on. ``index_from``: the stored windows from which the vector index is built
        (below, searches scan the stored vectors exactly and no index process runs:
        :mod:`retrieval.vector.index_size`; default ``PATTERN_VECTOR_INDEX_FROM``).
        ``across_from``: the buckets from which every vector is also kept in one collection
        across them (:mod:`retrieval.vector.across`; default ``PATTERN_VECTOR_ACROSS_FROM``)."""
        self.home = Path(home)
        private.folder(self.home)  # retrieval/storage/private.py: a store is its user's alone
        if not chroma_host:
            private.folder(self.home / "chroma")
        self.store = SQLiteStore(self.home / "pattern.sqlite3")
        self.cluster = None
        if store_url:  # PostgreSQL is canonical; this folder's SQLite is the node's replica
            from .pg.cluster import Cluster

            try:
                self.cluster = Cluster(store_url, self.store)
            except BaseException:
                self.store.close()
                raise
        self._chroma = (str(self.home / "chroma"), chroma_host, chroma_port)
        if vector_process is False and not chroma_host:
            log.warning("vector_process=False is not honoured: a store's vector index runs in "
                        "its own process, which never holds a text")  # fmt: skip
        self._start_asked = True  # open_vectors(start=False) defers the index's process
        self.vectors: VectorIndex | VectorProcess | None = (
            None  # opened with the embedder (chromadb is slow to import)
        )
        self.index_size = IndexSize(self.store, threshold=index_from, always=bool(chroma_host))
        self.lexical = LexicalIndex(self.store)
        self.embedder: Embedder | None = None
        self.embed_text = embed_text
        self._window_words = window_words
        self.window_overlap = window_overlap
        self._sync = VectorSync(self, background=background_vectors, across_from=across_from)
        self._commits = CommitGroup(self.store)
        self.readers = ReadersFirst()  # recalls before the stages of writes
        self.ranker = HybridRanker(self.store, self.lexical, None, None, fusion)
        self.ranker.pending = self._sync.pending_ids
        self.ranker.vector_way = self._vector_way
        self._buckets: set[str] = set(self.store.all_buckets())
        self._screen = screen
        self._passed: dict[int, tuple[weakref.ref, str]] = {}  # see screen_record
        # set once a search has ranked with the model (a server starts what that first answer
        # does not need after it: server/http/daemon.py)
        self.answered = threading.Event()
        if self.cluster is not None:
            self.cluster.start(on_applied=self._replicated)
        if embedder is not None:
            self.set_embedder(embedder)

    def _replicated(self, buckets: set[str]) -> None:
        """The replica applied log rows (another node's writes, or a snapshot): learn their
        buckets and push their outbox rows to Chroma (their vectors came with them).

        Inside sync() itself (its embedding of records that have no vector yet is a canonical
        write, which applies the log too) the running loop picks the rows up: sync() reads the
        outbox until it is empty."""
        if "*" in buckets:
            self._buckets = set(self.store.all_buckets())
        else:
            self._buckets.update(buckets)
        if not self._sync.lock.mine():
            self._sync.after_commit()  # a Chroma failure: a background retry, as for writes

    # ------------------------------------------------------------------ embedder
    def set_embedder(self, embedder: Embedder) -> None:
        """Attach the (loaded) embedder, opening the vector index; replays the outbox,
        embedding what is missing. Until then the engine writes and ranks lexically. A small
        store's index process is not started (:mod:`retrieval.vector.index_size`)."""
        wanted = self.index_size.wanted(embedder.model_id)  # read before the model is attached
        self.open_vectors(start=self._start_asked)
        if wanted and self._start_asked:
            self.vectors.start()  # opened before the model without it (a new store then)
        self.embedder = embedder
        self.ranker.embedder = embedder
        self._queue_other_models(embedder.model_id)
        for warning in self._sync.after_commit():  # a failing Chroma must not fail the model
            log.warning("%s", warning)

    def open_vectors(self, start: bool = True) -> None:
        """Open the vector index: start its child process (returns at once; until the child
        has opened the store, searches score stored vectors exactly), or, with a Chroma host,
        its client in this process (importing chromadb holds the GIL ~1 s: a runtime does it
        beside the model load, see server/service/core/runtime.py). Not thread-safe: one caller at
        a time. ``start=False``: the child starts at :meth:`start_vectors` (or at its first
        call). A store scanned exactly (no model attached yet, or too small for an index:
        :mod:`retrieval.vector.index_size`) does not start it."""
        self._start_asked = start
        if self.vectors is None:
            path, host, port = self._chroma
            if host:
                self.vectors = VectorIndex(host=host, port=port)
            else:
                start = start and self.index_size.wanted(self._model_id())
                self.vectors = VectorProcess.shared(path, start=start)
            self.ranker.vectors = self.vectors

    def _model_id(self) -> str | None:
        """The attached model's id, else the one attached last time (None for a new store)."""
        embedder = self.embedder
        return embedder.model_id if embedder is not None else self.store.meta("attached_model")

    def _vector_way(self) -> str:
        """How searches by meaning run now: ``exact`` (a small store's matrix), ``build`` (the
        index being built: the fallback scan) or ``built`` (the index)."""
        return self.index_size.state(self._model_id()) if self.embedder is not None else BUILT

    def vector_search_way(self) -> str:
        """``index``, ``exact`` (a small store) or ``building`` (see :meth:`_vector_way`)."""
        return {BUILT: "index", EXACT: "exact", BUILD: "building"}[self._vector_way()]

    def vector_across(self) -> str | None:
        """The collection across every bucket (:mod:`retrieval.vector.across`): ``built``,
        ``copying`` or None (not kept, or no model)."""
        if self.embedder is None:
            return None
        state = self._sync.across.state(self.embedder.model_id)
        return None if state is None else "copying" if isinstance(state, int) else "built"

    def vector_index_error(self) -> str | None:
        """Why the vector index cannot be used right now: its process could not open the
        store, or applying the outbox keeps failing (None when it works or is not open)."""
        error = self.vectors.error if self.vectors is not None else None
        writer = self._sync.writer
        return error or (writer.last_error if writer is not None else None)

    def vector_fallback(self) -> str | None:
        """What a search by meaning does while the vector index cannot answer (its process
        is opening its store, or died and is being restarted): the ranker then scores the
        stored vectors of the newest records exactly. None when the index answers (or there
        is no vector side: no model yet)."""
        v = self.vectors
        if self.embedder is None or v is None:
            return None
        if not self.index_size.wanted(self.embedder.model_id):
            return None  # a small store: the exact scan is the whole answer
        if not self.index_size.in_use(self.embedder.model_id):
            return (
                f"vector index being built: exact scan of the newest {EXACT_SCAN_LIMIT:,} records"
            )
        if v.ready:
            return None
        why = "vector index unavailable" if v.error else "vector index opening"
        return f"{why}: exact scan of the newest {EXACT_SCAN_LIMIT:,} records"

    def vector_query_deadline(self, seconds: float):
        """A context in which this thread's queries to the vector index's process wait at most
        ``seconds`` each (a hook's budget; :mod:`retrieval.vector.vector_child`)."""
        v = self.vectors
        return v.query_deadline(seconds) if v is not None else contextlib.nullcontext()

    def start_vectors(self) -> None:
        """Start the vector index's process if :meth:`open_vectors` deferred it (not for a
        store scanned exactly: it starts when its index is built)."""
        self._start_asked = True
        if self.vectors is not None and self.index_size.wanted(self._model_id()):
            self.vectors.start()

    def _queue_other_models(self, model_id: str) -> None:
        """Records last embedded by another model are queued for re-embedding: the model
        changed, so their vectors must be remade (sync embeds what is missing). The scan reads
        every record (35 ms and 22 MB of mapped pages at 10k), so it runs only when the model
        differs from the one attached last time (``meta.attached_model``, written in the same
        transaction as the queued rows). Both are this node's own state: with PostgreSQL the
        transaction is local (each node's Chroma, each node's last model)."""
        if self.store.meta("attached_model") == model_id:
            return
        with self.store.local_transaction() as conn:
            conn.execute(
                "INSERT INTO vector_outbox(record_id, op, bucket) SELECT id, 'upsert', bucket "
                "FROM records WHERE embedding_model IS NOT ? AND embedding_model IS NOT NULL",
                (model_id,),
            )
            self.store.set_meta(conn, "attached_model", model_id)

    @property
    def window_words(self) -> int:
        """Words per embedding window: the constructor's value, else ``PATTERN_WINDOW_WORDS``,
        else :data:`DEFAULT_WINDOW_WORDS`; never more than the model's own budget."""
        if self._window_words:
            return self._window_words
        cap = int(getattr(self.embedder, "max_words", 150))
        return min(cap, int(os.environ.get("PATTERN_WINDOW_WORDS") or DEFAULT_WINDOW_WORDS))

    def views(self, rec: Record) -> list[list[tuple[str, float]]]:
        """The weighted texts embedded for ``rec``, one list per window: :func:`embed_views`,
        or the windows of ``embed_text(rec)`` when the engine was given one."""
        if self.embed_text is None:
            return embed_views(rec, self.window_words, self.window_overlap)
        text = self.embed_text(rec)
        return [[(w, 1.0)] for w in windows(text, self.window_words, self.window_overlap)]

    def spans(self, rec: Record) -> list[tuple[int, int]] | None:
        """The content word ranges of ``rec``'s embedding windows (:func:`content_spans`);
        None when the engine embeds another text (``embed_text``)."""
        if self.embed_text is not None:
            return None
        return content_spans(rec, self.window_words, self.window_overlap)

    def vectors_for(
        self, records: Sequence[Record], embedder: Embedder | None
    ) -> dict[str, np.ndarray]:
        """Embed records with ``embedder`` (all windows in one batch); {record id: windows x
        dim}. Empty without an embedder. Callers read ``self.embedder`` once per write and pass
        it here, so a model attaching meanwhile cannot split one write between two states."""
        if embedder is None or not records:
            return {}
        texts, owners = [], []  # owners: (record id, window, weight) per text
        for rec in records:
            for i, window_views in enumerate(self.views(rec)):
                for text, weight in window_views:
                    texts.append(text)
                    owners.append((rec.id, i, weight))
        mat = embedder.embed_documents(texts)
        sums: dict[tuple[str, int], np.ndarray] = {}
        for (rid, i, weight), vec in zip(owners, mat, strict=True):
            v = np.asarray(vec, dtype=np.float32) * np.float32(weight)
            sums[(rid, i)] = sums[(rid, i)] + v if (rid, i) in sums else v
        out: dict[str, list[np.ndarray]] = defaultdict(list)
        for (rid, _i), vec in sums.items():  # insertion order keeps windows in order
            norm = float(np.linalg.norm(vec))
            out[rid].append(vec / norm if norm > 0 else vec)
        return {rid: np.stack(v) for rid, v in out.items()}

    def embed(self, records: Sequence[Record]) -> dict[str, np.ndarray]:
        """The vectors :meth:`apply` would make for ``records`` (for ``apply(vectors=)``), made
        by the current embedder; empty while no model is attached. Call it outside any lock:
        this is the slow part of a write."""
        self.readers.give_way()
        return self.vectors_for(records, self.embedder)

    # ------------------------------------------------------------------ write policy
    @property
    def screen(self) -> Screen | None:
        """The write policy every stored record passes (None: records are stored as given)."""
        return self._screen

    @screen.setter
    def screen(self, fn: Screen | None) -> None:
        self._screen = fn
        self._passed.clear()  # what the old policy passed is not passed by the new one

    def screen_record(self, record: Record) -> tuple[Record, list[str]]:
        """The write policy on one record: (the record to store, its warnings); raises what the
        policy raises to refuse it. Callers that want the warnings or a per-item decision call
        this before a write; the returned record then passes :meth:`add`, :meth:`update` and
        :meth:`apply` without a second scan (unless its text changes in between). Every other
        record is screened by those methods themselves (its warnings are dropped)."""
        if self._screen is None:
            return record, []
        out, warnings = self._screen(record)
        key = id(out)
        ref = weakref.ref(out, lambda _ref, k=key: self._passed.pop(k, None))
        self._passed[key] = (ref, out.current_hash())
        return out, list(warnings)

    def _admit(self, records: Sequence[Record], vectors: dict | None = None) -> list[Record]:
        """``records`` as the write policy lets them be stored (see :meth:`screen_record`); a
        vector made before the policy changed a record's text is dropped from ``vectors``."""
        if self._screen is None:
            return list(records)
        out = []
        for rec in records:
            passed = self._passed.get(id(rec))
            if passed is None or passed[0]() is not rec or passed[1] != rec.current_hash():
                new, _warnings = self.screen_record(rec)
                if vectors and (new.content, new.context) != (rec.content, rec.context):
                    vectors.pop(rec.id, None)
                rec = new
            out.append(rec)
        return out

    # ------------------------------------------------------------------ writes
    def add(self, records: Sequence[Record], *, batch: int = 512) -> list[Record]:
        """Insert records atomically per batch; returns them once committed (and, unless
        Chroma failed, indexed: a failure is logged and retried in the background).

        With several batches, the next batch is embedded (on the embedder's workers) while
        this one is written and applied to Chroma, so the single-threaded store work overlaps
        the embedding instead of following it. Returns the records as stored (screened)."""
        records = self._admit(records)
        parts = [records[i : i + batch] for i in range(0, len(records), batch)]
        embedder = self.embedder  # one model for the whole call (see vectors_for)
        ahead = ThreadPoolExecutor(1, thread_name_prefix="embed-ahead") if len(parts) > 1 else None
        try:
            pending = ahead.submit(self.vectors_for, parts[0], embedder) if ahead else None
            for j, part in enumerate(parts):
                vecs = pending.result() if pending is not None else None
                pending = None
                if ahead is not None and j + 1 < len(parts):
                    pending = ahead.submit(self.vectors_for, parts[j + 1], embedder)
                self.readers.give_way()  # a batch is a stage: a running search goes first
                self._write(part, (), (), None, vecs, None, embedder)
        finally:
            if ahead is not None:
                ahead.shutdown(wait=True, cancel_futures=True)
        return records

    def update(self, record: Record) -> Record:
        record = self._admit([record])[0]
        self.apply(replace=[record])
        return record

    def delete(self, ids: Sequence[str]) -> list[Record]:
        return self.apply(delete=ids).deleted

    def apply(
        self,
        add: Sequence[Record] = (),
        replace: Sequence[Record] = (),
        delete: Sequence[str] = (),
        check=None,
        vectors: Mapping[str, np.ndarray] | None = None,
        extra=None,
    ) -> Applied:
        """One atomic unit of work: inserts, replacements and deletions commit together or not
        at all. ``check(conn)`` runs inside the transaction first (limits, revisions) and may
        raise to abort. ``vectors``: windows already made by :meth:`embed` (a caller embeds
        before taking a lock of its own; a pipeline embeds the next batch while this one is
        written); records missing from it are embedded here, before the transaction.
        ``extra(conn)`` runs last inside the transaction, after the records are written (graph
        rows, extra FTS terms); it may raise to abort too. Every added or replaced record
        passes the write policy first (:meth:`screen_record`).

        Returns the deleted records and the warnings of a write that committed but whose
        vectors could not be applied yet (:func:`~retrieval.vector.vector_sync.catching_up`)."""
        self.readers.give_way()
        vecs = dict(vectors or {})
        add, replace = self._admit(add, vecs), self._admit(replace, vecs)
        return self._write(add, replace, delete, check, vecs, extra, self.embedder)

    def _write(self, add, replace, delete, check, vectors, extra, embedder) -> Applied:
        """:meth:`apply` with the embedder read once by the caller: embed what ``vectors``
        lacks (no lock held), one transaction, then the outbox to Chroma."""
        changed = [*add, *replace]
        vecs: dict[str, np.ndarray] = {}
        if embedder is not None and changed:
            vecs = dict(vectors or {})
            vecs.update(self.vectors_for([r for r in changed if r.id not in vecs], embedder))

        def body(conn) -> list[Record]:
            if check is not None:
                check(conn)
            gone = self.store.delete(conn, list(delete)) if delete else []
            if add:
                self.store.insert(conn, add)
            forget = getattr(self._screen, "forgotten", None)  # a secret removed: see .history
            for rec in replace:
                self.store.replace(conn, rec, forget)
            if embedder is not None and changed:
                self.store.put_embeddings(
                    conn, embedder.model_id, [(r.id, r.content_hash, vecs[r.id]) for r in changed]
                )
            if extra is not None:
                extra(conn)
            return gone

        gone = self._commits(body)  # one transaction, shared with concurrent writes
        self._buckets.update(r.bucket for r in changed)
        known = {r.id: (r, vecs[r.id]) for r in changed if r.id in vecs}
        return Applied(gone, self._sync.after_commit(known))

    # ------------------------------------------------------------------ outbox -> Chroma
    def sync(self) -> int:
        """Apply pending outbox rows to Chroma now (:meth:`VectorSync.run`)."""
        return self._sync.run()

    def wait_vectors(self, timeout: float | None = None) -> bool:
        """Wait until the background writer has applied every write so far to the vector
        index (True at once when writes apply inline); False on timeout or while it fails."""
        return self._sync.wait(timeout)

    def orphan_vectors(self) -> dict[str, list[str]]:
        """Vector ids whose record is gone or elsewhere, per bucket (:meth:`VectorSync.orphans`)."""
        return self._sync.orphans()

    def remove_orphan_vectors(self) -> int:
        return self._sync.remove_orphans()

    def reindex(self) -> tuple[int, int]:
        """Rebuild every Chroma collection of the current model from SQLite: (records indexed,
        orphan vectors removed with the old collections)."""
        return self._sync.reindex()

    # ------------------------------------------------------------------ reads
    def get(self, rec_id: str) -> Record:
        return self.store.get_one(rec_id)

    def search(
        self, query: str, f: RecordFilter | None = None, k: int = 10, mode: str = "hybrid"
    ) -> list[Hit]:
        with self.readers.reading():  # writes give way to it between their stages
            return self._search(query, f, k, mode)

    def _search(self, query: str, f: RecordFilter | None, k: int, mode: str) -> list[Hit]:
        f = f or RecordFilter()
        buckets = self._vector_buckets(f)
        fallback = self.vector_fallback()  # read first: the ranker asks the same before it
        scored = self.ranker.search(query, f, k, mode=mode, buckets=buckets)
        if self.embedder is not None and mode != "lexical":
            self.answered.set()
        if fallback:  # the mode says what the vector side did
            for s in scored:
                if s.explanation.mode in ("hybrid", "vector"):
                    s.explanation.mode = f"{s.explanation.mode} ({fallback})"
        recs = self.store.get([s.record_id for s in scored])  # marks the updated ones
        for s in scored:
            if s.record_id in recs:
                s.explanation.updated_by = recs[s.record_id].updated_by
        return [
            Hit(record=recs[s.record_id], score=s.score, explanation=s.explanation)
            for s in scored
            if s.record_id in recs
        ]

    def bucket_count(self) -> int:
        """The buckets this engine knows records in (deleted ones included)."""
        return len(self._buckets)

    def _vector_buckets(self, f: RecordFilter) -> list[str]:
        """The vector index's buckets a search under ``f`` asks: those ``f`` lets through
        (every one without a visibility filter), or the one collection across them all when
        they are every bucket there is (:mod:`retrieval.vector.across`; the first such search
        of a store of many buckets starts it)."""
        known = set(self._buckets)  # a copy first: a write may add a bucket meanwhile
        buckets = f.buckets if f.buckets is not None else sorted(known)
        if self.embedder is None:
            return buckets
        across, model = self._sync.across, self.embedder.model_id
        if across.serves(model, buckets, known):  # (an agent's own buckets: nothing read)
            return [ACROSS]
        if across.enough(len(known)) and across.covers(buckets, known):
            if not across.active(model):
                self._sync.ask_across()  # built in the background; asked bucket by bucket now
        return buckets

    def nearest(self, vectors: np.ndarray, f: RecordFilter, k: int) -> list[tuple[str, float]]:
        """The ``k`` records passing ``f`` closest to a record whose windows are ``vectors``
        (each scored by its best window against the record's best window), best first; empty
        while no model is attached."""
        if self.embedder is None or self.vectors is None or not len(vectors):
            return []
        mean = np.asarray(vectors, dtype=np.float32).mean(axis=0)
        mean /= max(float(np.linalg.norm(mean)), 1e-12)
        buckets = self._vector_buckets(f)
        found = self.ranker.vector_candidates(mean, f, max(4 * k, 20), buckets) or []
        stored = self.store.embeddings([r for r, _ in found], self.embedder.model_id)
        scored = [(rid, float(np.max(m @ np.asarray(vectors, dtype=np.float32).T)))
                  for rid, m in stored.items()]  # fmt: skip
        return sorted(scored, key=lambda kv: -kv[1])[:k]

    def search_files(
        self, query: str, f: RecordFilter | None = None, k: int = 10, mode: str = "hybrid",
        depth: int = 400,
    ) -> list[grouping.Group[Hit]]:  # fmt: skip
        """The best ``k`` files for ``query``: the chunk hits (top ``depth``: a file needs its
        defining chunk among them for the name factor, so deeper than a recall) grouped by their
        ``path`` (:mod:`retrieval.ranking.grouping`: best chunk plus a share of the next, a test file
        below its source unless the query is about tests, a file the query names in code or
        whose chunks define a name it writes as code above the rest). A record without a path
        is a group of its own."""
        hits = self.search(query, f, max(k, depth), mode=mode)

        def path(h: Hit) -> str:
            return str(h.record.metadata.get("path") or h.record.id)

        defined: dict[str, set[str]] = {}
        for h in hits:
            title = str(h.record.metadata.get("title") or "")
            defined.setdefault(path(h), set()).update(grouping.defined_names(title))
        tests, named = grouping.test_prior(query), grouping.name_prior(query, defined)
        groups = grouping.group(
            hits, key=path, score=lambda h: h.score, factor=lambda p: tests(p) * named(p)
        )
        return groups[:k]

    def close(self) -> None:
        """Drain the vector writer (it stores embeddings, canonical state) while the node is
        still in its cluster, then leave the cluster (the replica refuses writes from then
        on), then close the vector index and the store."""
        self._sync.close()
        self.ranker.close()
        if self.cluster is not None:
            self.cluster.close()
        if self.vectors is not None:
            self.vectors.close()
        if self.lexical.postings is not None:
            self.lexical.postings.close()  # saved for the next start
        self.store.close()


__all__ = [
    "Applied",
    "BARE_VIEW_WEIGHT",
    "Engine",
    "FusionConfig",
    "Screen",
    "embed_views",
    "parse_ts",
]
