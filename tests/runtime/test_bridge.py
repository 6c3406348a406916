"""The ``serve`` bridge's start: the handshake is answered from ``server/http/handshake.json``
without waiting for a daemon, that file matches the server, and the bridge stays light (the
daemon's forwarding, restarts and routes are tested in test_daemon.py and test_routing.py)."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from server.http import handshake
from server.http.bridge import Bridge, StaticHandshake, Workers
from server.mcp.app import create_server
from tests.mcp_util import FakeClock, SyncClient, clocked_service, identity_env, runtime_on

ROOT = Path(__file__).resolve().parents[2]
TOOL_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")


def static_tools() -> dict[str, dict]:
    tools = handshake.load()["answers"]["tools/list"]["result"]["tools"]
    return {t["name"]: t for t in tools}


def test_the_static_tool_list_is_the_servers(tmp_path):
    """Names, descriptions and schemas as the real server lists them (in-process client): a
    tool added, renamed, re-described or given another schema fails here until
    ``python -m server.http.handshake`` is run."""
    service = clocked_service(tmp_path, FakeClock())
    rt = runtime_on(service, identity_env(tmp_path, "p1", "a1"), tmp_path)
    try:
        with SyncClient(create_server(runtime=rt)) as client:
            live = {
                t.name: t.model_dump(mode="json", by_alias=True, exclude_none=True)
                for t in client.list_tools()
            }
            info, instructions = client.client.server_info, client.client.instructions
    finally:
        service.engine.close()
    static = static_tools()
    assert sorted(static) == sorted(live), "run python -m server.http.handshake"
    for name, tool in live.items():
        for field in TOOL_FIELDS:
            assert static[name].get(field) == tool.get(field), f"{name}.{field} drifted"
    init = handshake.load()["initialize"]
    assert init["serverInfo"] == {"name": info.name, "version": info.version}
    assert init["instructions"] == instructions


def test_the_handshake_file_is_current():
    """Every static answer (initialize, the lists, discover) is what the daemon's app answers
    now; python -m server.http.handshake rewrites the file."""
    assert handshake.dump(handshake.generate()) == handshake.FILE.read_text(encoding="utf-8")


def test_static_answers_follow_the_protocol():
    static = StaticHandshake.load()
    data = handshake.load()
    init = {"capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    for version in data["protocolVersions"]:
        got = static.get({"id": 1, "method": "initialize",
                          "params": {**init, "protocolVersion": version}})  # fmt: skip
        assert got == {"result": {"protocolVersion": version, **data["initialize"]}}
    unknown = {**init, "protocolVersion": "1900-01-01"}
    got = static.get({"id": 1, "method": "initialize", "params": unknown})
    assert got["result"]["protocolVersion"] == data["latestProtocolVersion"]
    assert static.get({"id": 1, "method": "initialize", "params": {}}) is None  # the daemon's
    assert static.get({"id": 2, "method": "tools/list"}) == data["answers"]["tools/list"]
    assert static.get({"id": 2, "method": "tools/list", "params": {"_meta": {"k": 1}}})
    assert static.get({"id": 2, "method": "tools/list", "params": {"cursor": "x"}}) is None
    modern = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
    assert static.get({"id": 2, "method": "tools/list", "params": modern}) is None
    assert "error" in static.get({"id": 3, "method": "server/discover", "params": modern})
    assert static.get({"id": 4, "method": "tools/call", "params": {"name": "recall"}}) is None


class FakeLink:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.protocol_version = None
        self.posted: list[dict] = []

    def connect(self):
        return {}

    def post(self, message):
        if self.fail:
            raise ConnectionError("no pattern-memory daemon answered")
        self.posted.append(message)
        return {"jsonrpc": "2.0", "id": message.get("id"), "result": {"ok": True}}


def run_bridge_on(bridge: Bridge, lines: list[dict], monkeypatch) -> list[dict]:
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(json.dumps(m) + "\n" for m in lines)))
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    assert bridge.run() == 0
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_the_bridge_answers_the_handshake_itself_and_forwards_the_rest(monkeypatch):
    link = FakeLink()
    bridge = Bridge(link, None, StaticHandshake.load())
    init = {"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}  # fmt: skip
    answers = run_bridge_on(bridge, [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "remember", "arguments": {"content": "x"}}},
    ], monkeypatch)  # fmt: skip
    by_id = {a["id"]: a for a in answers}
    assert by_id[1]["result"]["protocolVersion"] == "2025-06-18"
    assert link.protocol_version == "2025-06-18"  # sent to the daemon from now on
    assert len(by_id[2]["result"]["tools"]) == len(static_tools())
    assert by_id[3]["result"] == {"ok": True}
    assert [m.get("method") for m in link.posted] == ["notifications/initialized", "tools/call"]
    # remember takes an idempotency key: the bridge adds one (known from the static list)
    assert link.posted[1]["params"]["arguments"]["idempotencyKey"].startswith("bridge-")


def test_a_missing_daemon_is_an_error_answer_not_a_hang(monkeypatch):
    bridge = Bridge(FakeLink(fail=True), None, StaticHandshake.load())
    answers = run_bridge_on(bridge, [
        {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
         "params": {"name": "recall", "arguments": {"query": "q"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ], monkeypatch)  # fmt: skip
    assert answers == [{"jsonrpc": "2.0", "id": 7, "error": {"code": -32000,
                        "message": "pattern-memory daemon unavailable: no pattern-memory daemon "
                                   "answered"}}]  # fmt: skip


def test_workers_run_every_job_before_close_returns():
    done, lock = [], threading.Lock()

    def job(i):
        time.sleep(0.01)
        with lock:
            done.append(i)

    pool = Workers(3)
    for i in range(20):
        pool.submit(job, i)
    pool.close()
    assert sorted(done) == list(range(20))
    assert len(pool.threads) <= 3


def serve_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "PATTERN_HOME": str(tmp_path / "store"), "PATTERN_EMBEDDER": "hash",
            "PATTERN_PROJECT_ID": "p1", "PATTERN_AGENT_ID": "a1",
            "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT), **extra}  # fmt: skip


@pytest.fixture
def unreachable_store(tmp_path):
    """A store whose lock is held by this test: no daemon starts and none answers."""
    home = tmp_path / "store"
    home.mkdir()
    fd = os.open(home / "daemon.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    yield home
    os.close(fd)


def test_serve_answers_the_handshake_while_no_daemon_answers(tmp_path, unreachable_store):
    """Before any daemon serves (here: none ever will), ``pattern-memory serve`` answers
    discover, initialize and tools/list, with the server's own answers."""
    proc = subprocess.Popen([sys.executable, "-m", "server.cli", "serve"], cwd=tmp_path,
                            env=serve_env(tmp_path), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)  # fmt: skip
    data = handshake.load()
    init = {"protocolVersion": "2025-03-26", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}  # fmt: skip
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
    ]  # fmt: skip
    try:
        proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        proc.stdin.flush()
        answers: dict = {}
        timer = threading.Timer(20, proc.kill)  # a bridge waiting for the daemon: fails here
        timer.start()
        try:
            while len(answers) < 3:
                line = proc.stdout.readline()
                assert line, "serve closed its output before answering the handshake"
                answer = json.loads(line)
                answers[answer["id"]] = answer
        finally:
            timer.cancel()
    finally:
        proc.kill()
        proc.wait()
    assert answers[1]["error"] == data["answers"]["server/discover"]["error"]
    assert answers[2]["result"] == {"protocolVersion": "2025-03-26", **data["initialize"]}
    assert answers[3]["result"] == data["answers"]["tools/list"]["result"]
    assert not (unreachable_store / "daemon.json").exists()


