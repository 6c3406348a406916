"""The MCP tool ``ingest_workspace``: a thin adapter over :mod:`server.service.transfers.workspace`.

Progress goes to the client as MCP progress notifications (``ctx.report_progress``: files done
of files seen, with chunk count and rate as the message), at most twice a second. A cancelled
request stops the run after the batch in flight; what was committed stays and the next call
resumes.
"""

from __future__ import annotations

import threading
import time
from typing import Annotated

import anyio
import anyio.from_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from ingest.workspace.pipeline import IngestReport, Progress
from server.service.core.errors import PatternError
from server.service.transfers import workspace

from .toolset import ToolSet, session_of, tool_error

tools = ToolSet()

MAX_LISTED_SKIPS = 100


@tools("ingest_workspace")
async def ingest_workspace(
    ctx: Context,
    path: Annotated[
        str | None,
        Field(
            description="Folder to index (inside the allowed directories). Default: the project root."
        ),
    ] = None,
    maxFileKb: Annotated[
        int | None,
        Field(ge=1, le=1_000_000, description="Skip files larger than this (default 512 KB)."),
    ] = None,
) -> IngestReport:
    """Index a folder's files so `recall` finds them: respects .gitignore/.patternignore,
    skips binaries, lock files, build output and large files; chunks by file type
    (Markdown sections, Python definitions, code blocks, paragraphs). Incremental: only
    new or changed files are embedded, vanished files are dropped. Chunks are shared with
    your project (team scope) and recalled as `path:start-end`."""
    rt, who = session_of(ctx)
    target = path or who.root
    if target is None:
        raise ToolError("[invalid_input] give a path: a remote agent has no project folder here")
    stop = threading.Event()
    last = [0.0]

    def progress(p: Progress) -> None:
        now = time.monotonic()
        if p.phase != "done" and now - last[0] < 0.5:
            return
        last[0] = now
        message = f"{p.files_done}/{p.files_total} files, {p.chunks} chunks, {p.rate:.1f} chunks/s"
        try:
            anyio.from_thread.run(ctx.report_progress, p.files_done, p.files_total, message)
        except Exception:  # a client that went away must not break the run
            pass

    def run() -> IngestReport:
        report = workspace.ingest_workspace(
            rt, who, target, max_file_kb=maxFileKb, progress=progress, stop=stop
        )
        if len(report.skipped) > MAX_LISTED_SKIPS:
            report.skipped = report.skipped[:MAX_LISTED_SKIPS]
        return report

    try:  # abandon_on_cancel: a cancelled request returns at once; ``stop`` ends the run
        return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        stop.set()
        raise
    except PatternError as exc:
        raise tool_error(exc) from exc
