"""An embedder wrapper that caches vectors on disk (benchmarks only).

Key = sha256(model id, "query"/"doc", text); the vectors live in one SQLite file per model and
graph file in ``.bench-cache/`` (gitignored), so re-running a benchmark re-embeds nothing it
has seen, and a changed graph (same model id, other weights) starts a cache of its own.
The wrapped embedder is only loaded when a text is missing (or ``max_words`` is asked for).
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from pathlib import Path

import numpy as np

DEFAULT_CACHE = Path(__file__).resolve().parents[2] / ".bench-cache"


def variant(inner) -> str:
    """What decides the vectors beside the model id: for the ONNX backend of a local model
    folder, the graph file it serves (``-`` and the first 12 hex digits of its sha256); empty
    for anything else (a torch model is its weights, named by the model id)."""
    path = getattr(inner, "model_path", None)
    if getattr(inner, "backend", None) == "torch" or not path:
        return ""
    from retrieval.embedding import onnx_model

    try:
        graph = onnx_model.graph_path(path, getattr(inner, "quantize", None))
        digest = hashlib.sha256()
        with open(graph, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return ""
    return "-" + digest.hexdigest()[:12]


class CachingEmbedder:
    def __init__(self, inner, cache_dir: str | Path = DEFAULT_CACHE) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        cache_dir = Path(cache_dir)
        cache_dir.mkdir(parents=True, exist_ok=True)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.model_id)
        safe += variant(inner)
        self._db = sqlite3.connect(
            str(cache_dir / f"embeddings-{safe}.sqlite3"), check_same_thread=False
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS vec(key TEXT PRIMARY KEY, v BLOB NOT NULL)")
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def _key(self, kind: str, text: str) -> str:
        return hashlib.sha256(f"{self.model_id}\x00{kind}\x00{text}".encode()).hexdigest()

    def _lookup(self, keys: list[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for i in range(0, len(keys), 500):
                part = keys[i : i + 500]
                rows = self._db.execute(
                    f"SELECT key, v FROM vec WHERE key IN ({','.join('?' * len(part))})", part
                ).fetchall()
                found.update((k, np.frombuffer(v, dtype=np.float32)) for k, v in rows)
        return found

    def _embed(self, kind: str, texts: list[str]) -> np.ndarray:
        keys = [self._key(kind, t) for t in texts]
        found = self._lookup(list(dict.fromkeys(keys)))
        todo = list(dict.fromkeys(k for k in keys if k not in found))
        if todo:
            first = {}
            for k, t in zip(keys, texts, strict=True):
                first.setdefault(k, t)
            batch = [first[k] for k in todo]
            if kind == "query":
                mat = np.stack([self.inner.embed_query(t) for t in batch])
            else:
                mat = self.inner.embed_documents(batch)
            mat = np.asarray(mat, dtype=np.float32)
            with self._lock:
                self._db.executemany(
                    "INSERT OR REPLACE INTO vec(key, v) VALUES (?, ?)",
                    [(k, v.tobytes()) for k, v in zip(todo, mat, strict=True)],
                )
                self._db.commit()
            found.update(zip(todo, mat, strict=True))
            self.dimension = mat.shape[1]
        self.hits += len(keys) - len(todo)
        self.misses += len(todo)
        if not keys:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([found[k] for k in keys])

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed("query", [text])[0]

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self._embed("doc", list(texts))

    @property
    def max_words(self) -> int:
        return int(getattr(self.inner, "max_words", 150))

    def close(self) -> None:
        with self._lock:
            self._db.close()


def make_embedder(cache: bool = True):
    from retrieval.embedding.embedder import SentenceTransformerEmbedder

    emb = SentenceTransformerEmbedder()
    if cache:
        emb = CachingEmbedder(emb)
    return emb
