"""One writer per store, for the CLI: a command that opens the store takes the store lock
itself, or, when a daemon owns the store, goes through that daemon or refuses.

Going through the daemon: the command's tool is called on the daemon's MCP endpoint with its
local secret (``<home>/daemon.json``, readable by this user only) and this process's identity in
the trusted envelope (project, agent, project folder), exactly as a bridged client would call
it; the daemon applies its rules and writes. A command with no tool of its own (``demo``,
``reindex``, ``compact-changes``, …) is refused with a message naming the daemon and what to do
instead. Either way no second process writes the store's files.
"""

from __future__ import annotations

import http.client
import json
import os
import re
from pathlib import Path
from typing import Any, NoReturn

from server.service.core import errors
from server.service.core.errors import PatternError, StoreUnavailable
from server.service.core.identity import Identity

from ..http.auth import envelope_headers
from ..http.daemon import StoreLock
from ..http.daemonfiles import read_info

__all__ = ["Owner", "call_tool", "refuse", "runtime", "sole", "take"]

TOOL_TIMEOUT_S = 3600.0  # an ingest through the daemon may embed a large tree
_ERROR = re.compile(r"\[([a-z_]+)\]\s*(.*)", re.S)


def take(home: Path, command: str) -> StoreLock | dict:
    """The store lock, held by this process from now on; or, when a daemon owns the store, its
    ``daemon.json`` (host, port, local secret). Another owner that is not a serving daemon
    (a running ``ingest``, say) is a ``StoreUnavailable`` naming it."""
    lock = StoreLock(home, f"pattern-memory {command}")
    try:
        lock.acquire()
    except StoreUnavailable:
        info = read_info(home)
        if info and info.get("secret") and info.get("port"):
            return info
        raise
    return lock


def refuse(home: Path, info: dict, command: str, instead: str = "") -> NoReturn:
    """A daemon owns the store and ``command`` has no way through it."""
    raise StoreUnavailable(
        f"the daemon (pid {info.get('pid')}) owns store {home}: `pattern-memory {command}` "
        f"would be a second writer, so it did not run. {instead}"
        "Stop the daemon (`pattern-memory stop`) to run it here.",
        pid=info.get("pid"),
        command=command,
    )


def _error(text: str) -> PatternError:
    """The daemon's tool error (``Error executing tool X: [code] message``) as the same
    error here."""
    m = _ERROR.search(text)
    code, message = (m.group(1), m.group(2).strip()) if m else ("pattern_error", text)
    for value in vars(errors).values():
        if isinstance(value, type) and issubclass(value, PatternError) and value.code == code:
            return value(message)
    return PatternError(message)


def call_tool(info: dict, who: Identity, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """Call ``tool`` on the daemon as ``who``; its structured result (a tool error is raised
    as the same ``PatternError`` here)."""
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": tool, "arguments": args}}  # fmt: skip
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        **envelope_headers(who, info["secret"]),
    }
    try:
        conn = http.client.HTTPConnection(info["host"], info["port"], timeout=TOOL_TIMEOUT_S)
        try:
            conn.request("POST", "/mcp", json.dumps(message), headers)
            resp = conn.getresponse()
            body = resp.read()
        finally:
            conn.close()
    except OSError as exc:
        raise StoreUnavailable(f"the store's daemon did not answer: {exc}") from None
    if resp.status != 200:
        raise StoreUnavailable(f"the store's daemon answered {resp.status}: {body[:300]!r}")
    data = json.loads(body)
    if "error" in data:
        raise PatternError(str(data["error"].get("message")))
    result = data["result"]
    if result.get("isError"):
        raise _error("\n".join(c.get("text", "") for c in result.get("content", [])))
    return result.get("structuredContent") or {}


def runtime(background: bool = False):
    """The service runtime over the store, in this process."""
    from server.service.core.runtime import Runtime

    return Runtime.start(background=background)


class Owner:
    """Who writes the store for this command: this process (``lock`` held) or the daemon
    that owns it (``daemon``: its daemon.json); see :func:`take`."""

    def __init__(self, command: str) -> None:
        from server.service.core.config import Settings

        self.command = command
        self.settings = Settings.from_env()
        got = take(self.settings.home, command)
        self.lock, self.daemon = (None, got) if isinstance(got, dict) else (got, None)

    def refuse_if_daemon(self, instead: str = "") -> None:
        if self.daemon is not None:
            refuse(self.settings.home, self.daemon, self.command, instead)

    def call(self, tool: str, args: dict, project: str | None = None) -> dict:
        from server.service.core.identity import identity_from_env

        who = identity_from_env(os.environ, self.settings.cwd)
        if project:
            who = who.model_copy(update={"project_id": project})
        return call_tool(self.daemon, who, tool, {k: v for k, v in args.items() if v is not None})

    def release(self) -> None:
        if self.lock is not None:
            self.lock.release()


def sole(command: str, instead: str = "") -> Owner:
    """The store lock for a command that has no way through a daemon (refused under one)."""
    owner = Owner(command)
    owner.refuse_if_daemon(instead)
    return owner
