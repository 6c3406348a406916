"""Shared fixtures: real SQLite and real Chroma in ``tmp_path``; a deterministic hashing
embedder for unit tests; the packaged all-MiniLM-L6-v2 (loaded once per session, offline) for
anything about relevance."""

from __future__ import annotations

import os

# Before anything imports chromadb / huggingface: never reach the network, never phone home.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["ANONYMIZED_TELEMETRY"] = "False"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import itertools  # noqa: E402
from collections.abc import Callable  # noqa: E402
from datetime import UTC, datetime, timedelta  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from retrieval.embedder import HashEmbedder  # noqa: E402
from retrieval.engine import Engine  # noqa: E402
from retrieval.records import Record  # noqa: E402

PROJECT = "proj"
AGENT = "agent"
T0 = datetime(2024, 1, 1, tzinfo=UTC)


class CountingEmbedder:
    """Wraps an embedder and counts what it is asked to embed."""

    def __init__(self, inner=None) -> None:
        self.inner = inner or HashEmbedder()
        self.model_id = self.inner.model_id
        self.dimension = self.inner.dimension
        self.document_calls = 0
        self.documents = 0
        self.texts: list[str] = []  # every document text asked for, in order
        self.query_calls = 0

    def embed_query(self, text: str) -> np.ndarray:
        self.query_calls += 1
        return self.inner.embed_query(text)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        self.document_calls += 1
        self.documents += len(texts)
        self.texts.extend(texts)
        return self.inner.embed_documents(texts)

    def reset(self) -> None:
        self.document_calls = self.documents = self.query_calls = 0
        self.texts = []


@pytest.fixture
def open_engine(tmp_path) -> Callable[..., Engine]:
    """Factory: ``open_engine(embedder=..., path=..., **kw)``; every engine is closed at teardown.
    All engines of one test share ``tmp_path / "store"`` unless told otherwise, so a test can
    close one and reopen the same folder."""
    opened: list[Engine] = []

    def _open(embedder=None, path=None, **kw) -> Engine:
        eng = Engine(path or tmp_path / "store", embedder, **kw)
        opened.append(eng)
        return eng

    yield _open
    for eng in opened:
        eng.close()


@pytest.fixture
def engine(open_engine) -> Engine:
    """An engine over a fresh store with the deterministic hashing embedder."""
    return open_engine(HashEmbedder())


@pytest.fixture
def make_record() -> Callable[..., Record]:
    """Factory for records with sensible defaults; ``tags=`` and ``priority=`` go to metadata."""
    counter = itertools.count()

    def _make(content: str | None = None, *, tags=None, priority=None, **kw) -> Record:
        n = next(counter)
        metadata = dict(kw.pop("metadata", {}) or {})
        if tags is not None:
            metadata["tags"] = list(tags)
        if priority is not None:
            metadata["priority"] = priority
        kw.setdefault("project_id", PROJECT)
        kw.setdefault("agent_id", AGENT)
        kw.setdefault("created_at", T0 + timedelta(minutes=n))
        kw.setdefault("updated_at", kw["created_at"])
        return Record(
            content=content if content is not None else f"note number {n}", metadata=metadata, **kw
        )

    return _make


@pytest.fixture
def counting_embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture(scope="session")
def real_embedder():
    """The packaged all-MiniLM-L6-v2, loaded once for the whole session (offline)."""
    from retrieval.embedder import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder().load()
