"""``logging/setLevel``: the least severe log level a client wants as ``notifications/message``.

The server answers the request (and so advertises the ``logging`` capability) for protocol
versions up to 2025-11-25; 2026-07-28 removed the method (a client opts in per request with
``_meta``), and the SDK's per-version gate answers it there with method-not-found. The level is
kept per connection: :meth:`ClientLogging.log` sends a message only at or above it (every level
until the client sets one, as the specification says). Over the daemon's stateless HTTP every
request is its own connection, so a level set there lasts for that request only, and the daemon
pushes no notifications anyway (the bridge polls).
"""

from __future__ import annotations

import warnings
import weakref
from typing import Any, get_args

import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPDeprecationWarning

LEVELS: tuple[str, ...] = get_args(types.LoggingLevel)  # least severe first (RFC 5424 order)


def _connection(ctx) -> Any:
    """The per-connection object behind a request (``ctx.session`` may be a per-request proxy)."""
    session = ctx.session
    return getattr(session, "_connection", None) or session


class ClientLogging:
    """The levels the connected clients chose, and the sender that honours them."""

    def __init__(self) -> None:
        self.levels: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    async def set_level(self, ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
        self.levels[_connection(ctx)] = params.level
        return types.EmptyResult()

    def level_of(self, ctx) -> str | None:
        """The level this request's client set, or None (it set none: every level goes)."""
        return self.levels.get(_connection(ctx))

    def allows(self, ctx, level: str) -> bool:
        chosen = self.level_of(ctx)
        return chosen is None or LEVELS.index(level) >= LEVELS.index(chosen)

    async def log(self, ctx, level: str, data: Any, logger: str | None = None) -> bool:
        """Send ``data`` as a log notification if the client's level lets it through (the SDK
        then applies the protocol's own rules); True when it was handed to the session."""
        if not self.allows(ctx, level):
            return False
        with warnings.catch_warnings():  # the SDK marks logging deprecated as of 2026-07-28
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await ctx.session.send_log_message(level=level, data=data, logger=logger)
        return True


def register(server: MCPServer) -> ClientLogging:
    """Serve ``logging/setLevel`` on ``server`` (the lowlevel hook: MCPServer has no decorator
    for a method the 2026 protocol removed)."""
    logging_ = ClientLogging()
    server._lowlevel_server.add_request_handler(  # noqa: SLF001
        "logging/setLevel", types.SetLevelRequestParams, logging_.set_level
    )
    return logging_
