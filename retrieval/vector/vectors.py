"""The Chroma vector index: derived from SQLite, one collection per (bucket, embedding model).

A recall queries only the collections of the buckets its caller may see, so Chroma never
evaluates a visibility filter (measured: 2-3 ms unfiltered vs 180 ms with an ``$or`` filter at
100k vectors). Long records are embedded as several windows (ids ``<record>#<n>``); a record's
similarity is the best of its windows.
A store of many buckets also keeps every vector in one collection across them, for a search
that may see them all (:mod:`retrieval.vector.across`); here it is one more bucket.

Errors: only Chroma's "collection not found" is taken to mean "nothing there" (a read finds
nothing, a delete has nothing to do, an upsert recreates the collection). Every other error
propagates, so the outbox row that asked for the change stays and is applied again later
(:mod:`retrieval.vector.vector_sync`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from retrieval.errors import StoreUnavailable
from retrieval.vector.across import ACROSS

_WORDS = re.compile(r"\S+")


def words_of(text: str) -> list[str]:
    """The whitespace-separated words that windows are counted in."""
    return _WORDS.findall(text)


def windows(text: str, max_words: int, overlap: int = 0) -> list[str]:
    """Split ``text`` into word windows of at most ``max_words`` (the model truncates beyond
    its sequence length, so a long memory would otherwise be judged by its start only)."""
    words = words_of(text)
    if len(words) <= max_words:
        return [text]
    return [" ".join(words[a:b]) for a, b in window_spans(len(words), max_words, overlap)]


def window_spans(n: int, max_words: int, overlap: int = 0) -> list[tuple[int, int]]:
    """The word ranges ``[start, end)`` of :func:`windows` over a text of ``n`` words."""
    if n <= max_words:
        return [(0, n)]
    # an overlap >= max_words would leave no window at all, or drop the tail
    overlap = max(0, min(overlap, max_words - 1))
    step = max(1, max_words - overlap)
    return [(i, min(n, i + max_words)) for i in range(0, n - overlap, step)]


@dataclass(frozen=True)
class VectorItem:
    record_id: str
    window: int
    vector: np.ndarray
    metadata: dict = field(default_factory=dict)  # beside record_id (the store adds none)

    @property
    def vector_id(self) -> str:
        return self.record_id if self.window == 0 else f"{self.record_id}#{self.window}"


def collection_name(bucket: str, model_id: str) -> str:
    digest = hashlib.sha1(f"{bucket}|{model_id}".encode()).hexdigest()[:32]
    return f"pm-{digest}"


# HNSW settings of new collections. ef_search 200: Chroma's default of 100 lost candidates
# against an exact scan on SciFact's ~35k windows (vector nDCG@10 0.702 vs 0.706 exact); a wider
# search costs little next to Chroma's fixed ~2.5 ms per query. ef_construction 100 (Chroma's
# default): inserts into a collection of 140k vectors run at 1,529/s against 1,050/s with 200,
# for a vector nDCG@10 of 0.7040 against 0.7050 on SciFact and the same hybrid ranking
# (benchmarks/hnsw_build.py; docs/scale.md, "The vector index").
HNSW = {"space": "cosine", "ef_construction": 100, "ef_search": 200}

# upper bound of the windows one collection query asks for (see _query_one); the collection
# across buckets stands for 16 or more buckets' collections, each of which had this bound
MAX_WINDOWS_ASKED = 2000
MAX_WINDOWS_ASKED_ACROSS = 16 * MAX_WINDOWS_ASKED


def _not_found(exc: BaseException) -> bool:
    """Chroma's "collection does not exist" (and nothing else)."""
    from chromadb.errors import NotFoundError

    return isinstance(exc, NotFoundError)


