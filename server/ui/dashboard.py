"""The dashboard: a Starlette app under ``/ui`` inside the daemon's ASGI stack.

``Dashboard.mount(inner)`` puts it in front of the daemon's MCP app: requests for ``/ui``
go to the dashboard (cookie sessions, :mod:`.logins`), everything else to ``inner`` (bearer
auth + MCP). Whatever wraps the mounted app (the daemon's Host/Origin guard) covers both.

Every page is server-rendered (Jinja2, autoescaped: memory content is always text, never
markup) with vendored htmx and cytoscape.js; the Content-Security-Policy allows scripts from
``/ui/static`` only, so even a missed escape could not run an injected script. Pages act as
the signed-in identity through ``server/service`` (same visibility, rules and errors as the
tools) and never touch SQL. Each response carries ``Server-Timing: app;dur=<ms>``.
"""

from __future__ import annotations

import threading
import time
import typing
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from server.service.browsing import unattended_warnings as write_warnings
from server.service.browsing.review import ReviewPolicy, count_pending
from server.service.core.errors import PatternError
from server.service.core.identity import Identity
from server.service.core.runtime import Runtime
from server.service.learning import lesson_review

from .logins import COOKIE, Authenticate, Logins, UiSession

HERE = Path(__file__).resolve().parent
PREFIX = "/ui"
SAFE = ("GET", "HEAD", "OPTIONS")
STATUS = {"not_found": 404, "access_denied": 403, "core_protected": 403, "invalid_input": 400,
          "conflict": 409, "limit_exceeded": 409, "store_unavailable": 503}  # fmt: skip
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'self'"
)

View = Callable[["Dashboard", Request, UiSession], Awaitable[Response]]


def _fmt_dt(value) -> str:
    if value is None or value == "":
        return ""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
    return value.strftime("%Y-%m-%d %H:%M")


def _short(text: str | None, n: int = 160) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


class Dashboard:
    """One per daemon: the runtime, the sessions, background ingest jobs, the Starlette app."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        secret: str,
        authenticate: Authenticate,
        policy: Callable[[], ReviewPolicy] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        from server.service.browsing.review import review_policy

        from . import activity, graph_views, review_views, views, workspace_views
        from .jobs import IngestJobs

        self.rt = runtime
        self.logins = Logins(secret, authenticate, runtime.identity, clock)
        self.policy = policy or (lambda: review_policy(runtime))
        self.stopping = threading.Event()
        self.stream_seconds = activity.STREAM_SECONDS  # a live stream's lifetime (reconnects)
        self.poll_seconds = activity.POLL_SECONDS
        self.jobs = IngestJobs()
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        env = self.templates.env
        env.filters["dt"] = _fmt_dt
        env.filters["short"] = _short
        routes = [
            Mount(
                f"{PREFIX}/static", app=StaticFiles(directory=str(HERE / "static")), name="static"
            ),
            *views.routes(self),
            *graph_views.routes(self),
            *workspace_views.routes(self),
            *activity.routes(self),
            *review_views.routes(self),
        ]
        starlette = Starlette(routes=routes)
        starlette.state.ui = self
        self.app = _Secure(starlette)

    # ------------------------------------------------------------------ ASGI
    def mount(self, inner):
        """An ASGI app: ``/ui`` and below to the dashboard, everything else to ``inner``."""
        dashboard = self.app

        async def app(scope, receive, send):
            path = scope.get("path", "")
            if scope["type"] == "http" and (path == PREFIX or path.startswith(PREFIX + "/")):
                return await dashboard(scope, receive, send)
            return await inner(scope, receive, send)

        return app  # the daemon uses server.ui.mount.DashboardMount (built on first use)

    def close(self) -> None:
        """The daemon is stopping: live streams end, running ingest jobs are asked to stop."""
        self.stopping.set()
        self.jobs.stop_all()

    # ------------------------------------------------------------------ helpers for views
    @property
    def svc(self):
        return self.rt.service

    async def run(self, fn: Callable[[], typing.Any]) -> typing.Any:
        """A service call off the event loop (SQLite and the model block)."""
        return await anyio.to_thread.run_sync(fn)

    def nav(self, who: Identity) -> dict:
        """What every page's header needs (call in a worker thread)."""
        policy = self.policy()
        return {
            "reviewer": policy.is_reviewer(who),
            "review_on": policy.enabled(who.project_id),
            "pending": count_pending(self.svc, policy, who)
            + lesson_review.count_pending(self.rt.graphs, who)
            + write_warnings.count(self.svc, who),
        }

    def render(
        self, request: Request, s: UiSession, name: str, ctx: dict, status: int = 200
    ) -> Response:
        full = {"s": s, "who": s.identity, "csrf": s.csrf, "nav": {}, **ctx}
        return self.templates.TemplateResponse(request, name, full, status_code=status)

    async def page(
        self, request: Request, s: UiSession, name: str, build: Callable[[], dict],
        status: int = 200,
    ) -> Response:  # fmt: skip
        """Render ``name`` with ``build()`` (run in a worker thread, with the header data)."""
        ctx = await self.run(lambda: {**build(), "nav": self.nav(s.identity)})
        return self.render(request, s, name, ctx, status)

    async def error(self, request: Request, s: UiSession, exc: PatternError) -> Response:
        status = STATUS.get(exc.code, 400)
        if request.headers.get("hx-request"):
            return self.render(request, s, "_message.html", {"error": exc}, 200)
        return await self.page(request, s, "error.html", lambda: {"error": exc}, status)

    def session(self, request: Request) -> UiSession | None:
        return self.logins.get(request.cookies.get(COOKIE))


def _same_origin(request: Request) -> bool:
    """A browser's Origin (or Referer) must name this very host (defence beside CSRF)."""
    origin = request.headers.get("origin") or request.headers.get("referer")
    if not origin:
        return True  # not a browser (browsers send Origin on every POST)
    return urlsplit(origin).netloc == request.headers.get("host", "")


def view(fn: View) -> Callable[[Request], Awaitable[Response]]:
    """A dashboard endpoint: signed in, CSRF-checked if it changes state, errors as pages."""

    async def endpoint(request: Request) -> Response:
        ui: Dashboard = request.app.state.ui
        s = ui.session(request)
        if s is None:
            if request.method in SAFE and not request.headers.get("hx-request"):
                return RedirectResponse(f"{PREFIX}/login", status_code=303)
            return PlainTextResponse("sign in first", status_code=401)
        if request.method not in SAFE:
            presented = request.headers.get("x-csrf-token")
            if presented is None:
                form = await request.form()
                presented = form.get("csrf")
            if not ui.logins.csrf_ok(s, presented) or not _same_origin(request):
                return PlainTextResponse("invalid or missing CSRF token", status_code=403)
        try:
            return await fn(ui, request, s)
        except PatternError as exc:
            return await ui.error(request, s, exc)

    return endpoint


def route(path: str, fn, methods=("GET",)) -> Route:
    return Route(PREFIX + path, fn, methods=list(methods))


class _Secure:
    """Security headers on every dashboard response, and ``Server-Timing`` (handler time)."""

    def __init__(self, app: Starlette) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        t0 = time.perf_counter()
        static = scope.get("path", "").startswith(f"{PREFIX}/static/")

        async def send_with_headers(message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                ms = (time.perf_counter() - t0) * 1000
                headers += [
                    (b"content-security-policy", CSP.encode()),
                    (b"x-frame-options", b"DENY"),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"same-origin"),  # no-referrer makes Origin "null"
                    (b"server-timing", f"app;dur={ms:.1f}".encode()),
                ]
                if not static:
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)
