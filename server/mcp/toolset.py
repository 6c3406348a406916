"""What every MCP tool module shares: the caller's runtime and identity, the service call that
turns a ``PatternError`` into a tool error, argument types, and :class:`ToolSet`.

A domain module (memories, recall, graph, lessons, ingest, stream, admin) declares its tools as
plain module-level functions under ``tools = ToolSet()`` / ``@tools("name")``; ``register``
adds them to a server. The tools are thin adapters: validate (pydantic, from the signature),
call the service in a worker thread, return its pydantic result.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from server.service.core.errors import PatternError, storage_error
from server.service.core.identity import Identity
from server.service.core.runtime import Runtime

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
ScopeArg = Literal["private", "personal", "team", "public"]
IdempotencyKey = Annotated[
    str | None,
    Field(
        max_length=200,
        description="Any unique string for this write (e.g. a UUID). A retry with the same key "
        "returns the first call's result and writes nothing again (keys last 24 h).",
    ),
]


class ToolSet:
    """The tools of one domain module, in declaration order, registered by :meth:`register`."""

    def __init__(self) -> None:
        self._tools: list[tuple[str, Callable[..., Any]]] = []

    def __call__(self, name: str) -> Callable[[F], F]:
        def declare(fn: F) -> F:
            self._tools.append((name, fn))
            return fn

        return declare

    def register(self, server: MCPServer) -> None:
        for name, fn in self._tools:
            server.add_tool(fn, name=name)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self._tools]


def runtime_of(ctx: Context) -> Runtime:
    return ctx.request_context.lifespan_context


def identity_of(ctx: Context) -> Identity:
    """The caller: from the authenticated HTTP connection (daemon), else the process
    environment (stdio). Never from tool arguments."""
    request = ctx.request_context.request
    if request is not None:
        state = request.scope.get("state") or {}
        who = state.get("pattern_identity")
        if who is None:  # the auth middleware always sets it; refuse rather than guess
            raise ToolError("[access_denied] unauthenticated request")
        return who
    return runtime_of(ctx).identity


def session_of(ctx: Context) -> tuple[Runtime, Identity]:
    return runtime_of(ctx), identity_of(ctx)


def tool_error(exc: PatternError) -> ToolError:
    """``[code] message {data}``: what the agent reads when a call fails."""
    detail = f" {json.dumps(exc.data, default=str)}" if exc.data else ""
    return ToolError(f"[{exc.code}] {exc.message}{detail}")


async def call(fn: Callable[[], T]) -> T:
    """Run a service call off the event loop; PatternError -> ToolError with code and data
    (a failing disk's SQLite error too, as ``store_unavailable`` naming the fault)."""
    try:
        return await anyio.to_thread.run_sync(fn)
    except PatternError as exc:
        raise tool_error(exc) from exc
    except sqlite3.Error as exc:  # a read on a damaged file or failing disk: say which
        failed = storage_error(exc, None, "the call was not answered")
        if failed is None:
            raise
        raise tool_error(failed) from exc
