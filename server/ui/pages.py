"""What every dashboard page uses: the view decorator and routes under ``/ui``, the
:class:`Pages` half of the dashboard (service calls off the event loop, rendering, errors, the
header), and the text filters of the templates.

The page modules (:mod:`.views`, :mod:`.graph_views`, :mod:`.workspace_views`,
:mod:`.activity`, :mod:`.review_views`) import this module; :mod:`.dashboard` assembles them
into the Starlette app.
"""

from __future__ import annotations

import threading
import typing
from collections.abc import Awaitable, Callable
from datetime import datetime
from urllib.parse import urlsplit

import anyio
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from server.service.browsing import unattended_warnings as write_warnings
from server.service.browsing.review import ReviewPolicy, count_pending
from server.service.core.errors import PatternError
from server.service.core.identity import Identity
from server.service.core.runtime import Runtime
from server.service.learning import lesson_review

from .logins import COOKIE, Logins, UiSession

if typing.TYPE_CHECKING:
    from .jobs import IngestJobs

PREFIX = "/ui"
SAFE = ("GET", "HEAD", "OPTIONS")
STATUS = {"not_found": 404, "access_denied": 403, "core_protected": 403, "invalid_input": 400,
          "conflict": 409, "limit_exceeded": 409, "store_unavailable": 503}  # fmt: skip

View = Callable[["Pages", Request, UiSession], Awaitable[Response]]


def fmt_dt(value) -> str:
    if value is None or value == "":
        return ""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
    return value.strftime("%Y-%m-%d %H:%M")


def short(text: str | None, n: int = 160) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


class Pages:
    """The dashboard as its pages see it: the runtime, the sessions, the review policy, the
    ingest jobs, the templates (all set by :class:`~.dashboard.Dashboard`), and the helpers."""

    rt: Runtime
    logins: Logins
    policy: Callable[[], ReviewPolicy]
    stopping: threading.Event
    stream_seconds: float  # a live stream's lifetime (reconnects)
    poll_seconds: float
    jobs: IngestJobs
    templates: Jinja2Templates

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
        ui: Pages = request.app.state.ui
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
