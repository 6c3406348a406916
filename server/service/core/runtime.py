"""The running service: settings + identity + engine + background model loading.

Built by the MCP lifespan and by the CLI; no module-level state. The SQLite store opens at
once (milliseconds); the embedding model and Chroma load in a background thread, and until
they are ready every search is lexical and says so. A command that may not need the model at
all (``ingest`` of an unchanged tree, ``compact-changes``) starts with ``model="on_demand"``
or ``"off"``: the model then loads on the first :meth:`Runtime.wait_ready`, or never.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from retrieval.engine import Engine
from server.service.core.bearer_tokens import TokenStore
from server.service.core.config import Settings
from server.service.core.identity import Identity, identity_from_env
from server.service.graphs.graph_services import GraphServices, graph_services
from server.service.learning.lesson_scrub import scrub_at_start
from server.service.memories.memory import MemoryService
from server.service.recalling.citations import CitationService
from server.service.trust.policy import WritePolicy

ModelLoad = Literal["background", "now", "on_demand", "off"]


@dataclass
class Runtime:
    settings: Settings
    identity: Identity
    service: MemoryService
    graphs: GraphServices | None = None  # built from the service when not given
    model_error: str | None = None
    model_ready: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _load_lock: threading.Lock = field(default_factory=threading.Lock)
    _on_demand: bool = False
    # a server starts the vector index's process once it serves (start_vectors)
    _defer_vectors: bool = False
    _vectors_go: bool = False
    _vectors_lock: threading.Lock = field(default_factory=threading.Lock)
    _tokens: TokenStore | None = None

    def __post_init__(self) -> None:
        if self.service.citations is None:  # one per service (runtimes may share a service)
            self.service.citations = CitationService(
                self.service.store, self.settings, self.service.engine.home,
                clock=self.service.clock, policy=self.service.policy,
            )  # fmt: skip
        if self.graphs is None:
            self.graphs = graph_services(self.service)
        scrub_at_start(self.service, self.graphs)  # once per store (lesson_scrub)

    @property
    def tokens(self) -> TokenStore:
        """The store's bearer tokens: ``tokens.json`` in its folder, or the cluster's table
        when PostgreSQL is the store (one per runtime, so its short cache is shared)."""
        if self._tokens is None:
            self._tokens = TokenStore(self.settings.home, self.settings.store_url)
        return self._tokens

    @property
    def citations(self) -> CitationService:
        return self.service.citations

    @classmethod
    def start(
        cls,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        *,
        background: bool = True,
        model: ModelLoad | None = None,
        defer_vectors: bool = False,
    ) -> Runtime:
        """Open the store; load the model per ``model``: in a ``background`` thread (the
        default; ``background=False`` means ``now``), ``now``, ``on_demand`` (at the first
        :meth:`wait_ready`) or ``off`` (lexical only, the model never loads).
        ``defer_vectors``: the vector index's process starts at :meth:`start_vectors` (the
        daemon calls it once it serves; until then searches score stored vectors exactly)."""
        model = model or ("background" if background else "now")
        settings = Settings.from_env(env, cwd)
        identity = identity_from_env(env, settings.cwd)
        engine = Engine(
            settings.home,
            chroma_host=settings.chroma_host,
            chroma_port=settings.chroma_port,
            store_url=settings.store_url,
            vector_process=settings.vector_process,
            background_vectors=settings.vector_writes == "background",
            index_from=settings.vector_index_from,
            across_from=settings.vector_across_from,
        )
        service = MemoryService(engine, policy=WritePolicy.from_env(env))
        rt = cls(settings, identity, service)
        rt._defer_vectors = defer_vectors
        if model == "background":
            rt._thread = threading.Thread(target=rt._load_model, name="model-loader", daemon=True)
            rt._thread.start()
        elif model == "now":
            rt._load_model()
        elif model == "on_demand":
            rt._on_demand = True
        else:
            rt.model_ready.set()  # off: lexical only, nothing to wait for
        return rt

    @property
    def engine(self) -> Engine:
        return self.service.engine

    def _load_model(self) -> None:
        with self._load_lock:  # on demand, two callers may ask at once: load once
            if self.model_ready.is_set():
                return
            try:
                embedder = self._make_embedder_beside_vectors()
                if embedder is not None:
                    self.engine.set_embedder(embedder)
            except Exception as exc:  # reported by pattern_health; search stays lexical
                self.model_error = f"{type(exc).__name__}: {exc}"
            finally:
                self.model_ready.set()

    def _make_embedder_beside_vectors(self):
        """The embedder, while another thread opens the vector index: building the ONNX
        session releases the GIL, importing chromadb holds it, so the two overlap (~0.4 s of
        the first vector query's wait, docs/benchmarks.md, "lean serving")."""
        if self.settings.embedder == "none":
            return None
        failed: list[BaseException] = []

        def open_vectors() -> None:
            try:
                with self._vectors_lock:
                    self.engine.open_vectors(start=not self._defer_vectors or self._vectors_go)
            except BaseException as exc:  # re-raised below, in the loader thread
                failed.append(exc)

        opener = threading.Thread(target=open_vectors, name="vector-index-opener", daemon=True)
        opener.start()
        try:
            return self.settings.make_embedder()
        finally:
            opener.join()
            if failed:
                raise failed[0]

    def start_vectors(self) -> None:
        """Start the vector index's process if it was deferred (now, or as soon as the model
        loader opens the index)."""
        with self._vectors_lock:
            self._vectors_go = True
            self.engine.start_vectors()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait for the model (loading it now when it loads on demand)."""
        if self._on_demand and not self.model_ready.is_set():
            self._load_model()
        return self.model_ready.wait(timeout)

    def close(self) -> None:
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self.service.citations is not None:
            self.service.citations.close()  # background re-checks finish first
        self.engine.close()