@pytest.mark.parametrize("name, value", [("PATTERN_EMBEDDER", "bogus"),
                                         ("PATTERN_PG_POLL_MS", "nan")])  # fmt: skip
def test_a_bad_setting_is_refused_before_the_handshake(tmp_path, name, value):
    proc = subprocess.run([sys.executable, "-m", "server.cli", "serve"], cwd=tmp_path,
                          env=serve_env(tmp_path, **{name: value}), input=b"",
                          capture_output=True, timeout=60)  # fmt: skip
    assert proc.returncode == 2
    assert f"{name}={value!r}".encode() in proc.stderr
    assert proc.stdout == b""


def test_the_bridge_imports_neither_pydantic_nor_the_sdk(tmp_path):
    """What ``serve`` loads before it answers: the standard library and our own stdlib-only
    modules (pydantic, numpy, the MCP SDK or http.client would cost 0.1-0.5 s per start)."""
    code = (
        "import sys, os\n"
        "from server import cli\nfrom server.http import bridge\n"
        "bridge.make_bridge(dict(os.environ))\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=serve_env(tmp_path),
                         capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    heavy = {"pydantic", "numpy", "mcp", "mcp_types", "anyio", "httpx", "platformdirs", "chromadb"}
    assert sorted(m for m in out if m.split(".")[0] in heavy) == []
    # exceptions, the store's file modes, the vector index thresholds' parsers and the
    # replica's polling period's (all standard library only)
    ours = [m for m in out if m.startswith("retrieval.")]
    assert ours == ["retrieval.errors", "retrieval.pg", "retrieval.pg.polling",
                    "retrieval.storage", "retrieval.storage.private", "retrieval.vector",
                    "retrieval.vector.across", "retrieval.vector.index_size"]  # fmt: skip
    assert "http.client" not in out and "concurrent.futures" not in out
    assert "server.service.core.config" not in out and "server.http.auth" not in out


def test_routes_are_still_loaded_by_the_bridge(tmp_path):
    routes = tmp_path / "routes.json"
    routes.write_text(json.dumps({"routes": [{"name": "shared", "scopes": ["public"],
                                              "url": "http://127.0.0.1:1/mcp"}],
                                  "default": "local"}))  # fmt: skip
    from server.http.bridge import make_bridge

    env = serve_env(tmp_path, PATTERN_ROUTES=str(routes))
    bridge = make_bridge(env)
    assert bridge.router is not None
    assert bridge.link.identity_headers["X-Pattern-Project"] == "p1"
    assert env["PATTERN_HOME"] == str(tmp_path / "store")


def test_serve_starts_without_argparse_or_pydantic(tmp_path, unreachable_store):
    """``pattern-memory serve`` as clients start it (``-X importtime`` lists every module it
    loaded before its input closed)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "server.cli", "serve"],
                          cwd=tmp_path, env=serve_env(tmp_path), input=b"",
                          capture_output=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = {line.split("|")[-1].strip() for line in proc.stderr.decode().splitlines()}
    assert "server.http.bridge" in loaded
    assert not loaded & {"argparse", "pydantic", "numpy", "mcp", "http.client"}
