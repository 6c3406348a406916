"""``pattern-memory serve``: a thin stdio <-> daemon bridge.

The bridge imports neither the model, nor chromadb, nor even the MCP SDK: it pumps the
client's newline-delimited JSON-RPC messages to the store's daemon (stateless streamable HTTP
with JSON responses) and writes the answers back. Each request carries the client's identity
as a trusted envelope (headers authenticated by the daemon's local secret).

- No daemon yet? It is started detached (``pattern-memory daemon``) and waited for.
- Daemon restarted or killed? The request is retried against the new one (started if
  needed). Retried ``tools/call`` requests carry an idempotency key when the tool accepts one,
  so a write whose answer was lost is never applied twice.
- Limitation: with stateless JSON responses the daemon cannot push notifications (progress,
  resource updates) through the bridge; connect over HTTP directly for those.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .auth import envelope_headers
from .daemonfiles import owner_alive, read_info, spawn_daemon
from .routing import LOCAL, Router, load_routes
from .service.config import Settings
from .service.identity import identity_from_env

START_TIMEOUT = 60.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


class DaemonLink:
    """Finds (or starts) the daemon of a store and posts JSON-RPC messages to it."""

    def __init__(self, home: Path, headers: dict[str, str], env: dict[str, str]) -> None:
        self.home = home
        self.env = env
        self.identity_headers = headers
        self.info: dict | None = None
        self.protocol_version: str | None = None
        self.last_spawn = -1e9  # time.monotonic() of the last daemon started for this store
        self._lock = threading.Lock()
        self._conns = threading.local()  # each bridge thread's kept-alive connection

    def _healthy(self, info: dict) -> bool:
        try:
            conn = http.client.HTTPConnection(info["host"], info["port"], timeout=2)
            conn.request("GET", "/health")
            ok = conn.getresponse().status == 200
            conn.close()
            return ok
        except OSError:
            return False

    def _spawn(self) -> None:
        spawn_daemon(str(self.home), self.env)

    def connect(self, force_new: bool = False) -> dict:
        with self._lock:
            if self.info and not force_new:
                return self.info
            self.home.mkdir(parents=True, exist_ok=True)
            deadline = time.monotonic() + START_TIMEOUT
            while time.monotonic() < deadline:
                info = read_info(self.home)
                if info and _alive(info.get("pid", -1)) and self._healthy(info):
                    self.info = info
                    return info
                if time.monotonic() - self.last_spawn > 3.0 and not owner_alive(self.home):
                    self._spawn()  # a losing racer exits: the lock admits one owner
                    self.last_spawn = time.monotonic()
                time.sleep(0.05)
            raise ConnectionError(f"no pattern-memory daemon answered for {self.home}")

    def _send(self, info: dict, body: bytes, headers: dict) -> tuple:
        """POST on this thread's kept-alive connection to the daemon (a new TCP connection per
        message cost the bridge and the daemon's HTTP server a connection set-up each). A
        kept connection the daemon has closed meanwhile (idle, or a restart) is replaced once
        at once; the caller retries anything else."""
        key = (info["host"], info["port"], info.get("pid"))
        kept = getattr(self._conns, "conn", None)
        for fresh in (False, True):
            if fresh or kept is None or kept[0] != key:
                if kept is not None:
                    kept[1].close()
                kept = (key, http.client.HTTPConnection(info["host"], info["port"], timeout=600))
                self._conns.conn = kept
            conn = kept[1]
            try:
                conn.request("POST", "/mcp", body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                conn.close()
                if fresh:
                    raise
                continue  # closed while idle: a new connection, once
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                self._conns.conn = None
                raise OSError(f"daemon connection: {exc}") from exc
            if resp.will_close:
                conn.close()
                self._conns.conn = None
            return resp, data
        raise OSError("unreachable")  # pragma: no cover

    def post(self, message: dict) -> dict | None:
        body = json.dumps(message).encode()
        for attempt in range(3):
            info = self.connect(force_new=attempt > 0)
            headers = {
                **envelope_headers_from(self.identity_headers, info["secret"]),
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
            }
            if self.protocol_version:
                headers["MCP-Protocol-Version"] = self.protocol_version
            try:
                resp, data = self._send(info, body, headers)
            except OSError:
                time.sleep(0.1 * (attempt + 1))
                continue
            if resp.status == 202 or not data:
                return None
            if resp.headers.get("content-type", "").startswith("text/event-stream"):
                return _last_sse_message(data)
            return json.loads(data)
        raise ConnectionError("the pattern-memory daemon did not answer")


class RemoteLink:
    """A remote daemon (``daemon --http``) reached with a bearer token."""

    def __init__(self, url: str, token: str | None, headers: dict[str, str]) -> None:
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        self.https = parts.scheme == "https"
        self.host, self.port = parts.hostname, parts.port or (443 if self.https else 80)
        self.path = parts.path or "/mcp"
        self.headers = {
            "X-Pattern-Project": headers.get("X-Pattern-Project", ""),
            "Authorization": f"Bearer {token or ''}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        self.protocol_version: str | None = None

    def post(self, message: dict) -> dict | None:
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        last: Exception | None = None
        for attempt in range(3):
            try:
                conn = cls(self.host, self.port, timeout=600)
                conn.request(
                    "POST", self.path, body=json.dumps(message).encode(), headers=self.headers
                )
                resp = conn.getresponse()
                data = resp.read()
                conn.close()
            except OSError as exc:
                last = exc
                time.sleep(0.2 * (attempt + 1))
                continue
            if resp.status == 401:
                raise ConnectionError(f"{self.host}: 401 unauthorized (check the route's token)")
            if resp.status == 202 or not data:
                return None
            if resp.headers.get("content-type", "").startswith("text/event-stream"):
                return _last_sse_message(data)
            return json.loads(data)
        raise ConnectionError(f"remote store {self.host}:{self.port} did not answer: {last}")


def envelope_headers_from(identity_headers: dict[str, str], secret: str) -> dict[str, str]:
    return {**identity_headers, "Authorization": f"Bearer {secret}"}


def _last_sse_message(data: bytes) -> dict | None:
    out = None
    for line in data.decode().splitlines():
        if line.startswith("data:"):
            payload = line[5:].strip()
            if payload:
                out = json.loads(payload)
    return out


CACHED_METHODS = ("initialize", "server/discover", "tools/list", "resources/list",
                  "resources/templates/list", "prompts/list")  # fmt: skip


def code_fingerprint() -> str:
    """Changes whenever the server code changes (sizes + mtimes of its modules)."""
    root = Path(__file__).resolve().parent.parent
    parts = []
    for pkg in ("server", "server/service", "graph", "ingest", "retrieval"):
        try:
            entries = sorted(os.scandir(root / pkg), key=lambda e: e.name)
        except FileNotFoundError:
            continue
        parts += [f"{pkg}/{e.name}:{e.stat().st_size}:{e.stat().st_mtime_ns}"
                  for e in entries if e.name.endswith(".py")]  # fmt: skip
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


class HandshakeCache:
    """The daemon's answers to the handshake and list calls, which depend only on the code:
    replayed at once on the next start, so a client's handshake never waits for a daemon to
    start (the daemon is started in the background meanwhile)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / f"handshake-{code_fingerprint()}.json"
        try:
            self.data = json.loads(self.path.read_text())
        except (OSError, json.JSONDecodeError):
            self.data = {}

    @staticmethod
    def key(message: dict) -> str | None:
        method = message.get("method")
        if method not in CACHED_METHODS:
            return None
        params = {k: v for k, v in (message.get("params") or {}).items()
                  if k not in ("clientInfo", "_meta", "capabilities")}  # fmt: skip
        return method + json.dumps(params, sort_keys=True)

    def get(self, message: dict) -> dict | None:
        key = self.key(message)
        return self.data.get(key) if key else None

    def put(self, message: dict, result: dict) -> None:
        key = self.key(message)
        if key and self.data.get(key) != result:
            self.data[key] = result
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
                tmp.write_text(json.dumps(self.data))
                os.replace(tmp, self.path)
            except OSError:
                pass  # a cache only


