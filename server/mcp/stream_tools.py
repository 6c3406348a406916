"""The MCP face of the change stream: the ``changes`` and ``changes-ack`` tools, the
``pattern://changes`` resource, and notifications to clients subscribed to it.

Notifications: after every ``tools/call`` that committed a change (the store's change-log head
moved, whichever tool wrote), the server announces ``pattern://changes`` as updated on both
subscription mechanisms of the SDK:

- ``subscriptions/listen`` streams (protocol 2026-07-28, ``Client.listen(resource_subscriptions=
  ["pattern://changes"])``): through the server's :class:`SubscriptionBus`;
- ``resources/subscribe`` (2025-era clients, e.g. today's desktop clients): the subscribed
  sessions get ``notifications/resources/updated``.

A notification is a level trigger ("read again"), shared by every subscriber: it says *that*
something changed, not what; the subscriber then reads ``changes`` from its cursor, which
returns only what it may see. Writes made by another process on the same store (which the
daemon design rules out) are not announced; ``changes`` still returns them.
"""

from __future__ import annotations

import logging
import weakref
from typing import Annotated, Any

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.subscriptions import ResourceUpdated, SubscriptionBus
from mcp.shared.exceptions import MCPError
from pydantic import Field

from server.service.memories import changes as stream
from server.service.memories.changes import AckResult, ChangesResult
from server.service.recalling import withheld

from .toolset import ScopeArg, call, session_of

CHANGES_URI = "pattern://changes"
logger = logging.getLogger(__name__)


def _store_of(lifespan_context: Any):
    service = getattr(lifespan_context, "service", None)
    return getattr(service, "store", None)


class ChangeNotifier:
    """Server middleware: announce ``pattern://changes`` after a tool call that committed."""

    def __init__(self, bus: SubscriptionBus) -> None:
        self.bus = bus
        # connections that sent resources/subscribe (weak: a closed connection just goes away)
        self.sessions: weakref.WeakSet = weakref.WeakSet()

    @staticmethod
    def _connection(ctx):
        """The per-connection object behind a request (``ctx.session`` is a per-request proxy,
        collected after the request; its connection lives as long as the client)."""
        return getattr(ctx.session, "_connection", None) or ctx.session

    async def publish(self) -> None:
        await self.bus.publish(ResourceUpdated(uri=CHANGES_URI))
        for session in list(self.sessions):
            try:
                await session.send_resource_updated(CHANGES_URI)
            except Exception:  # a closed session: forget it, keep notifying the others
                logger.debug("dropping a resources/subscribe session", exc_info=True)
                self.sessions.discard(session)

    async def __call__(self, ctx, call_next):
        store = _store_of(ctx.lifespan_context) if ctx.method == "tools/call" else None
        if store is None:
            return await call_next(ctx)
        before = stream.head(store.reader)
        try:
            return await call_next(ctx)
        finally:
            if stream.head(store.reader) != before:
                await self.publish()

    async def subscribe(self, ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
        if str(params.uri) != CHANGES_URI:
            raise MCPError(types.INVALID_PARAMS, f"only {CHANGES_URI} can be subscribed to")
        self.sessions.add(self._connection(ctx))
        return types.EmptyResult()

    async def unsubscribe(self, ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        self.sessions.discard(self._connection(ctx))
        return types.EmptyResult()


def register(server: MCPServer, bus: SubscriptionBus) -> ChangeNotifier:
    """Add the change-stream tools and resource to ``server``; ``bus`` must be the one the
    server was built with (``MCPServer(subscriptions=bus)``)."""
    notifier = ChangeNotifier(bus)
    server.middleware.append(notifier)
    # MCPServer has no decorator for the 2025-era resources/subscribe: register on the lowlevel
    # server (the 2026-07-28 subscriptions/listen is served by MCPServer itself from `bus`)
    low = server._lowlevel_server  # noqa: SLF001
    low.add_request_handler("resources/subscribe", types.SubscribeRequestParams, notifier.subscribe)
    low.add_request_handler(
        "resources/unsubscribe", types.UnsubscribeRequestParams, notifier.unsubscribe
    )

    @server.tool(name="changes")
    async def changes(
        ctx: Context,
        cursor: Annotated[
            int | None,
            Field(
                ge=0,
                description="The last seq you processed (0 = from the beginning). Omit it with consumerId to resume from the stored cursor.",
            ),
        ] = None,
        limit: Annotated[
            int,
            Field(
                ge=1,
                le=stream.MAX_LIMIT,
                description="Most changes per page (default 100, max 1000).",
            ),
        ] = stream.DEFAULT_LIMIT,
        consumerId: Annotated[
            str | None,
            Field(
                description="A name for this consumer: its cursor is stored durably (per agent, project and scopes)."
            ),
        ] = None,
        commit: Annotated[
            bool,
            Field(
                description="Store next_cursor for consumerId now (at-most-once); else call changes-ack after handling the page."
            ),
        ] = False,
        scopes: Annotated[
            list[ScopeArg] | None,
            Field(description="Only changes in these scopes (default: all you can see)."),
        ] = None,
        includeRecords: Annotated[
            bool, Field(description="Attach the current record to inserts/updates.")
        ] = True,
        includeSuspicious: Annotated[
            bool,
            Field(
                description="Attach the text of records flagged as possible instructions to "
                "the model too (marked by metadata.suspicious either way; without it their "
                "content, context and string metadata are left out)."
            ),
        ] = False,
    ) -> ChangesResult:
        """Read the change stream: every committed insert/update/delete you are allowed to see
        (and `citations`: the code a record cites changed status), in commit order, after
        `cursor`. Continue with cursor=next_cursor while has_more. If
        reset_required is true your cursor is behind the compaction horizon: rebuild from
        recall-context/export-memories, then continue from next_cursor."""
        rt, who = session_of(ctx)
        return await call(
            lambda: withheld.changes(
                stream.read_changes(
                    rt.service, who, cursor, limit, consumerId, commit, scopes, includeRecords
                ),
                includeSuspicious,
            )
        )

    @server.tool(name="changes-ack")
    async def changes_ack(
        consumerId: Annotated[str, Field(description="The consumer whose cursor to store.")],
        cursor: Annotated[
            int, Field(ge=0, description="The last seq it has handled (a next_cursor).")
        ],
        ctx: Context,
        scopes: Annotated[
            list[ScopeArg] | None, Field(description="The same scopes as its changes calls.")
        ] = None,
    ) -> AckResult:
        """Store a consumer's cursor after it has handled the changes up to it; `changes` with
        this consumerId and no cursor resumes there (also after a restart)."""
        rt, who = session_of(ctx)
        return await call(lambda: stream.ack(rt.service, who, consumerId, cursor, scopes))

    @server.resource(
        CHANGES_URI + "{?cursor,limit}",
        name="changes",
        title="Change stream",
        description="The latest changes you can see (or, with ?cursor=N, the page after N), as "
        "JSON like the `changes` tool (flagged records without their text). Subscribe to "
        "pattern://changes to be told of new ones.",
        mime_type="application/json",
    )
    async def changes_resource(
        ctx: Context, cursor: int | None = None, limit: int = stream.DEFAULT_LIMIT
    ) -> str:
        rt, who = session_of(ctx)
        limit = max(1, min(int(limit), stream.MAX_LIMIT))
        if cursor is None:
            res = await call(lambda: stream.latest_changes(rt.service, who, limit))
        else:
            res = await call(lambda: stream.read_changes(rt.service, who, int(cursor), limit))
        return withheld.changes(res, False).model_dump_json()

    return notifier
