"""The MCP server: built by :func:`create_server`; resources live in the lifespan."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.subscriptions import InMemorySubscriptionBus, SubscriptionBus

from server.service.core.runtime import Runtime

from . import (
    admin_tools,
    graph_tools,
    import_tools,
    ingest_tools,
    lesson_tools,
    memory_tools,
    recall_tools,
    review_tools,
    stream_tools,
    update_tools,
    verify_tools,
)

INSTRUCTIONS = """pattern-memory: long-term memory you can search by meaning.
At the start of a session call `recall-context` (or `recall` with what you are about to work on).
Store durable facts with `remember` (scope private|personal|team|public), quick notes with
`remember-task` / `remember-learning` (24 h), identity with `core-memory`; promote a note with
`commit-insight`; share with the project via `share-learning`. Never store credentials."""

DOMAINS = (
    memory_tools,
    update_tools,
    recall_tools,
    graph_tools,
    lesson_tools,
    ingest_tools,
    admin_tools,
    import_tools,
    verify_tools,
    review_tools,
)


def register_all(server: MCPServer, bus: SubscriptionBus) -> None:
    """Every tool, resource and subscription handler of pattern-memory on ``server``."""
    for domain in DOMAINS:
        domain.tools.register(server)
    stream_tools.register(server, bus)


def create_server(
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    *,
    runtime: Runtime | None = None,
) -> MCPServer:
    """An MCP server over one store. ``runtime`` injects a prepared one (tests)."""

    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[Runtime]:
        rt = runtime or Runtime.start(env, cwd)
        try:
            yield rt
        finally:
            if runtime is None:
                rt.close()

    bus = InMemorySubscriptionBus()  # pattern://changes notifications (server/mcp/stream_tools.py)
    server = MCPServer(
        name="pattern-memory",
        instructions=INSTRUCTIONS,
        version="0.1.0",
        lifespan=lifespan,
        log_level="WARNING",
        subscriptions=bus,
    )
    from . import client_logging
    from .toolset import lazy_tools

    lazy_tools(server)  # each tool is built when first called or listed (a daemon's start)
    register_all(server, bus)
    client_logging.register(server)  # logging/setLevel
    return server