class VectorIndex:
    """Embedded ``PersistentClient`` by default; ``HttpClient`` when a Chroma host is given.
    :class:`~retrieval.vector.vector_process.VectorProcess` serves the same API from a child process,
    the only process that opens a store's folder with it: the process that opens a folder here
    writes bytes of its own memory into the HNSW files (:mod:`retrieval.vector.vector_spawner`)."""

    ready = True  # open once constructed (a VectorProcess may still be opening its store)
    error: str | None = None  # why the index cannot be used (a VectorProcess's child failed)

    def start(self) -> None:
        """Nothing to start in this process (a VectorProcess may start its child later)."""

    def wait_ready(self, timeout: float | None = None) -> bool:
        return True

    def query_deadline(self, seconds: float) -> contextlib.AbstractContextManager:
        """Calls in this process take what they take (a VectorProcess bounds its calls)."""
        return contextlib.nullcontext()

    def __init__(self, path: str | None = None, *, host: str | None = None, port: int = 8000):
        os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
        import chromadb
        from chromadb.config import Settings

        settings = Settings(anonymized_telemetry=False, allow_reset=True)
        try:
            if host:
                self.client = chromadb.HttpClient(host=host, port=port, settings=settings)
            else:
                if path is None:
                    raise ValueError("a path or a host is required")
                self.client = chromadb.PersistentClient(path=path, settings=settings)
        except Exception as exc:  # chromadb raises many kinds
            raise StoreUnavailable(
                f"cannot open the vector index: {exc}", path=path, host=host
            ) from exc
        self._collections: dict[tuple[str, str], object] = {}
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="chroma-q")

    def _collection(self, bucket: str, model_id: str, create: bool = True):
        key = (bucket, model_id)
        col = self._collections.get(key)
        if col is None:
            name = collection_name(bucket, model_id)
            if create:
                col = self.client.get_or_create_collection(
                    name=name,
                    configuration={"hnsw": HNSW},
                    metadata={"bucket": bucket, "model_id": model_id},
                    embedding_function=None,
                )
            else:
                try:
                    col = self.client.get_collection(name=name, embedding_function=None)
                except Exception as exc:
                    if _not_found(exc):
                        return None
                    raise  # Chroma is failing: the caller must not take it for "empty"
            self._collections[key] = col
        return col

    def _forget(self, bucket: str, model_id: str) -> None:
        """Drop a cached handle whose collection was deleted underneath (another process's
        reindex): the next call looks it up again."""
        self._collections.pop((bucket, model_id), None)

    def upsert(self, bucket: str, model_id: str, items: Sequence[VectorItem]) -> None:
        if not items:
            return
        for attempt in (1, 2):
            col = self._collection(bucket, model_id)
            try:
                for i in range(0, len(items), 4000):
                    part = items[i : i + 4000]
                    col.upsert(
                        ids=[it.vector_id for it in part],
                        embeddings=np.stack([it.vector for it in part]).astype(np.float32),
                        metadatas=[{**it.metadata, "record_id": it.record_id} for it in part],
                    )
                return
            except Exception as exc:
                if attempt == 2 or not _not_found(exc):
                    raise
                self._forget(bucket, model_id)  # recreated on the second attempt

    def delete(self, bucket: str, model_id: str, record_ids: Sequence[str]) -> None:
        """Delete every window of these records from the bucket's collection. Only a missing
        collection counts as done; any other Chroma error propagates."""
        col = self._collection(bucket, model_id, create=False)
        if col is None or not record_ids:
            return
        try:
            for i in range(0, len(record_ids), 1000):
                col.delete(where={"record_id": {"$in": list(record_ids[i : i + 1000])}})
        except Exception as exc:
            if not _not_found(exc):
                raise
            self._forget(bucket, model_id)  # the collection is gone: nothing left to delete

    def delete_ids(self, bucket: str, model_id: str, vector_ids: Sequence[str]) -> None:
        """Delete vectors by their ids (window ids included)."""
        col = self._collection(bucket, model_id, create=False)
        if col is None or not vector_ids:
            return
        for i in range(0, len(vector_ids), 1000):
            col.delete(ids=list(vector_ids[i : i + 1000]))

    def buckets(self, model_id: str) -> list[str]:
        """The buckets that have a collection for this model."""
        out = []
        for col in self.client.list_collections():
            meta = getattr(col, "metadata", None) or {}
            if meta.get("model_id") == model_id and "bucket" in meta:
                out.append(meta["bucket"])
        return sorted(out)

    def ids(self, bucket: str, model_id: str, page: int = 10_000) -> list[str]:
        """Every vector id in the bucket's collection (no vectors read)."""
        col = self._collection(bucket, model_id, create=False)
        if col is None:
            return []
        out: list[str] = []
        while True:
            got = col.get(include=[], limit=page, offset=len(out))["ids"]
            out.extend(got)
            if len(got) < page:
                return out

    def _query_one(self, bucket: str, model_id: str, qvec: np.ndarray, n: int):
        """Window hits (record id, cosine) holding at least ``n`` distinct records when the
        collection has them."""
        col = self._collection(bucket, model_id, create=False)
        if col is None:
            return []
        asked = n
        cap = MAX_WINDOWS_ASKED_ACROSS if bucket == ACROSS else MAX_WINDOWS_ASKED
        while True:
            # No count() round trip (2-3 ms each): Chroma returns fewer hits when the collection
            # is smaller than asked, and none when it is empty. Only distances are fetched: the
            # record id is the vector id without its "#<window>" suffix (no metadata read).
            res = col.query(
                query_embeddings=qvec[None, :].astype(np.float32),
                n_results=asked,
                include=["distances"],
            )
            hits = [
                (vid.split("#", 1)[0], 1.0 - float(d))
                for vid, d in zip(res["ids"][0], res["distances"][0], strict=True)
            ]
            distinct = len({rid for rid, _ in hits})
            if len(hits) < asked or distinct >= n or asked >= cap:
                return hits
            # the windows asked for held fewer than n records (long records have several
            # windows): ask again for enough windows at the density just seen
            asked = min(cap, int(asked * n / max(1, distinct) * 1.5) + 1)

    def query(
        self,
        buckets: Iterable[str],
        model_id: str,
        qvec: np.ndarray,
        n: int,
    ) -> list[tuple[str, float]]:
        """Best ``n`` (record id, cosine similarity) over the given buckets, best window per record."""
        buckets = list(buckets)
        if len(buckets) == 1:
            results = [self._query_one(buckets[0], model_id, qvec, n)]
        else:
            results = list(self._pool.map(lambda b: self._query_one(b, model_id, qvec, n), buckets))
        best: dict[str, float] = {}
        for part in results:
            for rid, sim in part:
                if sim > best.get(rid, -2.0):
                    best[rid] = sim
        return sorted(best.items(), key=lambda kv: -kv[1])[:n]

    def count(self, bucket: str, model_id: str) -> int:
        col = self._collection(bucket, model_id, create=False)
        return 0 if col is None else col.count()

    def drop_model(self, model_id: str) -> None:
        for col in self.client.list_collections():
            meta = getattr(col, "metadata", None) or {}
            if meta.get("model_id") == model_id:
                self.client.delete_collection(col.name)
        self._collections = {k: v for k, v in self._collections.items() if k[1] != model_id}

    def close(self) -> None:
        self._pool.shutdown(wait=False)
