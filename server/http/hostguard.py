"""DNS-rebinding protection for everything the daemon serves over HTTP: MCP at ``/mcp``,
``/health`` and any route mounted later (the dashboard at ``/ui``).

A web page on ``evil.example.com`` whose name an attacker re-points at 127.0.0.1 makes the
browser send requests to the daemon with ``Host: evil.example.com`` (and ``Origin:
http://evil.example.com``). A token is not enough once a browser holds a credential (a
dashboard cookie), so every request must name an allowed host, and an ``Origin``, when sent,
must be an allowed one.

The allowed lists are the MCP SDK's own :class:`TransportSecuritySettings` (the same object is
given to ``streamable_http_app``, so ``/mcp`` is checked by the SDK too), built by
:func:`guard_settings`:

- always the loopback names ``127.0.0.1``, ``localhost``, ``[::1]`` (any port);
- the address the daemon is bound to, when it is one specific address (``--http 10.0.0.5:8765``
  allows ``Host: 10.0.0.5:8765``: an IP literal cannot be rebound);
- every ``--allowed-host NAME`` (any port, or exactly ``NAME:PORT`` when a port is given),
  with the origins ``http(s)://NAME``.

:class:`HostGuard` is the ASGI middleware that wraps the whole daemon app; a request it refuses
never reaches a route: a foreign ``Host`` gets 421, a foreign ``Origin`` 403 (the SDK's answers).
:func:`rejection` is the same check as a function, for a route that wants to ask directly.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from server.service.core.errors import InvalidInput

if TYPE_CHECKING:  # pragma: no cover
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.responses import Response

# The MCP SDK and starlette are imported where they are used: the daemon checks its
# --allowed-host names before taking the store lock, and imports the SDK (~0.7 s) only once
# the model has started loading.

logger = logging.getLogger(__name__)

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
WILDCARD_BINDS = ("0.0.0.0", "::", "")
_NAME = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+)(:\d{1,5})?$")


def host_literal(host: str) -> str:
    """How ``host`` appears in a Host header: IPv6 addresses in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def is_loopback(host: str) -> bool:
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_allowed_host(name: str) -> str:
    """An ``--allowed-host`` value: a host name or address, optionally ``:PORT``; no scheme,
    path or wildcard (``InvalidInput`` otherwise)."""
    value = name.strip()
    if not _NAME.match(value):
        raise InvalidInput(
            f"--allowed-host {name!r}: give a host name or address, optionally with :PORT "
            "(e.g. memory.example.com or memory.example.com:8443), without scheme or path",
            host=name,
        )
    return value.lower()


def guard_settings(bind_host: str, allowed_hosts: Iterable[str] = ()) -> TransportSecuritySettings:
    """The SDK's transport security settings for a daemon bound to ``bind_host``: protection
    on; loopback names, the bound address (when specific) and ``allowed_hosts`` allowed."""
    names = list(LOOPBACK_NAMES)
    if bind_host not in WILDCARD_BINDS and not is_loopback(bind_host):
        names.append(host_literal(bind_host))
    names += [check_allowed_host(h) for h in allowed_hosts]
    hosts: list[str] = []
    origins: list[str] = []
    for name in dict.fromkeys(names):
        has_port = re.search(r":\d+$", name) is not None and not name.endswith("]")
        hosts += [name] if has_port else [name, f"{name}:*"]
        for scheme in ("http", "https"):
            origins += [f"{scheme}://{name}"] if has_port else [
                f"{scheme}://{name}", f"{scheme}://{name}:*"
            ]  # fmt: skip
    from mcp.server.transport_security import TransportSecuritySettings

    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


async def rejection(settings: TransportSecuritySettings, scope) -> Response | None:
    """The response refusing this HTTP request (421 foreign Host, 403 foreign Origin), or None
    when its Host and Origin are allowed. The SDK's own check, without its Content-Type rule."""
    from mcp.server.transport_security import TransportSecurityMiddleware
    from starlette.requests import Request

    return await TransportSecurityMiddleware(settings).validate_request(
        Request(scope), is_post=False
    )


class HostGuard:
    """Pure ASGI middleware: refuse every HTTP or WebSocket request with a foreign ``Host`` or
    ``Origin`` before ``app`` sees it; lifespan events pass through."""

    def __init__(self, app, settings: TransportSecuritySettings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        refused = await rejection(self.settings, {**scope, "type": "http"})
        if refused is None:
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":  # closing before accept = HTTP 403 at the handshake
            return await send({"type": "websocket.close", "code": 1008})
        await refused(scope, receive, send)
