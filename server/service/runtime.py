"""The running service: settings + identity + engine + background model loading.

Built by the MCP lifespan and by the CLI; no module-level state. The SQLite store opens at
once (milliseconds); the embedding model and Chroma load in a background thread, and until
they are ready every search is lexical and says so.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from retrieval.engine import Engine

from .config import Settings
from .identity import Identity, identity_from_env
from .memory import MemoryService
from .policy import WritePolicy


@dataclass
class Runtime:
    settings: Settings
    identity: Identity
    service: MemoryService
    model_error: str | None = None
    model_ready: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @classmethod
    def start(
        cls,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        *,
        background: bool = True,
    ) -> Runtime:
        settings = Settings.from_env(env, cwd)
        identity = identity_from_env(env, settings.cwd)
        engine = Engine(
            settings.home, chroma_host=settings.chroma_host, chroma_port=settings.chroma_port
        )
        rt = cls(
            settings,
            identity,
            MemoryService(engine, policy=WritePolicy.from_env(env)),
        )
        if background:
            rt._thread = threading.Thread(target=rt._load_model, name="model-loader", daemon=True)
            rt._thread.start()
        else:
            rt._load_model()
        return rt

    @property
    def engine(self) -> Engine:
        return self.service.engine

    def _load_model(self) -> None:
        try:
            embedder = self.settings.make_embedder()
            if embedder is not None:
                self.engine.set_embedder(embedder)
        except Exception as exc:  # reported by pattern_health; search stays lexical
            self.model_error = f"{type(exc).__name__}: {exc}"
        finally:
            self.model_ready.set()

    def wait_ready(self, timeout: float | None = None) -> bool:
        return self.model_ready.wait(timeout)

    def close(self) -> None:
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.engine.close()
