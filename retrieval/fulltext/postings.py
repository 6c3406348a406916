"""An in-memory copy of ``records_fts``'s postings that ranks exactly as FTS5's bm25() does.

Built once from FTS5 itself (``fts5vocab`` instances: same tokens, same stemming) in a background
thread when the store holds at least ``min_records`` records, then kept in step with the store by
the change log: before each query the records changed since the last one (``changes.seq``) are
re-read from ``records_fts`` and re-tokenized. A pruned change log, or a large backlog, rebuilds
it instead. Until it is ready, and for what it does not cover (phrases of several tokens), the
caller ranks with FTS5. Scores: :mod:`retrieval.fulltext.bm25`. The first build of a process loads the
postings saved beside the store instead when they can be brought up to date
(:mod:`retrieval.fulltext.postings_file`); each build and :meth:`Postings.close` save them.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Sequence

import numpy as np

from retrieval.fulltext import postings_file
from retrieval.fulltext.bm25 import Tokenizer, idf, term_scores
from retrieval.storage import changelog

log = logging.getLogger(__name__)

FTS_COLUMNS = ("content", "context", "terms", "bucket")  # records_fts, in order
BUCKET_COL = 3
MAX_BACKLOG = 0.2  # more changed records than this share of the index: rebuild instead


def _trim_heap() -> None:
    """Give the build's freed heap back to the OS (glibc keeps it: ~230 MB at 100k records);
    a no-op where ``malloc_trim`` does not exist."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class Postings:
    def __init__(self, store, weights: Sequence[float], min_records: int = 20_000) -> None:
        self.store = store
        self.weight = np.array([*weights, 0.0][: len(FTS_COLUMNS)], dtype=np.float64)
        # every text column weighs > 0: a record holding a term scores > 0 (idf is floored at
        # 1e-6); a column weighing 0 gives its records bm25 0.0, still a match, as in FTS5
        self.positive = bool((self.weight[:BUCKET_COL] > 0).all())
        self.col_index = {name: i for i, name in enumerate(FTS_COLUMNS)}
        self.min_records = min_records
        self.state = "empty"  # empty -> building -> ready (-> building on a pruned change log)
        self.tokenizer = Tokenizer()
        self._lock = threading.RLock()
        self._thread: threading.Thread | None = None
        self.file = postings_file.path_for(getattr(store, "path", ""))
        self._file_tried = False  # the file is read by the first build only
        self.file_problem: str | None = None  # why a saved file was damaged (health says it)
        self._saved_seq = -1
        self._reset()

    # ------------------------------------------------------------------ state
    def _reset(self) -> None:
        self.seq = -1
        self.n = 0  # slots used (dead ones included)
        self.rowid = np.zeros(0, dtype=np.int64)
        self.bucket = np.zeros(0, dtype=np.int32)
        self.dl = np.zeros(0, dtype=np.float64)
        self.alive = np.zeros(0, dtype=bool)
        self.slot_of: dict[str, int] = {}
        self.bucket_ids: dict[str, int] = {}
        self.n_alive = 0
        self.total_tokens = 0.0
        # term -> (slots, weighted frequencies): a frozen part and appended pieces
        self.post: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.extra: dict[str, list[tuple[int, float]]] = {}
        self.n_extra = 0
        self._vis_cache: dict[tuple, np.ndarray] = {}

    def _grow(self, need: int) -> None:
        if need <= len(self.rowid):
            return
        size = max(need, 2 * len(self.rowid), 1024)
        for name in ("rowid", "bucket", "dl", "alive"):
            old = getattr(self, name)
            new = np.zeros(size, dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)

    def _bucket_id(self, token: str) -> int:
        return self.bucket_ids.setdefault(token, len(self.bucket_ids))

    # ------------------------------------------------------------------ build
    def ensure(self, conn: sqlite3.Connection, n_records: int) -> bool:
        """True when the postings are ready and in step with ``conn``'s view of the store;
        starts the background build the first time the store is large enough."""
        if self.state == "empty" and n_records >= self.min_records:
            self.start()
        if self.state != "ready" or conn.in_transaction:
            # inside a write transaction the store may hold changes that roll back
            return False
        with self._lock:
            return self._sync(conn)

    def start(self) -> None:
        with self._lock:
            if self.state == "building":
                return
            self.state = "building"
            self._thread = threading.Thread(target=self._build_safely, daemon=True, name="bm25")
            self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return self.state == "ready"

    def _build_safely(self) -> None:
        try:
            if self.build(self.store.reader):
                self.save()
        except Exception:  # keep serving from FTS5; the next query does not retry forever
            log.exception("in-memory bm25 postings failed to build; FTS5 ranks instead")
            with self._lock:
                self.state = "failed"
        finally:
            _trim_heap()

    def save(self) -> None:
        """Write the postings beside the store (:mod:`retrieval.fulltext.postings_file`) unless the file
        already holds this state; a failure is logged (the next start builds instead)."""
        if self.file is None or self.state != "ready" or self.seq == self._saved_seq:
            return
        try:
            seq = self.seq
            if postings_file.save(self, self.file):
                self._saved_seq = seq
        except OSError as exc:
            log.warning("could not save the bm25 postings to %s: %s", self.file, exc)

    def close(self) -> None:
        """Save the postings for the next start (when they are ready)."""
        self.save()

    def build(self, conn: sqlite3.Connection) -> bool:
        """Read every FTS5 instance (term, row, column) in one read transaction; True when
        built, False when loaded from the saved file instead (the first build only)."""
        conn.execute("BEGIN")
        try:
            seq = changelog.head(conn)
            loaded = None
            if self.file is not None and not self._file_tried:
                self._file_tried = True
                loaded = self._load_file(conn, seq)
            if loaded is not None:
                built, file_seq = loaded
                self._swap(built, file_seq)
                self._saved_seq = file_seq
                log.info("in-memory bm25 postings loaded: %d records", self.n)
                return False
            ids = dict(conn.execute("SELECT rowid, id FROM records").fetchall())
            conn.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.pm_fts_instances "
                "USING fts5vocab(main, records_fts, 'instance')"
            )
            cur = conn.execute("SELECT term, doc, col FROM temp.pm_fts_instances")
            terms: dict[str, int] = {}
            t_parts, d_parts, c_parts = [], [], []
            while chunk := cur.fetchmany(50_000):
                t_parts.append(np.fromiter((terms.setdefault(r[0], len(terms)) for r in chunk),
                                           dtype=np.int64, count=len(chunk)))  # fmt: skip
                d_parts.append(np.fromiter((r[1] for r in chunk), np.int64, len(chunk)))
                c_parts.append(
                    np.fromiter((self.col_index[r[2]] for r in chunk), np.int8, len(chunk))
                )
        finally:
            conn.execute("COMMIT")
        term_of = np.concatenate(t_parts) if t_parts else np.zeros(0, np.int64)
        doc = np.concatenate(d_parts) if d_parts else np.zeros(0, np.int64)
        col = np.concatenate(c_parts) if c_parts else np.zeros(0, np.int8)
        built = self._assemble(ids, list(terms), term_of, doc, col)
        self._swap(built, seq)
        log.info("in-memory bm25 postings: %d records, %d terms", self.n, len(self.post))
        return True

    def _load_file(self, conn: sqlite3.Connection, seq: int):
        """The saved postings when they match the store (:func:`postings_file.load`); None
        (build from FTS5, which replaces the file) when they do not, a damaged or foreign
        file noted in :attr:`file_problem`."""
        try:
            return postings_file.load(self, conn, self.file, seq, MAX_BACKLOG)
        except postings_file.Rejected as exc:
            log.warning("postings file %s %s: rebuilding it from the store", self.file, exc.reason)
            if exc.fault:
                self.file_problem = f"the saved postings file was {exc.reason}: rebuilt from FTS5"
            return None

    def _swap(self, built: dict, seq: int) -> None:
        with self._lock:  # swap in: queries wait only for the assignment
            self._reset()
            for name, value in built.items():
                setattr(self, name, value)
            self.seq = seq
            self.state = "ready"

    def _assemble(self, ids: dict, names_list: list[str], term_of, doc, col) -> dict:
        """The postings arrays from the instance rows (term id, rowid, column index)."""
        rowids = np.array(sorted(ids), dtype=np.int64)
        n = len(rowids)
        slot = np.searchsorted(rowids, doc)
        ok = (slot < n) & (rowids[np.minimum(slot, n - 1)] == doc) if n else slot < 0
        slot, term_of, col = slot[ok], term_of[ok], col[ok]
        size = max(n, 1024)
        out = {
            "n": n,
            "rowid": np.zeros(size, np.int64),
            "bucket": np.zeros(size, np.int32),
            "dl": np.zeros(size, np.float64),
            "alive": np.zeros(size, bool),
            "slot_of": {ids[int(r)]: i for i, r in enumerate(rowids)},
            "bucket_ids": {},
            "post": {},
        }
        out["rowid"][:n], out["alive"][:n] = rowids, True
        out["dl"][:n] = np.bincount(slot, minlength=n)
        names = np.array(names_list, dtype=object)
        is_bucket = col == BUCKET_COL
        bucket_ids = out["bucket_ids"]
        for s, t in zip(slot[is_bucket].tolist(), term_of[is_bucket].tolist(), strict=True):
            out["bucket"][s] = bucket_ids.setdefault(names[t], len(bucket_ids))
        text = ~is_bucket
        width = max(n, 1)
        uniq, inv = np.unique(term_of[text] * width + slot[text], return_inverse=True)
        freq = np.bincount(inv, weights=self.weight[col[text]], minlength=len(uniq))
        t_u, s_u = uniq // width, (uniq % width).astype(np.int32)
        bounds = np.flatnonzero(np.diff(t_u)) + 1
        for part_t, part_s, part_f in zip(np.split(t_u, bounds), np.split(s_u, bounds),
                                          np.split(freq, bounds), strict=True):  # fmt: skip
            if len(part_t):
                out["post"][names[part_t[0]]] = (part_s, part_f)
        out["n_alive"] = n
        out["total_tokens"] = float(out["dl"][:n].sum())
        return out

    # ------------------------------------------------------------------ keep in step
    def _sync(self, conn: sqlite3.Connection) -> bool:
        """Apply the records changed since ``self.seq``; False (and a rebuild started) when
        the change log was pruned past it or the backlog is large."""
        seq = changelog.head(conn)
        if seq == self.seq:
            return True
        conn.execute("BEGIN")
        try:
            seq = changelog.head(conn)
            changed = [
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT record_id FROM changes WHERE seq > ?", (self.seq,)
                )
            ]
            pruned = not changelog.holds_since(conn, self.seq)
            if pruned or len(changed) > max(1000, MAX_BACKLOG * self.n_alive):
                self.state = "empty"
                self.start()
                return False
            rows = []
            for i in range(0, len(changed), 500):
                part = changed[i : i + 500]
                rows += conn.execute(
                    "SELECT r.id, f.rowid, f.content, f.context, f.terms, f.bucket "
                    "FROM records r JOIN records_fts f ON f.rowid = r.rowid "
                    f"WHERE r.id IN ({','.join('?' * len(part))})",
                    part,
                ).fetchall()
        finally:
            conn.execute("COMMIT")
        for rec_id in changed:
            slot = self.slot_of.pop(rec_id, None)
            if slot is not None and self.alive[slot]:
                self.alive[slot] = False
                self.n_alive -= 1
                self.total_tokens -= self.dl[slot]
        self._add([(r[0], r[1]) for r in rows], [tuple(r[2:]) for r in rows])
        self.seq = seq
        self._vis_cache.clear()
        if self.n_extra > max(50_000, len(self.post)):
            self._merge()
        return True

    def _add(self, keys: list[tuple[str, int]], texts: list[tuple]) -> None:
        instances = self.tokenizer.columns(texts, len(FTS_COLUMNS))
        self._grow(self.n + len(keys))
        for (rec_id, rowid), inst in zip(keys, instances, strict=True):
            slot = self.n
            self.n += 1
            self.rowid[slot], self.alive[slot], self.dl[slot] = rowid, True, len(inst)
            self.slot_of[rec_id] = slot
            self.n_alive += 1
            self.total_tokens += len(inst)
            freq: dict[str, float] = {}
            for col, _, term in inst:
                if col == BUCKET_COL:
                    self.bucket[slot] = self._bucket_id(term)
                else:
                    freq[term] = freq.get(term, 0.0) + self.weight[col]
            for term, f in freq.items():
                self.extra.setdefault(term, []).append((slot, f))
            self.n_extra += len(freq)

    def _merge(self) -> None:
        """Fold the appended pieces into the frozen arrays and drop dead slots' entries."""
        for term in set(self.post) | set(self.extra):
            slots, freq = self._postings(term)
            keep = self.alive[slots]
            self.post[term] = (slots[keep], freq[keep])
        self.extra.clear()
        self.n_extra = 0

    def _postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        slots, freq = self.post.get(term, (np.zeros(0, np.int32), np.zeros(0)))
        more = self.extra.get(term)
        if more:
            add = np.array(more, dtype=np.float64).reshape(-1, 2)
            slots = np.concatenate([slots, add[:, 0].astype(np.int32)])
            freq = np.concatenate([freq, add[:, 1]])
        return slots, freq

    # ------------------------------------------------------------------ query
    def _visible(self, buckets: Sequence[str] | None) -> np.ndarray:
        key = tuple(sorted(buckets)) if buckets is not None else None
        mask = self._vis_cache.get(key)
        if mask is None or len(mask) != self.n:
            mask = self.alive[: self.n].copy()
            if buckets is not None:
                ids = [self.bucket_ids[b] for b in buckets if b in self.bucket_ids]
                mask &= np.isin(self.bucket[: self.n], np.asarray(ids, dtype=np.int32))
            if len(self._vis_cache) > 64:
                self._vis_cache.clear()
            self._vis_cache[key] = mask
        return mask

    def rows(
        self, terms: Sequence[str], buckets: Sequence[str] | None, limit: int | None
    ) -> np.ndarray | None:
        """[rowid, bm25] (FTS5's sign: lower is better) of the rows in ``buckets`` (bucket
        tokens; None = all) holding any of ``terms``, best first when ``limit`` is given; the
        values FTS5's ``bm25()`` gives for the OR of the quoted terms. None when a term is a
        phrase of several tokens (FTS5 matches those by position)."""
        phrases = self.tokenizer.tokens(list(terms))
        if any(len(p) > 1 for p in phrases):
            return None
        with self._lock:
            if self.state != "ready" or self.n_alive == 0:
                return None if self.state != "ready" else np.zeros((0, 2))
            visible = self._visible(buckets)
            every = buckets is None and self.n_alive == self.n  # no dead slot, no filter
            avgdl = self.total_tokens / self.n_alive
            scores = np.zeros(self.n)
            hit = None if self.positive else np.zeros(self.n, dtype=bool)
            for phrase in phrases:
                if not phrase:
                    continue
                slots, freq = self._postings(phrase[0])
                df = len(slots) if every else int(np.count_nonzero(self.alive[slots]))
                if df == 0:
                    continue
                if not every:  # (every slot visible: the masks would keep all)
                    m = visible[slots]
                    slots, freq = slots[m], freq[m]
                scores[slots] += term_scores(float(idf(self.n_alive, df)), freq, self.dl[slots],
                                             avgdl)  # fmt: skip
                if hit is not None:
                    hit[slots] = True
            idx = np.flatnonzero(scores if hit is None else hit)
            out = np.column_stack([self.rowid[idx].astype(np.float64), -scores[idx]])
        if limit is not None and len(out) > limit:
            top = np.argpartition(out[:, 1], limit - 1)[:limit]
            out = out[top]
        if limit is not None:
            out = out[np.argsort(out[:, 1], kind="stable")]
        return out
