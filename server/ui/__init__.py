"""The web dashboard the daemon serves under ``/ui`` (see :mod:`server.ui.dashboard`).

The daemon mounts a :class:`server.ui.mount.DashboardMount`, which builds the dashboard (and
imports Jinja2 and the views) on the first ``/ui`` request, so a daemon nobody opens the
dashboard of starts as fast as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .dashboard import Dashboard


def __getattr__(name: str):
    if name == "Dashboard":
        from .dashboard import Dashboard

        return Dashboard
    raise AttributeError(name)


__all__ = ["Dashboard"]
