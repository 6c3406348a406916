"""Settings from the environment (every variable is documented in docs/configuration.md)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel

from server.service.core import envsettings
from server.service.core.envsettings import store_url  # noqa: F401 - re-exported
from server.service.core.identity import project_root


def default_home() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir("pattern-memory", appauthor=False))


class Settings(BaseModel):
    home: Path
    embedder: str = "sentence-transformers"  # sentence-transformers | hash | none
    embedding_model: str | None = None  # a local path or cached model name; None = packaged MiniLM
    chroma_host: str | None = None
    chroma_port: int = 8000
    store_url: str | None = None  # PATTERN_STORE_URL: PostgreSQL is canonical (many daemons)
    vector_process: bool = True  # PATTERN_VECTOR_PROCESS: Chroma in a child process
    vector_writes: str = "background"  # PATTERN_VECTOR_WRITES: background | inline
    vector_index_from: int = (
        4000  # PATTERN_VECTOR_INDEX_FROM: windows from which a store is indexed
    )
    vector_across_from: int = 16  # PATTERN_VECTOR_ACROSS_FROM: buckets from which one collection
    # holds them all (retrieval/vector/across.py)
    allowed_dirs: list[Path]
    allowed_dirs_set: bool = False  # PATTERN_ALLOWED_DIRS given: the same for every caller
    cwd: Path
    team_review: str = ""  # PATTERN_TEAM_REVIEW: on | off | project ids (service/review.py)
    auto_lessons: str = envsettings.AUTO_LESSONS_DEFAULT  # PATTERN_AUTO_LESSONS: off | review | on
    update_judge: str = "off"  # PATTERN_UPDATE_JUDGE: off | sampling (docs/time.md)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Settings:
        env = os.environ if env is None else env
        cwd = (cwd or Path.cwd()).resolve()
        home = Path(env.get("PATTERN_HOME") or default_home()).expanduser()
        embedder = envsettings.embedder(env)
        allowed_raw = env.get("PATTERN_ALLOWED_DIRS", "").strip()
        allowed = (
            [Path(p).expanduser() for p in allowed_raw.split(os.pathsep) if p.strip()]
            if allowed_raw
            else [project_root(cwd), home / "exports"]
        )
        writes = envsettings.vector_writes(env)
        process = envsettings.vector_process(env)
        port = envsettings.chroma_port(env)
        envsettings.pg_poll_seconds(env)  # checked here, read by the replica
        return cls(
            home=home,
            embedder=embedder,
            embedding_model=env.get("PATTERN_EMBEDDING_MODEL") or None,
            chroma_host=env.get("PATTERN_CHROMA_HOST") or None,
            chroma_port=port,
            store_url=envsettings.store_url(env),
            vector_process=process,
            vector_writes=writes,
            vector_index_from=envsettings.vector_index_from(env),
            vector_across_from=envsettings.vector_across_from(env),
            allowed_dirs=allowed,
            allowed_dirs_set=bool(allowed_raw),
            cwd=cwd,
            team_review=env.get("PATTERN_TEAM_REVIEW", "").strip(),
            auto_lessons=envsettings.auto_lessons(env),
            update_judge=envsettings.update_judge(env),
        )

    def allowed_for(self, who) -> list[Path]:
        """The directories ``who`` may export to, import from, ingest and cite:
        ``PATTERN_ALLOWED_DIRS`` when set, else the caller's project root (a bridged client's,
        not the daemon's) and the store's exports folder; a caller without a root (a remote
        agent) gets the exports folder only."""
        if self.allowed_dirs_set:
            return list(self.allowed_dirs)
        root = getattr(who, "root", None)
        return [Path(root), self.home / "exports"] if root else [self.home / "exports"]

    def base_for(self, who) -> Path:
        """Where ``who``'s relative paths start: its project root, else this process's cwd."""
        root = getattr(who, "root", None)
        return Path(root) if root else self.cwd

    def make_embedder(self):
        """The configured embedder, loaded (this is the slow part of start-up)."""
        from retrieval.embedding.embedder import HashEmbedder, SentenceTransformerEmbedder

        if self.embedder == "none":
            return None
        if self.embedder == "hash":
            return HashEmbedder()
        return SentenceTransformerEmbedder(self.embedding_model).load()

    def model_status(self) -> str:
        """The one line a command prints while the model loads: prepared (a custom model's
        one-time ONNX export, in a child process, or the packaged model's int8 variant) or only
        loaded (the packaged graph)."""
        if self.embedder == "sentence-transformers":
            from retrieval.embedding.embedder import SentenceTransformerEmbedder

            try:
                pending = SentenceTransformerEmbedder(self.embedding_model).export_pending
            except ValueError:  # a bad backend setting: the load itself reports it
                pending = False
            if pending and self.embedding_model is None:
                return "preparing the embedding model (one-time int8 quantization) …"
            if pending:
                return "preparing the embedding model (one-time ONNX export, about a minute) …"
        return "loading the embedding model …"
