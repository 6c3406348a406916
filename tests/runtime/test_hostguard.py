"""DNS-rebinding protection (server/http/hostguard.py) and ``logging/setLevel``, through the real
daemon over HTTP, the guard on a plain ASGI app, and the in-process server."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import warnings

import anyio
import mcp
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from server.http.daemon import read_info
from server.http.hostguard import HostGuard, guard_settings
from server.mcp.app import create_server
from server.service.core.errors import InvalidInput
from tests.mcp_util import identity_env, runtime_on
from tests.runtime.test_daemon import daemon, start_daemon, stop  # noqa: F401  (the fixture)

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "1"}}}  # fmt: skip


def request(info: dict, headers: dict, message: dict | None = INIT, path: str = "/mcp"):
    """POST ``message`` (or GET ``path`` when None) with exactly these Host/Origin headers."""
    conn = http.client.HTTPConnection(info["host"], info["port"], timeout=60)
    if message is None:
        conn.request("GET", path, headers=headers)
    else:
        conn.request("POST", path, json.dumps(message), {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream", **headers})  # fmt: skip
    resp = conn.getresponse()
    body = resp.read().decode()
    conn.close()
    return resp.status, body


def secret(info: dict) -> dict:
    return {"Authorization": f"Bearer {info['secret']}", "X-Pattern-Agent": "a1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(process, daemon.json) of one daemon with the default options, for the tests that only
    send it requests (a refused one changes nothing; a log level only what it logs)."""
    home = tmp_path_factory.mktemp("served")
    proc = start_daemon(home)
    try:
        yield proc, read_info(home)
    finally:
        stop(proc)


def test_foreign_host_is_rejected_on_every_route(served):
    proc, info = served
    evil = {"Host": "evil.example.com", "Origin": "http://evil.example.com"}
    status, body = request(info, {**secret(info), **evil})  # even with a valid credential
    assert status == 421 and "result" not in body
    status, body = request(info, {"Host": f"evil.example.com:{info['port']}"}, None, "/health")
    assert status == 421 and str(proc.pid) not in body
    status, _ = request(
        info, {**secret(info), "Host": f"127.0.0.1.evil.example.com:{info['port']}"}
    )
    assert status == 421


def test_foreign_origin_is_rejected(served):
    proc, info = served
    host = {"Host": f"127.0.0.1:{info['port']}"}
    status, body = request(info, {**secret(info), **host, "Origin": "http://evil.example.com"})
    assert status == 403 and "result" not in body
    status, _ = request(info, {**host, "Origin": "https://evil.example.com:443"}, None, "/health")
    assert status == 403


def test_loopback_names_are_accepted(served):
    proc, info = served
    port = info["port"]
    for host, origin in [(f"127.0.0.1:{port}", None), (f"localhost:{port}", f"http://localhost:{port}"),
                         (f"127.0.0.1:{port}", f"http://127.0.0.1:{port}")]:  # fmt: skip
        headers = {**secret(info), "Host": host, **({"Origin": origin} if origin else {})}
        status, body = request(info, headers)
        assert status == 200, (host, origin, body)
        assert json.loads(body)["result"]["serverInfo"]["name"] == "pattern-memory"
    status, body = request(info, {"Host": f"localhost:{port}"}, None, "/health")
    assert status == 200 and json.loads(body)["pid"] == proc.pid


def test_allowed_host_option(daemon, tmp_path):  # noqa: F811
    port = free_port()
    proc, info = daemon("--http", f"127.0.0.1:{port}", "--allowed-host", "memory.example.com",
                        "--allowed-host", "mem.example.org:8443")  # fmt: skip
    ok = [({"Host": "memory.example.com"}),
          ({"Host": "memory.example.com:9000", "Origin": "https://memory.example.com"}),
          ({"Host": "mem.example.org:8443", "Origin": "https://mem.example.org:8443"})]  # fmt: skip
    for headers in ok:
        status, body = request(info, {**secret(info), **headers})
        assert status == 200, (headers, body)
    bad = [{"Host": "other.example.com"}, {"Host": "mem.example.org:9999"},
           {"Host": "memory.example.com", "Origin": "https://evil.example.com"}]  # fmt: skip
    assert [request(info, {**secret(info), **h})[0] for h in bad] == [421, 421, 403]


