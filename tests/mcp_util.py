"""Helpers for the MCP-level tests: a synchronous wrapper around the official MCP client (in
process or over stdio), a settable clock, and in-process runtimes with a chosen identity.

The client lives in an anyio blocking portal (an event loop in a helper thread), so a test can
keep one connection open across several test functions and call tools as plain functions.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from anyio.from_thread import start_blocking_portal
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from server.mcp.app import create_server
from server.service.core.config import Settings
from server.service.core.identity import identity_from_env
from server.service.core.runtime import Runtime
from server.service.memories.memory import MemoryService

PATTERN_TOOLS = {
    "remember", "remember-task", "remember-learning", "commit-insight", "core-memory",
    "forget", "recall-context", "share-learning", "cleanup", "export-memories",
    "import-memories", "remember-bulk", "forget-bulk", "pattern_health", "recall",
}  # fmt: skip


class FakeClock:
    """A clock tests move by hand: ``clock()`` returns ``clock.now``."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2030, 3, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now


class ToolCallResult:
    """A tool result: ``data`` (structured content), ``text`` (first text block), ``is_error``."""

    def __init__(self, raw) -> None:
        self.raw = raw
        self.is_error = bool(raw.is_error)
        self.data: dict[str, Any] | None = raw.structured_content
        self.text = "\n".join(getattr(c, "text", "") for c in raw.content)

    def __repr__(self) -> str:  # shown by pytest when an assert fails
        return f"ToolCallResult(is_error={self.is_error}, text={self.text[:500]!r})"


