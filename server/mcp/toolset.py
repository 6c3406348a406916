"""What every MCP tool module shares: the caller's runtime and identity, the service call that
turns a ``PatternError`` into a tool error, argument types, and :class:`ToolSet`.

A domain module (memories, recall, graph, lessons, ingest, stream, admin) declares its tools as
plain module-level functions under ``tools = ToolSet()`` / ``@tools("name")``; ``register``
adds them to a server. The tools are thin adapters: validate (pydantic, from the signature),
call the service in a worker thread, return its pydantic result.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool, ToolManager
from pydantic import Field

from server.service.core.errors import PatternError, storage_error
from server.service.core.identity import Identity
from server.service.core.runtime import Runtime

log = logging.getLogger(__name__)

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


class LazyTools(ToolManager):
    """The SDK's tool manager, building each named tool (its arguments' model and its JSON
    schemas, ~15 ms of processor time a tool) when it is first called or listed instead of
    when it is added: a daemon's first answer waits for its own tool, not for all 37
    (:meth:`build_all` builds the rest later). Tools are listed in the order they were added.
    A tool whose build fails is logged once and left out (:attr:`broken`): the others are
    still listed and called."""

    def __init__(self, base: ToolManager) -> None:
        super().__init__(base.warn_on_duplicate_tools, tools=base.list_tools())
        self._order: list[str] = list(self._tools)
        self._pending: dict[str, tuple[Callable[..., Any], dict]] = {}
        self._build_lock = threading.Lock()
        self.broken: dict[str, str] = {}  # name -> why its build failed

    def add_tool(self, fn: Callable[..., Any], name: str | None = None, **kwargs: Any) -> Tool:
        if name is not None and name in self._pending:
            self._build(name)  # a second tool of that name: the SDK's duplicate rule applies
        if name is None or name in self._tools:
            tool = super().add_tool(fn, name=name, **kwargs)  # the SDK's checks, at once
            if tool.name not in self._order:
                self._order.append(tool.name)
            return tool
        self._pending[name] = (fn, kwargs)
        self._order.append(name)
        return None  # type: ignore[return-value] - MCPServer.add_tool returns nothing

    def _build(self, name: str) -> None:
        with self._build_lock:
            spec = self._pending.pop(name, None)
            if spec is None:
                return
            try:
                super().add_tool(spec[0], name=name, **spec[1])
            except Exception as exc:  # noqa: BLE001 - one broken tool never hides the others
                self.broken[name] = f"{type(exc).__name__}: {exc}"
                log.error("tool %s could not be built and is left out: %s", name, exc)

    def build_all(self) -> None:
        """Build every tool not built yet."""
        for name in list(self._pending):
            self._build(name)

    def get_tool(self, name: str) -> Tool | None:
        self._build(name)
        return super().get_tool(name)

    def list_tools(self) -> list[Tool]:
        self.build_all()
        return [self._tools[n] for n in self._order if n in self._tools]

    def remove_tool(self, name: str) -> None:
        self._build(name)
        super().remove_tool(name)
        self._order.remove(name)


def lazy_tools(server: MCPServer) -> LazyTools:
    """Make ``server`` build its tools as they are first used (:class:`LazyTools`); call it
    before adding them."""
    manager = LazyTools(server._tool_manager)  # noqa: SLF001 - the SDK keeps it private
    server._tool_manager = manager  # noqa: SLF001
    return manager


def build_tools(server: MCPServer) -> None:
    """Build every tool of ``server`` not built yet (see :class:`LazyTools`)."""
    manager = server._tool_manager  # noqa: SLF001
    if isinstance(manager, LazyTools):
        manager.build_all()


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
