"""The web dashboard the daemon serves under ``/ui`` (see :mod:`server.ui.app`)."""

from .app import Dashboard

__all__ = ["Dashboard"]
