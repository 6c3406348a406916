"""The MCP tool ``import-from``: items read from another memory server, written through the
service (:mod:`server.service.transfers.import_write`).

``pattern-memory import-from SOURCE PATH`` reads the source in its own process and, when a
daemon owns the store, sends the items here in batches; the daemon writes them with the
caller's identity and the store's rules, as it would have locally.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from server.service.transfers import import_write
from server.service.transfers.import_from import ImportFromResult, parse_items

from .toolset import ScopeArg, ToolSet, call, session_of

tools = ToolSet()

MAX_ITEMS = 5000
SourceArg = Literal[
    "claude-mem", "mcp-memory-service", "mem0", "basic-memory", "memory-jsonl", "claude-code"
]


@tools("import-from")
async def import_from(
    ctx: Context,
    source: Annotated[SourceArg, Field(description="The memory server the items come from.")],
    items: Annotated[
        list[dict[str, Any]],
        Field(
            max_length=MAX_ITEMS,
            description="Items read from it, as `pattern-memory import-from SOURCE PATH` "
            "sends them: {kind: memory|entity|relation|lesson, sourceId, …}.",
        ),
    ],
    scope: ScopeArg = "team",
    dryRun: Annotated[
        bool, Field(description="Report what would be created; write nothing.")
    ] = False,
) -> ImportFromResult:
    """Import memories from another memory server (claude-mem, mcp-memory-service, mem0 /
    OpenMemory, basic-memory, the official memory.jsonl, Claude Code's memory files). Every item
    passes the write policy; an item imported before is not imported again, so a repeated or
    interrupted import is safe. Entities, relations and lessons join the scope's graph."""
    rt, who = session_of(ctx)
    return await call(
        lambda: import_write.import_items(
            rt.service, rt.graphs, who, source, parse_items(items), scope, dry_run=dryRun
        )
    )
