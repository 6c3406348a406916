"""The daemon's ``/ui`` mount: routes ``/ui`` requests to the dashboard, built on the first
one (Jinja2 and the views are imported then, not at daemon start-up), and everything else to
the app behind it (bearer auth + MCP)."""

from __future__ import annotations

import threading

from server.service.core.runtime import Runtime

from .logins import Authenticate

PREFIX = "/ui"


class DashboardMount:
    def __init__(self, runtime: Runtime, *, secret: str, authenticate: Authenticate) -> None:
        self._args = (runtime, secret, authenticate)
        self._lock = threading.Lock()
        self._dashboard = None
        self._closed = False

    def dashboard(self):
        with self._lock:
            if self._dashboard is None:
                from .dashboard import Dashboard

                rt, secret, authenticate = self._args
                self._dashboard = Dashboard(rt, secret=secret, authenticate=authenticate)
                if self._closed:
                    self._dashboard.close()
            return self._dashboard

    def mount(self, inner):
        """An ASGI app: ``/ui`` and below to the dashboard, everything else to ``inner``."""

        async def app(scope, receive, send):
            path = scope.get("path", "")
            if scope["type"] == "http" and (path == PREFIX or path.startswith(PREFIX + "/")):
                return await self.dashboard().app(scope, receive, send)
            return await inner(scope, receive, send)

        return app

    def close(self) -> None:
        """The daemon is stopping: live dashboard streams end, ingest jobs are asked to stop."""
        with self._lock:
            self._closed = True
            dashboard = self._dashboard
        if dashboard is not None:
            dashboard.close()
