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
from collections.abc import Callable
from pathlib import Path

from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from server.service.browsing.review import ReviewPolicy
from server.service.core.runtime import Runtime

from .logins import Authenticate, Logins
from .pages import PREFIX, Pages, fmt_dt, short

HERE = Path(__file__).resolve().parent
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'self'"
)


class Dashboard(Pages):
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
        env.filters["dt"] = fmt_dt
        env.filters["short"] = short
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
