"""``pattern-memory serve``: a thin stdio <-> daemon bridge.

The bridge imports neither the model, nor chromadb, nor the MCP SDK, nor pydantic: it pumps
the client's newline-delimited JSON-RPC messages to the store's daemon (stateless streamable
HTTP with JSON responses) and writes the answers back. Each request carries the client's
identity as a trusted envelope (headers authenticated by the daemon's local secret).

- ``initialize``, ``tools/list`` and the other list calls are answered at once from
  ``server/http/handshake.json`` (the daemon's own answers, generated from the code by
  ``python -m server.http.handshake`` and checked by a test), so a client's handshake never waits
  for the daemon to start; the daemon is started in the background meanwhile.
- No daemon yet? It is started detached (``pattern-memory daemon``) and waited for.
- Daemon restarted or killed? The request is retried against the new one (started if
  needed). Retried ``tools/call`` requests carry an idempotency key when the tool accepts one,
  so a write whose answer was lost is never applied twice.
- Limitation: with stateless JSON responses the daemon cannot push notifications (progress,
  resource updates) through the bridge; connect over HTTP directly for those.

Start-up cost matters here (a client pays it at every start): standard library only, and
``http.client`` (its email parser) only in the thread that reaches the daemon.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from retrieval.storage import private

from .daemonfiles import owner_alive, read_info, spawn_daemon

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

    def __init__(self, home, headers: dict[str, str], env: dict[str, str]) -> None:
        self.home = home  # str or Path
        self.env = env
        self.identity_headers = headers
        self.info: dict | None = None
        self.protocol_version: str | None = None
        self.last_spawn = -1e9  # time.monotonic() of the last daemon started for this store
        self._lock = threading.Lock()
        self._conns = threading.local()  # each bridge thread's kept-alive connection

    def _healthy(self, info: dict) -> bool:
        import http.client

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
            private.folder(self.home)
            deadline = time.monotonic() + START_TIMEOUT
            while time.monotonic() < deadline:
                info = read_info(self.home)
                if info and _alive(info.get("pid", -1)) and self._healthy(info):
                    self.info = info
                    return info
                if time.monotonic() - self.last_spawn > 3.0 and not owner_alive(self.home):
                    self._spawn()  # a losing racer exits: the lock admits one owner
                    self.last_spawn = time.monotonic()
                time.sleep(0.01)  # a file read: polling often costs nothing
            raise ConnectionError(f"no pattern-memory daemon answered for {self.home}")

    def _send(self, info: dict, body: bytes, headers: dict) -> tuple:
        """POST on this thread's kept-alive connection to the daemon (a new TCP connection per
        message cost the bridge and the daemon's HTTP server a connection set-up each). A
        kept connection the daemon has closed meanwhile (idle, or a restart) is replaced once
        at once; the caller retries anything else."""
        import http.client

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
        import http.client

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


class StaticHandshake:
    """The answers the bridge gives itself (``server/http/handshake.json``, see
    :mod:`server.http.handshake`): ``initialize`` (the client's protocol version when the SDK
    negotiates it, else the newest, as the daemon answers), ``server/discover`` and the first
    page of each list call. A call with other parameters (a cursor, a per-request envelope)
    goes to the daemon."""

    def __init__(self, data: dict) -> None:
        self.versions = data["protocolVersions"]
        self.latest = data["latestProtocolVersion"]
        self.initialize = data["initialize"]
        self.answers = data["answers"]

    @classmethod
    def load(cls, path: str | None = None) -> StaticHandshake | None:
        path = path or os.path.join(os.path.dirname(os.path.abspath(__file__)), "handshake.json")
        try:
            with open(path, encoding="utf-8") as fh:
                return cls(json.load(fh))
        except (OSError, ValueError, KeyError, TypeError):
            return None  # no file: every call goes to the daemon

    def get(self, message: dict) -> dict | None:
        """``{"result": …}`` or ``{"error": …}`` for ``message``, or None (ask the daemon)."""
        method = message.get("method")
        params = message.get("params") or {}
        if not isinstance(params, dict):
            return None
        if method == "initialize":
            requested = params.get("protocolVersion")
            if not isinstance(requested, str):
                return None  # malformed: the daemon's validation answers
            version = requested if requested in self.versions else self.latest
            return {"result": {"protocolVersion": version, **self.initialize}}
        if method == "server/discover":
            return self.answers.get(method)
        meta = params.get("_meta") or {}
        if set(params) - {"_meta"} or not isinstance(meta, dict):
            return None
        if "io.modelcontextprotocol/protocolVersion" in meta:
            return None  # a per-request envelope: the daemon answers it
        return self.answers.get(method)

    def tools(self) -> list[dict]:
        return ((self.answers.get("tools/list") or {}).get("result") or {}).get("tools", [])


class Workers:
    """Up to ``n`` threads that run submitted calls (``concurrent.futures`` costs more to
    import than the bridge's whole handshake); :meth:`close` waits for the queued ones."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.jobs: list = []
        self.threads: list[threading.Thread] = []
        self.idle = 0
        self.closed = False
        self.cv = threading.Condition()

    def submit(self, fn, *args) -> None:
        with self.cv:
            self.jobs.append((fn, args))
            if self.idle == 0 and len(self.threads) < self.n:
                t = threading.Thread(target=self._work, name=f"bridge-{len(self.threads)}")
                t.daemon = True
                self.threads.append(t)
                t.start()
            else:
                self.cv.notify()

    def _work(self) -> None:
        while True:
            with self.cv:
                while not self.jobs and not self.closed:
                    self.idle += 1
                    self.cv.wait()
                    self.idle -= 1
                if not self.jobs:
                    return
                fn, args = self.jobs.pop(0)
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 - one message's failure never stops the bridge
                pass

    def close(self) -> None:
        with self.cv:
            self.closed = True
            self.cv.notify_all()
        for t in list(self.threads):
            t.join()


class Bridge:
    def __init__(
        self,
        link: DaemonLink,
        router=None,
        static: StaticHandshake | None = None,
    ) -> None:
        self.link = link
        self.router = router
        self.static = static
        self.out_lock = threading.Lock()
        self.idempotent_tools: set[str] = set()
        if static is not None:
            self.learn("tools/list", {"tools": static.tools()})

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
                import uuid

                args["idempotencyKey"] = f"bridge-{uuid.uuid4()}"
                params["arguments"] = args
        known = self.static.get(message) if self.static and "id" in message else None
        if known is not None:  # {"result": …} or {"error": …} (discover on a legacy server)
            self.learn(method, known.get("result") or {})
            self.write({"jsonrpc": "2.0", "id": message["id"], **known})
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
        self.write(answer)

    def run(self) -> int:
        # warm the daemon up while the client handshakes (answered from the static file)
        threading.Thread(target=self._warm, daemon=True).start()
        pool = Workers(8)
        try:
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
        finally:
            pool.close()
        return 0


def make_bridge(env: dict[str, str], spawned_at: float | None = None) -> Bridge:
    """The bridge for this environment's store and identity, with the standard library only:
    the settings are checked (a bad value raises :class:`~server.service.core.errors.InvalidInput`,
    as the daemon would), the identity is derived as the service derives it."""
    from server.service.core import envsettings
    from server.service.core.ids import identity_fields, project_root, store_home

    from ..hooks.hookclient import envelope  # the hook client's envelope, stdlib only

    envsettings.check(env)
    home = store_home(env)
    cwd = os.path.realpath(os.getcwd())
    who = {**identity_fields(env, cwd), "root": project_root(cwd)}
    headers = {k: v for k, v in envelope(who, "").items() if k != "Authorization"}
    env["PATTERN_HOME"] = home
    local = DaemonLink(home, headers, env)
    if spawned_at is not None:
        local.last_spawn = spawned_at
    router = None
    if env.get("PATTERN_ROUTES", "").strip():
        from .routing import LOCAL, Router, load_routes

        table = load_routes(env)
        remote_headers = {k: v for k, v in headers.items() if k != "X-Pattern-Root"}  # local only
        links: dict = {LOCAL: local}
        for route in table.routes:
            if route.name != LOCAL:
                links[route.name] = RemoteLink(route.url, route.bearer(env), remote_headers)
        router = Router(table, links)
    return Bridge(local, router, StaticHandshake.load())


def run_bridge(env: dict[str, str] | None = None, spawned_at: float | None = None) -> int:
    """Pump stdio to the store's daemon; ``spawned_at``: when :func:`~server.http.daemonfiles.
    start_early` started it (the bridge waits for that one rather than starting another)."""
    import signal

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # daemons we start are reaped, never zombies
    env = dict(os.environ if env is None else env)
    return make_bridge(env, spawned_at).run()