def test_a_malformed_allowed_host_is_refused_at_start(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "server.cli", "daemon", "--home", str(tmp_path),
         "--allowed-host", "https://memory.example.com/mcp"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2 and "invalid_input" in out.stderr and "--allowed-host" in out.stderr
    assert not (tmp_path / "daemon.json").exists()


def test_a_wildcard_bound_daemon_is_announced_at_a_loopback_address():
    """daemon.json tells local bridges where to connect: for ``--http 0.0.0.0:PORT`` that is
    127.0.0.1, whose Host header the guard accepts (``0.0.0.0`` it would refuse)."""
    from server.http.daemon import local_address

    assert local_address("0.0.0.0") == "127.0.0.1" and local_address("::") == "::1"
    assert local_address("10.0.0.5") == "10.0.0.5"
    hosts = guard_settings("0.0.0.0").allowed_hosts
    assert "127.0.0.1:*" in hosts and not any(h.startswith("0.0.0.0") for h in hosts)


def test_guard_settings():
    s = guard_settings("127.0.0.1")
    assert s.enable_dns_rebinding_protection
    assert {"127.0.0.1:*", "localhost:*", "[::1]:*"} <= set(s.allowed_hosts)
    assert "http://localhost:*" in s.allowed_origins
    assert "10.0.0.5" in guard_settings("10.0.0.5").allowed_hosts  # the bound address
    assert not any("0.0.0.0" in h for h in guard_settings("0.0.0.0").allowed_hosts)
    with pytest.raises(InvalidInput):
        guard_settings("0.0.0.0", ["*"])


def test_the_guard_wraps_every_route_of_an_app():
    """What the dashboard relies on: a route mounted beside /mcp (here /ui) is guarded too."""
    app = Starlette(routes=[Route("/ui", lambda request: PlainTextResponse("dashboard"))])
    guarded = HostGuard(app, guard_settings("127.0.0.1", ["memory.example.com"]))
    with TestClient(guarded, base_url="http://127.0.0.1:8765") as client:
        assert client.get("/ui").text == "dashboard"
        assert client.get("/ui", headers={"Host": "memory.example.com"}).status_code == 200
        assert client.get("/ui", headers={"Host": "evil.example.com"}).status_code == 421
        evil_origin = {"Origin": "http://evil.example.com"}
        assert client.post("/ui", headers=evil_origin).status_code == 403


def test_logging_set_level_is_answered_by_the_daemon(served):
    proc, info = served
    status, body = request(info, secret(info))
    assert json.loads(body)["result"]["capabilities"].get("logging") == {}
    msg = {"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "info"}}
    status, body = request(info, secret(info), msg)
    assert status == 200 and json.loads(body) == {"jsonrpc": "2.0", "id": 2, "result": {}}
    bad = {**msg, "params": {"level": "loud"}}
    status, body = request(info, secret(info), bad)
    assert json.loads(body)["error"]["code"] == -32602  # invalid params


def test_logging_set_level_filters_the_in_process_servers_log_messages(tmp_path):
    """In process the level holds for the connection: after setLevel("warning") an info
    message is dropped and an error message delivered."""
    from retrieval.embedding.embedder import HashEmbedder
    from retrieval.engine import Engine
    from server.mcp import client_logging
    from server.service.memories.memory import MemoryService

    svc = MemoryService(Engine(tmp_path / "home", HashEmbedder()))
    rt = runtime_on(svc, identity_env(tmp_path / "home", "p1", "a1"), tmp_path)
    server = create_server(runtime=rt)
    levels = client_logging.register(server)  # the handler create_server installed, re-made

    async def speak(ctx: mcp.server.mcpserver.Context) -> str:
        await levels.log(ctx, "info", "an info line")
        await levels.log(ctx, "error", "an error line")
        return "spoke"

    server.add_tool(speak, name="speak")
    got: list[tuple[str, str]] = []

    async def on_log(params) -> None:
        got.append((params.level, params.data))

    async def main():
        with anyio.fail_after(30):
            async with mcp.Client(server, mode="legacy", logging_callback=on_log) as client:
                assert client.session.server_capabilities.logging is not None
                await client.call_tool("speak", {})
                assert got == [("info", "an info line"), ("error", "an error line")]
                got.clear()
                with warnings.catch_warnings():  # deprecated at 2026-07-28, still in use
                    warnings.simplefilter("ignore")
                    assert await client.set_logging_level("warning") is not None
                await client.call_tool("speak", {})
                assert got == [("error", "an error line")]

    try:
        anyio.run(main)
    finally:
        svc.engine.close()
