"""The activity page: the change stream, live (server-sent events), filterable by agent and
kind. Both the first page and the stream read ``server.service.memories.changes`` as the signed-in
identity, so they show exactly what the ``changes`` tool would: only changes of buckets the
caller can see.

The stream polls the change log every :data:`POLL_SECONDS` (an indexed range scan per
visible bucket, so it also sees writes of other processes), sends each matching change as an
``event: change`` with ``id: <seq>``, and moves the ``id`` past filtered-out changes, so an
``EventSource`` that reconnects (``Last-Event-ID``) continues where it stopped. A stream ends
after :data:`STREAM_SECONDS` (the browser reconnects), when its session ends, and when the
daemon stops.
"""

from __future__ import annotations

import json
import time

import anyio
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from retrieval.records import Kind
from server.service.browsing.browse import author_of, recent_changes
from server.service.core.errors import InvalidInput
from server.service.memories.changes import Change, latest_changes, read_changes

from .logins import UiSession
from .pages import Pages, route, short, view

POLL_SECONDS = 1.0
STREAM_SECONDS = 300.0
KEEPALIVE_SECONDS = 15.0
FIRST_PAGE = 50


def row(c: Change, s: UiSession) -> dict:
    return {
        "seq": c.seq, "op": c.op, "kind": c.kind, "scope": c.scope, "revision": c.revision,
        "at": c.at.strftime("%Y-%m-%d %H:%M:%S"), "agent": author_of(c, s.identity) or "",
        "id": c.record_id, "text": short(c.record.content, 140) if c.record else "",
        "present": c.record is not None,
    }  # fmt: skip


def filters(request: Request) -> tuple[str | None, str | None]:
    agent = request.query_params.get("agent", "").strip() or None
    kind = request.query_params.get("kind", "").strip() or None
    if kind is not None and kind not in {k.value for k in Kind}:
        raise InvalidInput(f"unknown kind {kind!r}")
    return agent, kind


def matches(r: dict, agent: str | None, kind: str | None) -> bool:
    return (agent is None or r["agent"] == agent) and (kind is None or r["kind"] == kind)


@view
async def activity_page(ui: Pages, request: Request, s: UiSession) -> Response:
    agent, kind = filters(request)

    def build() -> dict:
        # a filter may hide most changes: it looks further back (still one bounded read)
        changes, head = recent_changes(ui.svc, s.identity, FIRST_PAGE, kind=kind, agent=agent)
        rows = [row(c, s) for c in changes]
        return {"rows": rows[::-1], "cursor": head, "agent": agent or "",
                "kind": kind or "", "kinds": [k.value for k in Kind], "active": "activity"}  # fmt: skip

    return await ui.page(request, s, "activity.html", build)


@view
async def activity_stream(ui: Pages, request: Request, s: UiSession) -> Response:
    agent, kind = filters(request)
    start = request.headers.get("last-event-id") or request.query_params.get("after") or ""
    try:
        cursor = int(start) if start else None
    except ValueError:
        raise InvalidInput("after must be a change sequence number") from None
    if cursor is None:
        cursor = (await ui.run(lambda: latest_changes(ui.svc, s.identity, limit=1))).next_cursor

    async def events():
        nonlocal cursor
        yield f"retry: 2000\nid: {cursor}\n\n"
        end = time.monotonic() + ui.stream_seconds
        beat = time.monotonic()
        while time.monotonic() < end and not ui.stopping.is_set():
            if ui.logins.get(s.id) is None:  # logged out, expired or revoked
                yield "event: end\ndata: signed out\n\n"
                return
            res = await ui.run(
                lambda at=cursor: read_changes(ui.svc, s.identity, cursor=at, limit=200)
            )
            out = []
            if res.reset_required:
                out.append(f"event: reset\ndata: {json.dumps(res.reason)}\n\n")
            for c in res.changes:
                r = row(c, s)
                if matches(r, agent, kind):
                    out.append(f"id: {c.seq}\nevent: change\ndata: {json.dumps(r)}\n\n")
            if res.next_cursor != cursor:
                out.append(f"id: {res.next_cursor}\n\n")  # past filtered-out changes
                cursor = res.next_cursor
            if not out and time.monotonic() - beat > KEEPALIVE_SECONDS:
                out.append(": keepalive\n\n")
            if out:
                beat = time.monotonic()
                yield "".join(out)
            if not res.has_more:
                for _ in range(max(1, int(ui.poll_seconds / 0.1))):
                    if ui.stopping.is_set():
                        return
                    await anyio.sleep(0.1)

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )


def routes(ui: Pages) -> list:
    return [
        route("/activity", activity_page),
        route("/activity/stream", activity_stream),
    ]
