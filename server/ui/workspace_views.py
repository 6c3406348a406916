"""Dashboard pages of the workspace (ingested folders, their files, skipped files with
reasons, re-ingest with progress) and of indexed sessions (``kind=turn`` records grouped by
``metadata.session``: exchanges in the order of their first turn, ``metadata.turn``, and of
their parts, ``metadata.part``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from server.service.browsing import browse
from server.service.core.errors import InvalidInput

from .logins import UiSession
from .pages import Pages, route, view


def _int(request: Request, name: str, default: int) -> int:
    try:
        return int(request.query_params.get(name, default))
    except ValueError:
        raise InvalidInput(f"{name} must be a number") from None


@view
async def workspace_page(ui: Pages, request: Request, s: UiSession) -> Response:
    q = request.query_params
    root, state, after = q.get("root") or None, q.get("state") or None, q.get("after") or None
    if state not in (None, "indexed", "skipped"):
        raise InvalidInput(f"unknown state {state!r}")

    def build() -> dict:
        roots = browse.ingest_roots(ui.svc, s.identity)
        files, nxt = browse.list_files(ui.svc, s.identity, root=root, state=state, after=after)
        return {"roots": roots, "files": files, "next": nxt, "root": root, "state": state,
                "jobs": ui.jobs.running(s.identity), "active": "workspace"}  # fmt: skip

    return await ui.page(request, s, "workspace.html", build)


@view
async def start_ingest(ui: Pages, request: Request, s: UiSession) -> Response:
    form = await request.form()
    path = str(form.get("root", "")).strip()
    if not path:
        raise InvalidInput("which folder? give its path")
    job = await ui.run(lambda: ui.jobs.start(ui.rt, s.identity, path))
    if request.headers.get("hx-request"):
        return ui.render(request, s, "_job.html", {"job": job})
    return await ui.page(request, s, "job.html", lambda: {"job": job, "active": "workspace"})


@view
async def ingest_job(ui: Pages, request: Request, s: UiSession) -> Response:
    job = ui.jobs.get(request.path_params["id"], s.identity)
    if request.headers.get("hx-request"):
        return ui.render(request, s, "_job.html", {"job": job})
    return await ui.page(request, s, "job.html", lambda: {"job": job, "active": "workspace"})


@view
async def sessions_page(ui: Pages, request: Request, s: UiSession) -> Response:
    offset = max(0, _int(request, "offset", 0))

    def build() -> dict:
        rows, more = browse.list_sessions(ui.svc, s.identity, offset=offset)
        return {"sessions": rows, "more": more, "offset": offset, "active": "sessions"}

    return await ui.page(request, s, "sessions.html", build)


@view
async def session_page(ui: Pages, request: Request, s: UiSession) -> Response:
    sid = request.path_params["sid"]
    after = _int(request, "after", -1)
    part = _int(request, "part", -1) if "part" in request.query_params else None

    def build() -> dict:
        turns, more = browse.session_turns(ui.svc, s.identity, sid, after=after, after_part=part)
        m = turns[-1].metadata if turns else {}
        last = (m.get("turn"), m.get("part", 0)) if turns else None
        return {"sid": sid, "turns": turns, "more": more, "last": last, "active": "sessions"}

    return await ui.page(request, s, "session.html", build)


def routes(ui: Pages) -> list:
    return [
        route("/workspace", workspace_page),
        route("/workspace/ingest", start_ingest, ("POST",)),
        route("/workspace/job/{id}", ingest_job),
        route("/sessions", sessions_page),
        route("/sessions/{sid}", session_page),
    ]