class SyncClient:
    """The official ``mcp.Client`` driven synchronously from a blocking portal."""

    def __init__(self, target, timeout: float = 60) -> None:
        self._portal_cm = start_blocking_portal()
        self.portal = self._portal_cm.__enter__()
        try:
            self._client_cm = self.portal.wrap_async_context_manager(
                Client(target, read_timeout_seconds=timeout)
            )
            self.client: Client = self._client_cm.__enter__()
        except BaseException:
            self._portal_cm.__exit__(*sys.exc_info())
            raise

    def call(self, name: str, arguments: Mapping[str, Any] | None = None) -> ToolCallResult:
        raw = self.portal.call(self.client.call_tool, name, dict(arguments or {}))
        return ToolCallResult(raw)

    def ok(self, name: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Call a tool that must succeed; returns its structured content."""
        res = self.call(name, arguments)
        assert not res.is_error, f"{name} failed: {res.text}"
        assert res.data is not None, f"{name} returned no structured content"
        return res.data

    def error(self, name: str, arguments: Mapping[str, Any] | None = None) -> str:
        """Call a tool that must fail; returns its error text."""
        res = self.call(name, arguments)
        assert res.is_error, f"{name} should have failed, got {res.data}"
        return res.text

    def list_tools(self):
        return self.portal.call(self.client.list_tools).tools

    def close(self) -> None:
        try:
            self._client_cm.__exit__(None, None, None)
        finally:
            self._portal_cm.__exit__(None, None, None)

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def visible_memories(client: SyncClient, **filters) -> dict[str, dict[str, Any]]:
    """Every memory recall-context returns (limit 200), by id."""
    data = client.ok("recall-context", {"limit": 200, **filters})
    out = {}
    for scope in ("private", "personal", "team", "public"):
        for m in data[scope]:
            assert m["scope"] == scope, m
            out[m["id"]] = m
    return out


def identity_env(
    home: Path,
    project: str,
    agent: str | None = None,
    *,
    subagent: str | None = None,
    parent: str | None = None,
    allowed: Path | None = None,
    embedder: str = "hash",
) -> dict[str, str]:
    env = {"PATTERN_HOME": str(home), "PATTERN_EMBEDDER": embedder, "PATTERN_PROJECT_ID": project}
    if agent:
        env["PATTERN_AGENT_ID"] = agent
    if subagent:
        env["PATTERN_SUBAGENT_TYPE"] = subagent
    if parent:
        env["PATTERN_PARENT_AGENT_ID"] = parent
    if allowed is not None:
        env["PATTERN_ALLOWED_DIRS"] = str(allowed)
    return env


def runtime_on(service: MemoryService, env: Mapping[str, str], cwd: Path) -> Runtime:
    """A runtime with the identity of ``env`` over an existing service (shared engine/clock)."""
    settings = Settings.from_env(env, cwd)
    rt = Runtime(settings, identity_from_env(env, settings.cwd), service)
    rt.model_ready.set()
    return rt


def clocked_service(home: Path, clock: FakeClock, store_url: str | None = None) -> MemoryService:
    return MemoryService(Engine(home, HashEmbedder(), store_url=store_url), clock=clock)


def in_process(runtime: Runtime) -> SyncClient:
    return SyncClient(create_server(runtime=runtime))


@contextmanager
def hash_store_client(tmp_path: Path, project: str = "proj", agent: str = "agent-a"):
    """An in-process client as ``agent`` of ``project`` over a fresh store in ``tmp_path/store``
    (hash embedder); the store is closed after."""
    svc = MemoryService(Engine(tmp_path / "store", HashEmbedder()))
    rt = runtime_on(svc, identity_env(tmp_path / "store", project, agent), tmp_path)
    try:
        with in_process(rt) as client:
            yield client
    finally:
        svc.engine.close()


@contextmanager
def hook_daemon(root: Path, secret: str, *, raise_server_exceptions: bool = True):
    """The daemon's hook routes over a fresh store in ``root/store`` (hash embedder), as
    ``agent-a`` of ``proj``: yields ``(service, client, http)``, an in-process MCP client and an
    HTTP test client that answers as the daemon would for a caller holding ``secret``."""
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from server.hooks.routes import hook_routes
    from server.service.prompting.hook_events import HookService

    svc = MemoryService(Engine(root / "store", HashEmbedder()))
    rt = runtime_on(svc, identity_env(root / "store", "proj", "agent-a"), root)
    hooks = HookService(svc, rt.graphs)
    app = Starlette(routes=hook_routes(hooks, secret))

    async def daemon(scope, receive, send):  # the daemon's auth middleware sets the caller
        if scope["type"] == "http":
            scope.setdefault("state", {})["pattern_identity"] = rt.identity
        await app(scope, receive, send)

    try:
        with (
            in_process(rt) as client,
            TestClient(daemon, raise_server_exceptions=raise_server_exceptions) as http,
        ):
            yield svc, client, http
    finally:
        hooks.close()
        svc.engine.close()


def serve_argv() -> list[str]:
    """``serve`` in-process over stdio: ``serve --standalone`` where plain ``serve`` bridges to
    a store daemon (which would outlive the test), else plain ``serve``."""
    from server.cli import build_parser

    try:
        build_parser().parse_args(["serve", "--standalone"])
    except SystemExit:
        return ["serve"]
    return ["serve", "--standalone"]


def serve_params(env: Mapping[str, str], cwd: Path) -> StdioServerParameters:
    """``pattern-memory serve`` (the installed console script when there is one)."""
    script = Path(sys.executable).with_name("pattern-memory")
    if script.exists():
        command, args = str(script), serve_argv()
    else:  # pragma: no cover - a non-editable checkout without the script
        command, args = sys.executable, ["-m", "server.cli", *serve_argv()]
    full_env = {"HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False", **env}
    if os.environ.get("PYTHONPATH"):
        full_env.setdefault("PYTHONPATH", os.environ["PYTHONPATH"])
    return StdioServerParameters(command=command, args=args, env=full_env, cwd=str(cwd))


def write_json(path: Path, doc: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def wait_for(cond, timeout: float = 20.0) -> bool:
    """Whether ``cond()`` comes true within ``timeout`` seconds (polled every 50 ms): the
    daemon's background worker (indexing, learning) finishes after the hook answered."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False
