"""The hybrid ranker: lexical (FTS5 bm25) + vector (Chroma cosine) candidates, completed and fused.

1. Both retrievers get the same filter before truncation: FTS5 joins the records table with the
   filter's SQL; the vector side queries only the visible buckets' collections and post-filters
   with the same SQL, falling back to an exact scan of the filtered records when a selective
   filter leaves too few ANN hits.
2. Score completion: a candidate found by one retriever only gets its real score from the other
   (bm25 restricted to those rows; cosine from the vectors stored in SQLite), instead of the
   "missing = minimum" guess that plain fusion makes.
3. Fusion: :mod:`retrieval.ranking.fusion` (method chosen by ``benchmarks/relevance.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from retrieval.embedding.embedder import Embedder
from retrieval.errors import StoreUnavailable
from retrieval.fulltext.lexical import LexicalIndex
from retrieval.ranking import fusion, longquery, modality
from retrieval.ranking.guard import guarded
from retrieval.records import Explanation, RecordFilter
from retrieval.storage.store import SQLiteStore, list_ids
from retrieval.timeline import links
from retrieval.timeline.timeprior import StatedCache, TimePrior, TimeWeights
from retrieval.vector.exact_scan import ExactScan
from retrieval.vector.index_size import BUILD, BUILT, EXACT
from retrieval.vector.stored_vectors import StoredVectors
from retrieval.vector.vector_process import VectorIndexError, VectorProcess
from retrieval.vector.vectors import VectorIndex

EXACT_SCAN_LIMIT = 50_000
# a search's mode when the vector index did not answer it in time (or failed)
NOT_ANSWERING = "vector index did not answer: lexical candidates only"


@dataclass
class FusionConfig:
    """How lexical and vector scores are combined (defaults chosen by benchmark, see docs/architecture.md)."""

    method: str = "convex"  # convex | rrf
    alpha: float = 0.6  # weight of the vector side in convex fusion
    norm: str = "minmax"  # minmax | zscore
    depth: int = 100  # candidates taken from each retriever
    complete: bool = True  # fetch the missing side's real score
    rrf_k: float = 60.0
    long_queries: bool = True  # the views of long queries (retrieval/ranking/longquery.py)
    probe_windows: bool = True  # a window's salience: how completely one record covers it
    long_alpha: float = 0.7  # vector weight for a long query that is all evidence (a report)
    long_max_terms: int = longquery.MAX_TERMS
    salient_terms: float = longquery.SALIENT_TERMS
    salient_vector: float = longquery.SALIENT_VECTOR
    # a short prose query whose best vector candidates are mostly code leans on the vector side
    # (retrieval/ranking/modality.py): vector weight code_alpha when >= code_share of the top code_top
    code_alpha: float | None = 0.8
    code_share: float = 0.5
    code_top: int = 10
    # the time prior (retrieval/timeline/timeprior.py): gains added to the fused score of records from
    # the window a query names, from one side of an event it names, and, for a question that
    # asks when, of records that state a time. Chosen on LoCoMo dev and LongMemEval_S together
    # (benchmarks/lab/time_lab.py; docs/benchmarks.md, "Time and updates")
    window_weight: float = 0.1
    event_weight: float = 0.05
    when_weight: float = 0.15
    # a question about the current state prefers, among candidates of about the same relevance,
    # the newer (retrieval/timeline/timeprior.py, recent_gain); chosen the same way
    recent_weight: float = 0.07
    recent_depth: int = 20
    recent_margin: float = 0.3
    # the times a record's own text speaks of ("last Friday") count as its dates for windows
    stated_times: bool = True
    # an updated record's current version ranks just above it (retrieval/timeline/links.py)
    current_first: bool = True


@dataclass
class Scored:
    record_id: str
    score: float
    explanation: Explanation


class HybridRanker:
    def __init__(
        self,
        store: SQLiteStore,
        lexical: LexicalIndex,
        vectors: VectorIndex | VectorProcess | None,
        embedder: Embedder | None,
        config: FusionConfig | None = None,
    ) -> None:
        self.store = store
        self.lexical = lexical
        self.vectors = vectors
        self.embedder = embedder
        self.config = config or FusionConfig()
        # records whose vectors are not in the index yet (VectorSync.pending_ids; set by Engine)
        self.pending: Callable[[], set[str]] | None = None
        # how the vector side is searched (retrieval/vector/index_size.py; set by Engine):
        # EXACT a small store's matrix, BUILD the index being built, BUILT the index
        self.vector_way: Callable[[], str] = lambda: BUILT
        self._small = ExactScan(store)  # a small store's windows in one matrix
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="lexical")
        self._stated = StatedCache()  # the times records speak of, read once per text
        self._stored = StoredVectors(store)  # the rescored records' windows, between searches

    def close(self) -> None:
        """Stop the lexical worker threads (a search after this is refused)."""
        self._pool.shutdown(wait=True)

    def vector_ready(self) -> bool:
        return self.embedder is not None and self.vectors is not None

    # ---------------------------------------------------------------- vector side
    def _vector_candidates(
        self, qvec: np.ndarray, f: RecordFilter, depth: int, buckets: list[str]
    ) -> list[tuple[str, float]] | None:
        """Top ``depth`` (id, cosine of the record's best window) for one query vector; None
        when the index's process did not answer in time, went away or failed the query."""
        qvec = qvec.reshape(-1)
        way = self.vector_way()
        if way == EXACT:  # a small store: every window scored, no index
            return self._small.search(qvec, f, depth, self.embedder.model_id)
        if way == BUILD or not self.vectors.ready:  # being built, or its process is opening
            return self._exact_scan(qvec, f, depth)
        model = self.embedder.model_id
        over = depth + 20 if f.is_visibility_only() else depth * 4
        # the outbox is read before the index is asked: a record the writer applies meanwhile
        # is in the index's answer or among these (read after, it could be in neither)
        pending = self.pending() if self.pending is not None else set()
        try:
            hits = self.vectors.query(buckets, model, qvec, over)
        except (StoreUnavailable, VectorIndexError):
            return None
        keep = set(self.store.filter_ids(f, [h[0] for h in hits]))
        kept = [h for h in hits if h[0] in keep]
        everything = len(kept) >= min(depth, len(hits)) and len(hits) < over  # all there is
        if not everything and len(kept) < depth:
            return self._exact_scan(qvec, f, depth)  # a selective filter
        return self._with_pending(qvec, f, self._rescored(qvec, kept), depth, pending)

    def _rescored(self, qvec: np.ndarray, hits: list[tuple[str, float]]):
        """The index's hits scored exactly from their stored vectors (best window), best first,
        ties by record id. The approximate index only proposes candidates: its graph is built
        by each node in its own order, and a hit's score there is its best window *found*, so
        two nodes (or one node before and after a rebuild) would score one record apart."""
        ids = [r for r, _ in hits]
        exact = self._exact(qvec, ids, self._stored.get(ids, self.embedder.model_id))
        return _best_first({r: exact.get(r, s) for r, s in hits})

    def vector_candidates(
        self, qvec: np.ndarray, f: RecordFilter, depth: int, buckets: list[str]
    ) -> list[tuple[str, float]] | None:
        """The vector side alone for one query vector (see :meth:`_vector_candidates`)."""
        return self._vector_candidates(qvec, f, depth, buckets)

    def _exact_scan(self, qvec: np.ndarray, f: RecordFilter, depth: int):
        """Exact cosine over the filtered records' stored vectors (at most EXACT_SCAN_LIMIT)."""
        sims = self._exact(qvec, list_ids(self.store, f, EXACT_SCAN_LIMIT))
        return _best_first(sims)[:depth]

    def _with_pending(self, qvec: np.ndarray, f: RecordFilter, hits, depth: int, pending):
        """The index's hits, with the records that were waiting in the vector outbox when it
        was asked (``pending``) scored exactly from their stored vectors (read-your-writes while
        the background writer catches up; a pending update's exact score replaces its old
        vector's)."""
        if not pending:
            return hits[:depth]
        best = dict(hits)
        best.update(self._exact(qvec, self.store.filter_ids(f, list(pending))))
        return _best_first(best)[:depth]

    def _exact(
        self, qvec: np.ndarray, ids: list[str], stored: dict[str, np.ndarray] | None = None,
        weights: np.ndarray | None = None,
    ) -> dict[str, float]:  # fmt: skip
        """Cosine of ``ids`` (best window) from their stored vectors; with several query
        vectors, the ``weights``-weighted sum of each one's best window (equal weights when
        None). ``stored``: vectors already read (the lexical worker's prefetch), the others are
        read here."""
        stored = stored or {}
        embs = {r: stored[r] for r in ids if r in stored}
        rest = [r for r in ids if r not in embs]
        if rest:
            embs.update(self.store.embeddings(rest, self.embedder.model_id))
        q = qvec.reshape(-1, qvec.shape[-1])
        embs = {r: m for r, m in embs.items() if m.shape[1] == q.shape[1]}  # not a damaged row
        if not embs:
            return {}
        keys = list(embs)
        mats = [embs[r] for r in keys]
        starts = np.cumsum([0] + [len(m) for m in mats[:-1]])
        w = np.full(len(q), 1.0 / len(q)) if weights is None else np.asarray(weights, float)
        with np.errstate(all="ignore"):  # a damaged stored vector (NaN, inf): dropped below
            sims = np.concatenate(mats) @ q.T  # one product for all windows of all records
            sims[~np.isfinite(sims)] = -np.inf  # a damaged window: the record's others count
            best = np.maximum.reduceat(sims, starts, axis=0)  # records x query vectors
            scores = (best @ w).astype(float)
        ok = np.isfinite(scores)  # a damaged stored vector (NaN, inf) scores nothing
        return {k: s for k, s, good in zip(keys, scores.tolist(), ok.tolist(), strict=True) if good}

    def _lexical_side(
        self, fn, query: str, f: RecordFilter, depth: int, model: str | None, terms=None
    ):
        """The lexical worker thread: the FTS5 ranking and, for a hybrid search with score
        completion (``model``), the stored vectors of its top records, read while the main
        thread embeds the query: a lexical-only candidate's cosine is then a matrix product."""
        out = fn(query, f, depth) if terms is None else fn(query, f, depth, terms=terms)
        if model is None:
            return out, None
        top = out[0] if isinstance(out, tuple) else out
        return out, self._stored.get([r for r, _ in top], model)

    def _asks_code_in_prose(self, query: str, vec: list[tuple[str, float]]) -> bool:
        """A question in words whose best vector candidates are mostly code: bm25 then
        measures the vocabulary gap more than relevance (retrieval/ranking/modality.py)."""
        cfg = self.config
        if cfg.code_alpha is None or not modality.is_prose_query(query):
            return False
        top = self.store.get([r for r, _ in vec[: cfg.code_top]])
        return modality.code_share(rec.content for rec in top.values()) >= cfg.code_share

    # ---------------------------------------------------------------- search
    def search(
        self, query: str, f: RecordFilter, k: int, mode: str = "hybrid", buckets=None
    ) -> list[Scored]:
        cfg = self.config
        depth = max(cfg.depth, k)
        use_vec = mode in ("hybrid", "vector") and self.vector_ready()
        use_lex = mode in ("hybrid", "lexical") or not use_vec
        label = mode if (use_vec or mode == "lexical") else "lexical (embedding model not ready)"
        # With score completion the FTS5 pass returns the bm25 of every matching visible record
        # (LexicalIndex.search_all): the vector-only candidates' lexical scores are then dict
        # lookups instead of a second MATCH per id.
        complete = cfg.complete and use_lex and use_vec
        lex_fn = self.lexical.search_all if complete else self.lexical.search
        model = self.embedder.model_id if complete else None
        qv = longquery.QueryViews(None, [query])
        long = cfg.long_queries and longquery.is_long(query)
        if long:

            def probe(terms: list[str]) -> float:
                top = self.lexical.search(" ".join(terms), f, 1, terms=terms) if terms else []
                return top[0][1] if top else 0.0

            qv = guarded("long query views", longquery.views, query, self.lexical.doc_freqs,
                         self.lexical.doc_count(), probe if cfg.probe_windows else None,
                         cfg.long_max_terms, default=qv)  # the query as it is  # fmt: skip
        lex_futures = []
        if use_lex:
            lex_futures.append(self._pool.submit(
                self._lexical_side, lex_fn, query, f, depth, model, qv.lexical))  # fmt: skip
            if qv.salient_terms:
                lex_futures.append(self._pool.submit(
                    self._lexical_side, lex_fn, query, f, depth, None, qv.salient_terms))  # fmt: skip
        vec: list[tuple[str, float]] = []
        qvec, weights, gain = None, None, 0.0
        if use_vec:
            qvec = np.stack([self.embedder.embed_query(t) for t in qv.vector])
            views = []
            for v in qvec:
                got = self._vector_candidates(v, f, depth, buckets)
                if got is None:  # the lexical candidates, their stored vectors scored
                    views, label = [[] for _ in qvec], f"{label} ({NOT_ANSWERING})"
                    break
                views.append(got)
            vec = views[0]
            if len(views) > 1 and views[0] and views[1]:
                gain = views[1][0][1] - views[0][0][1]
        w = longquery.salient_weight(qv.gap, gain) if qv.salient else 0.0
        if len(qv.vector) > 1 and use_vec:
            weights = np.array([1.0 - w * cfg.salient_vector, w * cfg.salient_vector])
            union = list(dict.fromkeys(r for v in views for r, _ in v))
            sims = self._exact(qvec, union, self._stored.get(union, self.embedder.model_id),
                               weights)  # fmt: skip
            vec = _best_first(sims)[:depth]
        results = [fut.result() for fut in lex_futures]
        lex, prefetched, lex_all = ([], None, None) if not results else (*results[0], None)
        if complete and results:
            lex, lex_all = lex
        if len(results) > 1 and w * cfg.salient_terms > 0:
            lex, lex_all = _add_salient(lex, lex_all, results[1][0], w * cfg.salient_terms,
                                        depth, complete)  # fmt: skip
        alpha = cfg.alpha
        if long:  # a report leans on the vector side, a wrapped question less (w)
            alpha = cfg.long_alpha + (cfg.alpha - cfg.long_alpha) * w
        elif use_lex and vec and guarded("code in prose", self._asks_code_in_prose, query, vec,
                                         default=False):  # fmt: skip
            alpha = cfg.code_alpha

        lex_s = dict(lex)
        vec_s = dict(vec)
        ids = list(dict.fromkeys([r for r, _ in lex] + [r for r, _ in vec]))
        if not ids:
            return []
        if cfg.complete and use_lex and use_vec:
            missing_lex = [r for r in ids if r not in lex_s]
            if missing_lex:
                got = (
                    lex_all
                    if lex_all is not None
                    else self.lexical.score_ids(query, missing_lex, terms=qv.lexical)
                )
                if hasattr(got, "resolve"):  # RowidScores: map the ids in one query
                    got.resolve(missing_lex)
                lex_s.update({r: got.get(r, 0.0) for r in missing_lex})
            missing_vec = [r for r in ids if r not in vec_s]
            if missing_vec:
                vec_s.update(self._exact(qvec, missing_vec, prefetched, weights))
        L = np.array([lex_s.get(r, np.nan) for r in ids], dtype=np.float64)
        # completion gives a record without any query term bm25 0.0: a score, but no lexical
        # rank (and no RRF vote); a matching record always scores > 0
        L_ranked = np.where(L > 0, L, np.nan)
        V = np.array([vec_s.get(r, np.nan) for r in ids], dtype=np.float64)
        if use_lex and use_vec:
            if cfg.method == "rrf":
                fused = fusion.rrf(L_ranked, V, k=cfg.rrf_k)
            else:
                norm = fusion.zscore if cfg.norm == "zscore" else fusion.minmax
                fused = fusion.convex(L, V, alpha, norm)
        else:
            fused = np.nan_to_num(V if use_vec else L, nan=0.0)
        lrank, vrank = fusion.ranks(L_ranked), fusion.ranks(V)
        base = fused
        weights = TimeWeights(cfg.window_weight, cfg.event_weight, cfg.when_weight,
                              cfg.recent_weight, cfg.recent_depth, cfg.recent_margin,
                              cfg.stated_times)  # fmt: skip
        prior = TimePrior(self.store, self.lexical, weights, self._stated)
        fused, gains = prior.weigh(query, f, ids, fused)
        if cfg.current_first:
            cols = (base, L, V, lrank, vrank)
            ids, fused, gains, (base, L, V, lrank, vrank) = guarded(
                "current version first", _current_first, self.store, f, ids, fused,
                [dict(g) for g in gains], cols, default=(ids, fused, gains, cols))  # fmt: skip
        order = np.lexsort((np.array(ids), -fused))[:k]  # ties by record id, on every node
        out = []
        for i in order:
            out.append(
                Scored(
                    ids[i],
                    float(fused[i]),
                    Explanation(
                        lexical_rank=None if np.isinf(lrank[i]) else int(lrank[i]),
                        lexical_score=None if np.isnan(L[i]) else round(float(L[i]), 4),
                        vector_rank=None if np.isinf(vrank[i]) else int(vrank[i]),
                        vector_similarity=None if np.isnan(V[i]) else round(float(V[i]), 4),
                        fused_score=round(float(base[i]), 4),
                        boosts=gains[i],
                        mode=label,
                    ),
                )
            )
        return out


def _best_first(scores: dict[str, float]) -> list[tuple[str, float]]:
    """(id, score) pairs, best first; equal scores in record id order (the same on every
    node, whatever order an index returned them in)."""
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


CURRENT_EPS = 1e-4  # how far above the best of its older versions a current record ranks


def _current_first(store, f, ids, fused, gains, cols):
    """Each update chain among the candidates ranks its current record just above its best
    older one. A current record that is not itself a candidate joins just below it (when the
    filter lets it; its own columns are then empty): it never ranks above what the query
    matched."""
    heads, extra = links.current_first(store, f, ids)
    if not heads:
        return ids, fused, gains, cols
    joined = set(extra)
    if extra:
        ids = [*ids, *extra]
        fused = np.concatenate([fused, np.full(len(extra), -np.inf)])
        gains = [*gains, *({} for _ in extra)]
        fills = (0.0, np.nan, np.nan, np.inf, np.inf)
        cols = tuple(
            np.concatenate([c, np.full(len(extra), v)]) for c, v in zip(cols, fills, strict=True)
        )
    at = {r: i for i, r in enumerate(ids)}
    fused = fused.copy()
    for old, current in sorted(heads.items(), key=lambda kv: -fused[at[kv[0]]]):
        i, j = at[old], at[current]
        if current in joined:
            if fused[j] < fused[i] - CURRENT_EPS:
                fused[j] = fused[i] - CURRENT_EPS
                gains[j]["current"] = round(float(fused[j]), 4)  # its older version's score
        elif fused[j] <= fused[i]:
            gains[j]["current"] = round(float(fused[i] + CURRENT_EPS - max(fused[j], 0.0)), 4)
            fused[j] = fused[i] + CURRENT_EPS
    return ids, fused, gains, cols


def _add_salient(lex, lex_all, salient, scale: float, depth: int, complete: bool):
    """The lexical side of a long query with its salient window's terms weighing ``scale``
    more: bm25 is a sum over query terms, so bm25(all terms) + scale * bm25(window's terms)
    is the bm25 of a query repeating the window's terms ``scale`` more times."""
    if complete:
        top_s, all_s = salient
        combined = CombinedScores(lex_all, all_s, scale)
    else:
        top_s = salient
        combined = CombinedScores(dict(lex), dict(top_s), scale)
    ids = list(dict.fromkeys([r for r, _ in lex] + [r for r, _ in top_s]))
    combined.resolve(ids)
    top = sorted(((r, combined.get(r, 0.0)) for r in ids), key=lambda kv: -kv[1])[:depth]
    return top, (combined if complete else None)


class CombinedScores:
    """{id: base[id] + scale * extra[id]} over two score mappings (missing = 0.0), looked up
    lazily (either may be a :class:`retrieval.fulltext.lexical.RowidScores`)."""

    def __init__(self, base, extra, scale: float) -> None:
        self.base, self.extra, self.scale = base, extra, scale

    def resolve(self, ids) -> None:
        for m in (self.base, self.extra):
            if hasattr(m, "resolve"):
                m.resolve(ids)

    def get(self, rid: str, default: float = 0.0) -> float:
        a, b = self.base.get(rid, 0.0), self.extra.get(rid, 0.0)
        return default if not a and not b else a + self.scale * b
