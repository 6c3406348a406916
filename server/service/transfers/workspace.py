"""Workspace ingestion as a service call: the CLI ``ingest`` and the MCP tool ``ingest_workspace``
share it. The path must lie inside the allowed directories (``PATTERN_ALLOWED_DIRS``, by
default the project root and the exports folder); chunks go to the team scope of the caller's
project (the MCP tool takes the project from the caller's identity, never from an argument).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from ingest.workspace.pipeline import IngestOptions, Ingestor, IngestReport, Progress
from ingest.workspace.walker import DEFAULT_MAX_FILE_KB
from retrieval.engine import Engine
from server.service.core.errors import AccessDenied, InvalidInput
from server.service.core.identity import Identity
from server.service.core.runtime import Runtime


def check_root(path: str | Path, allowed: Sequence[Path], cwd: Path | None = None) -> Path:
    """The resolved folder to ingest; refuses anything outside the allowed directories."""
    p = Path(path).expanduser()
    if not p.is_absolute():
        p = (cwd or Path.cwd()) / p
    resolved = p.resolve()
    roots = [Path(a).expanduser().resolve() for a in allowed]
    if not any(resolved == r or resolved.is_relative_to(r) for r in roots):
        raise AccessDenied(
            f"cannot ingest {resolved}: it is outside the allowed directories "
            f"({', '.join(map(str, roots)) or 'none'}); set PATTERN_ALLOWED_DIRS to allow it",
            path=str(resolved),
            allowed=[str(r) for r in roots],
        )
    if not resolved.is_dir():
        raise InvalidInput(f"not a directory: {resolved}", path=str(resolved))
    return resolved


def make_ingestor(
    engine: Engine,
    who: Identity,
    max_file_kb: int | None = None,
    ready: Callable[[], object] | None = None,
    on_change: Callable[[list[str]], object] | None = None,
) -> Ingestor:
    """An ingestor writing to ``who``'s project; ``ready`` waits for (or loads) the model and
    is only called when something needs embedding, so an unchanged tree never loads it;
    ``on_change`` hears the files each committed batch changed or removed."""
    kb = max_file_kb or DEFAULT_MAX_FILE_KB
    if kb < 1:
        raise InvalidInput("max file size must be at least 1 KB")
    return Ingestor(
        engine, who.project_id, who.agent_id, IngestOptions(max_file_bytes=kb * 1024),
        ready=ready, on_change=on_change,
    )  # fmt: skip


def _citation_hook(rt: Runtime) -> Callable[[list[str]], object] | None:
    """Files an ingest saw change: their citations are re-checked in the background."""
    return rt.citations.refresh_later if rt.citations is not None else None


def ingest_workspace(
    rt: Runtime,
    who: Identity,
    path: str | Path,
    *,
    allowed: Sequence[Path] | None = None,
    max_file_kb: int | None = None,
    progress: Callable[[Progress], None] | None = None,
    stop: threading.Event | None = None,
) -> IngestReport:
    root = check_root(
        path, rt.settings.allowed_for(who) if allowed is None else allowed,
        rt.settings.base_for(who),
    )  # fmt: skip
    ingestor = make_ingestor(rt.engine, who, max_file_kb, rt.wait_ready, _citation_hook(rt))
    return ingestor.run(root, progress, stop)


def watch_workspace(
    rt: Runtime,
    who: Identity,
    path: str | Path,
    on_report: Callable[[IngestReport], None],
    *,
    allowed: Sequence[Path] | None = None,
    max_file_kb: int | None = None,
    progress: Callable[[Progress], None] | None = None,
    stop: threading.Event | None = None,
) -> None:
    """``ingest --watch``: ingest ``path``, then keep its chunks current as files change, until
    ``stop`` is set or the process is interrupted."""
    from ingest.workspace.watch import watch

    root = check_root(
        path, rt.settings.allowed_for(who) if allowed is None else allowed,
        rt.settings.base_for(who),
    )  # fmt: skip
    ingestor = make_ingestor(rt.engine, who, max_file_kb, rt.wait_ready, _citation_hook(rt))
    watch(ingestor, root, on_report, progress=progress, stop=stop)