class Bridge:
    def __init__(
        self, link: DaemonLink, router: Router | None = None, cache: HandshakeCache | None = None
    ) -> None:
        self.link = link
        self.router = router
        self.cache = cache
        self.out_lock = threading.Lock()
        self.idempotent_tools: set[str] = set()

    def learn(self, method: str | None, result: dict) -> None:
        if method == "initialize" and "protocolVersion" in result:
            self.link.protocol_version = result["protocolVersion"]
        if method == "tools/list":
            for tool in result.get("tools", []):
                if "idempotencyKey" in (tool.get("inputSchema") or {}).get("properties", {}):
                    self.idempotent_tools.add(tool["name"])

    def _warm(self) -> None:
        try:
            self.link.connect()
        except (ConnectionError, OSError):
            pass  # reported on the first call

    def write(self, message: dict) -> None:
        line = json.dumps(message, separators=(",", ":"))
        with self.out_lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def handle(self, message: dict) -> None:
        method = message.get("method")
        if method == "tools/call":
            params = message.setdefault("params", {})
            args = params.setdefault("arguments", {}) or {}
            if params.get("name") in self.idempotent_tools and "idempotencyKey" not in args:
                args["idempotencyKey"] = f"bridge-{uuid.uuid4()}"
                params["arguments"] = args
        cached = self.cache.get(message) if self.cache and "id" in message else None
        if cached is not None:  # {"result": …} or {"error": …} (e.g. discover on a legacy server)
            self.learn(method, cached.get("result") or {})
            self.write({"jsonrpc": "2.0", "id": message["id"], **cached})
            return
        try:
            if method == "tools/call" and self.router is not None:
                answer = self.router.call(message)
            else:
                answer = self.link.post(message)
        except (ConnectionError, OSError, ValueError) as exc:
            if "id" in message:
                self.write({"jsonrpc": "2.0", "id": message["id"],
                            "error": {"code": -32000, "message": f"pattern-memory daemon unavailable: {exc}"}})  # fmt: skip
            return
        if answer is None:
            return
        result = answer.get("result")
        if result is not None:
            self.learn(method, result)
        if self.cache and ("result" in answer or "error" in answer):
            self.cache.put(message, {k: answer[k] for k in ("result", "error") if k in answer})
        self.write(answer)

    def run(self) -> int:
        # warm the daemon up while the client handshakes (possibly from the cache)
        threading.Thread(target=self._warm, daemon=True).start()
        with ThreadPoolExecutor(max_workers=8, thread_name_prefix="bridge") as pool:
            for line in sys.stdin:
                line = line.strip()
                if not line:
                    continue
                try:
                    message = json.loads(line)
                except json.JSONDecodeError:
                    self.write({"jsonrpc": "2.0", "id": None,
                                "error": {"code": -32700, "message": "parse error"}})  # fmt: skip
                    continue
                if message.get("method") in ("initialize", "tools/list"):
                    self.handle(message)  # in order: later calls depend on them
                else:
                    pool.submit(self.handle, message)
        return 0


def run_bridge(env: dict[str, str] | None = None, spawned_at: float | None = None) -> int:
    """Pump stdio to the store's daemon; ``spawned_at``: when :func:`~server.daemonfiles.
    start_early` started it (the bridge waits for that one rather than starting another)."""
    import signal

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # daemons we start are reaped, never zombies
    env = dict(os.environ if env is None else env)
    settings = Settings.from_env(env)
    who = identity_from_env(env, settings.cwd)
    headers = {k: v for k, v in envelope_headers(who, "").items() if k != "Authorization"}
    env["PATTERN_HOME"] = str(settings.home)
    local = DaemonLink(settings.home, headers, env)
    if spawned_at is not None:
        local.last_spawn = spawned_at
    headers = {k: v for k, v in headers.items() if k != "X-Pattern-Root"}  # local only
    table = load_routes(env)
    router = None
    if table is not None:
        links: dict = {LOCAL: local}
        for route in table.routes:
            if route.name != LOCAL:
                links[route.name] = RemoteLink(route.url, route.bearer(env), headers)
        router = Router(table, links)
    cache_dir = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pattern-memory"
    return Bridge(local, router, HandshakeCache(cache_dir)).run()
