"""Maintenance tools: cleanup, export/import of memories, and ``pattern_health``."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import Field

from server.service.core import maintenance
from server.service.core.models import CleanupResult, ExportResult, HealthResult, ImportResult
from server.service.transfers import transfer

from .toolset import ScopeArg, ToolSet, call, session_of

tools = ToolSet()


@tools("cleanup")
async def cleanup(
    ctx: Context,
    expireOnly: Annotated[
        bool, Field(description="Only delete expired memories; skip limit enforcement.")
    ] = False,
) -> CleanupResult:
    """Maintenance: delete your expired (24 h) memories and trim recent/tasks to their limits."""
    rt, who = session_of(ctx)
    return await call(lambda: maintenance.cleanup(rt.service, who, expireOnly))


@tools("export-memories")
async def export_memories(
    ctx: Context,
    outputPath: Annotated[
        str | None,
        Field(
            description="File to write (inside the allowed directories); default memories-backup-TIMESTAMP.json."
        ),
    ] = None,
    scope: ScopeArg | None = None,
    category: str | None = None,
    since: datetime | None = None,
    includeExpired: bool = False,
    force: Annotated[
        bool,
        Field(
            description="Replace a file already at outputPath, keeping it first as <name>.bak-<time>; without it an existing file is an error."
        ),
    ] = False,
) -> ExportResult:
    """Export the memories you can see to a JSON file (unencrypted: keep it safe). An existing
    file is never replaced unless force (then kept as a backup first)."""
    rt, who = session_of(ctx)
    return await call(
        lambda: transfer.export_memories(
            rt.service,
            who,
            rt.settings.allowed_for(who),
            outputPath,
            scope,
            category,
            since,
            includeExpired,
            force=force,
        )  # fmt: skip
    )


@tools("import-memories")
async def import_memories(
    inputPath: Annotated[str, Field(description="A file written by export-memories.")],
    ctx: Context,
    overwriteExisting: bool = False,
    skipInvalid: Annotated[
        bool,
        Field(
            description="Skip invalid entries and report them (default); false = stop and import nothing."
        ),
    ] = True,
) -> ImportResult:
    """Import memories from an export file; they become yours, in this project."""
    rt, who = session_of(ctx)
    return await call(
        lambda: transfer.import_memories(
            rt.service,
            who,
            rt.settings.allowed_for(who),
            inputPath,
            overwriteExisting,
            skipInvalid,
        )  # fmt: skip
    )


@tools("pattern_health")
async def pattern_health(ctx: Context) -> HealthResult:
    """Server health: store, embedding model readiness, ranking mode, your identity, and the
    record counts and pending vector writes of what you can see."""
    rt, who = session_of(ctx)
    return await call(lambda: maintenance.health(rt.service, who, rt.model_error))
