"""``pattern-memory daemon``: the one process that owns a store.

Lifecycle: take the exclusive lock (a second owner is refused with a message naming the
holder) -> open the store, check its integrity, replay the vector outbox (in the background
with the model) -> serve MCP over streamable HTTP on 127.0.0.1 (or ``--http HOST:PORT`` for
remote agents with bearer tokens; every request's Host/Origin must be a loopback name, the
bound address or an ``--allowed-host``: ``server/http/hostguard.py``) -> on SIGTERM/SIGINT: stop
accepting, drain in-flight calls, checkpoint the WAL, release the lock, remove ``daemon.json``.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import secrets
import socket
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from retrieval.storage import locks, private
from server.service.core.errors import InvalidInput, StoreUnavailable, storage_error

from .auth import Refusal, TokenStore, make_authenticator, write_private
from .daemonfiles import INFO_FILE, LOCK_FILE, read_info

log = logging.getLogger(__name__)

__all__ = ["INFO_FILE", "LOCK_FILE", "StoreLock", "read_info", "run_daemon"]


class StoreLock:
    """An exclusive ``flock`` on ``<home>/daemon.lock``; released by the kernel if we die."""

    def __init__(self, home: Path, role: str = "pattern-memory daemon") -> None:
        self.path = Path(home) / LOCK_FILE
        self.role = role
        self.fd: int | None = None

    def acquire(self) -> None:
        try:
            self.fd = locks.acquire(self.path, owner=f"pid {os.getpid()} ({self.role})")
        except locks.Held as held:
            holder = held.owner or "another process"
            raise StoreUnavailable(
                f"store {self.path.parent} is already owned by {holder}; "
                "use that daemon (pattern-memory serve connects to it) or stop it first",
                holder=holder,
            ) from None
        except OSError as exc:  # a read-only folder, a full disk
            failed = storage_error(exc, self.path, "the daemon cannot own the store")
            if failed is None:
                raise
            raise failed from exc

    def release(self) -> None:
        if self.fd is not None:
            locks.release(self.fd)
            self.fd = None


class AuthMiddleware:
    """Pure ASGI: /health is open; everything else needs a valid bearer token (else 401), and a
    token bound to a project gets 403 for a header naming another one."""

    def __init__(self, app, authenticate, info: dict) -> None:
        self.app = app
        self.authenticate = authenticate
        self.info = info

    async def _json(self, send, status: int, body: dict, extra: list | None = None) -> None:
        data = json.dumps(body).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(data)).encode()),
        ]
        await send(
            {"type": "http.response.start", "status": status, "headers": headers + (extra or [])}
        )
        await send({"type": "http.response.body", "body": data})

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["path"] == "/health":
            return await self._json(send, 200, {"status": "ok", "pid": os.getpid(), **self.info})
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        who = self.authenticate(headers)
        if isinstance(who, Refusal):
            extra = [(b"www-authenticate", b'Bearer realm="pattern-memory"')]
            return await self._json(
                send,
                who.status,
                {"error": who.error, "message": who.message},
                extra if who.status == 401 else None,
            )
        scope = dict(scope)
        scope["state"] = {**(scope.get("state") or {}), "pattern_identity": who}
        await self.app(scope, receive, send)


def _graceful_server(config, on_exit=None, on_started=None):
    """uvicorn.Server that drains on SIGTERM/SIGINT and then returns (uvicorn's own handler
    re-raises the signal after draining, which would kill us before the WAL checkpoint).
    Its handlers are installed when it is made, before ``daemon.json`` tells anyone our pid:
    a signal that arrives before uvicorn serves still means "drain and stop", not death.

    Signals count: the first drains; the second cuts the drain short, or, once serving has
    ended (``uv.closing``), is absorbed while the store closes (the default handler killed the
    daemon in the middle of its close and left ``daemon.json`` behind); a third ends the
    daemon at once (the vector index catches up from its outbox at the next start). The
    handler only sets flags and writes to fd 2 (it runs between any two bytecodes of the main
    thread, which may hold a lock it would wait for). ``on_exit()`` runs as the drain starts,
    in the event loop: long-lived responses (the dashboard's event streams) end, so the drain
    does not wait for them. ``on_started()`` runs once it serves."""
    import asyncio
    import signal

    import uvicorn

    class Server(uvicorn.Server):
        def __init__(self, config) -> None:
            super().__init__(config)
            self.closing = False
            self.signals = 0

            def handler(signum, frame):
                self.signals += 1
                if self.signals >= 3:
                    signal.signal(signum, signal.SIG_DFL)
                    os.kill(os.getpid(), signum)
                    return
                if self.closing:
                    _say("pattern-memory daemon: closing the store; "
                         "a third signal stops it at once\n")  # fmt: skip
                elif self.should_exit:
                    self.force_exit = True
                self.should_exit = True

            for s in (signal.SIGINT, signal.SIGTERM):
                signal.signal(s, handler)

        async def startup(self, sockets=None) -> None:
            await super().startup(sockets=sockets)
            if on_started is not None and not self.should_exit:
                on_started()

        async def shutdown(self, sockets=None) -> None:
            if on_exit is not None:
                on_exit()
            await super().shutdown(sockets=sockets)
            if self.force_exit and self.started:  # a second signal cut the drain short: the
                # app still ends through its lifespan (else cancelled mid-wait: a traceback),
                # for a moment only: a call still running is not waited for
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.lifespan.shutdown(), LIFESPAN_END_S)

        @contextlib.contextmanager
        def capture_signals(self):
            yield  # ours stay installed: the store closes after serving ends

    return Server(config)


LIFESPAN_END_S = 1.0  # how long a drain cut short waits for the app's end


def _say(text: str) -> None:
    """Write to stderr from a signal handler: one ``write`` to fd 2, no lock taken."""
    with contextlib.suppress(OSError):
        os.write(2, text.encode())


def listening_socket(host: str, port: int) -> socket.socket:
    """The daemon's TCP socket, bound and listening (connections queue before uvicorn accepts).

    Its connections send each write at once (``TCP_NODELAY``). asyncio sets that on a
    connection only when its socket says ``IPPROTO_TCP``, and a socket made without naming its
    protocol says 0. Without it, Nagle's algorithm held a response's body until the client
    acknowledged its head, and the client, on a kept-alive connection, delays that
    acknowledgement by up to 40 ms: every other call through a bridge took 40 ms longer
    (a recall's p50 34 ms against 14 ms)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:  # in use, not resolvable, not this machine's: the caller's address
        sock.close()
        reason = exc.strerror or str(exc)
        raise InvalidInput(
            f"cannot listen on {host}:{port}: {reason}", host=host, port=port
        ) from None
    except BaseException:
        sock.close()
        raise
    return sock


def local_address(bind_host: str) -> str:
    """The address a process on this machine uses to reach a daemon bound to ``bind_host``:
    the loopback address for the wildcard binds (``0.0.0.0``/``::``), so that the bridge's
    ``Host`` header is a loopback name the Host guard accepts."""
    return {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(bind_host, bind_host)


def build_app(server, authenticate, info: dict, security, routes=None, mount=None):
    """The daemon's ASGI app: the MCP endpoint behind bearer auth, all of it behind the
    Host/Origin guard (``security`` from :func:`server.http.hostguard.guard_settings`, also given to
    the SDK's own transport check). ``routes`` (the client hooks' routes) go inside both;
    ``mount(app)`` puts the dashboard (``/ui``, server.ui.mount: its own cookie sessions) in
    front of the bearer-authenticated app, inside the guard."""
    from .hostguard import HostGuard

    app = server.streamable_http_app(
        transport_security=security, host=info["host"], json_response=True, stateless_http=True
    )
    app.router.routes.extend(routes or [])  # the hook routes: local secret only, inside both
    inner = AuthMiddleware(app, authenticate, info)
    return HostGuard(mount(inner) if mount else inner, security)


# A store file up to this size is checked before the daemon serves; a larger one while it serves
# (SQLite's integrity check reads every page: ~2 s per GB, 4 GB at a million records), and
# damage found then stops the daemon, drained as at SIGTERM
INTEGRITY_WAIT_MB = 1024
INTEGRITY_WAIT_ENV = "PATTERN_INTEGRITY_WAIT_MB"


def _store_mb(rt) -> float:
    try:
        return Path(rt.engine.store.path).stat().st_size / 2**20
    except (OSError, TypeError, AttributeError):
        return 0.0


def _stop_on_damage(check, uv) -> None:
    """The integrity check finishes beside serving; damage (or a failed check) stops us."""

    def wait() -> None:
        try:
            problems = check.result()
        except Exception as exc:
            problems = [f"the check failed: {type(exc).__name__}: {exc}"]
        if problems:
            print(f"pattern-memory daemon: integrity check failed: {problems[:3]}; stopping",
                  file=sys.stderr, flush=True)  # fmt: skip
            uv.should_exit = True

    threading.Thread(target=wait, name="integrity-check-wait", daemon=True).start()


def restore_sigchld() -> None:
    """SIGCHLD back to its default: a daemon started by ``serve``'s bridge inherits its
    ``SIG_IGN`` (an ignored signal stays ignored across exec), under which the kernel reaps
    every child at once and ``subprocess`` reads each exit status as 0 (a failed ONNX export
    would pass for a success). The daemon waits for its children itself."""
    import signal

    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    except ValueError:  # not the main thread (an embedding test): nothing was inherited
        pass


def run_daemon(
    home: Path | None = None,
    http: str | None = None,
    env=None,
    allowed_hosts: list[str] | tuple[str, ...] = (),
) -> int:
    """Run the daemon in the foreground until SIGTERM/SIGINT. ``allowed_hosts``: the public
    names clients use for ``--http`` (the loopback names are always allowed)."""
    from server.service.core.config import Settings

    from .hostguard import check_allowed_host

    restore_sigchld()
    host, port = ("127.0.0.1", 0)
    if http:
        host, _, p = http.rpartition(":")
        host, port = host.strip("[]") or "127.0.0.1", int(p)
    for name in allowed_hosts:  # a bad --allowed-host fails before the lock
        check_allowed_host(name)
    env = dict(os.environ if env is None else env)
    # Start-up makes ~170k objects that live as long as the daemon (the SDK's and our pydantic
    # models, the tools' schemas): cyclic collections while they are made cost ~13 % of the
    # CPU to the first answer and would free ~3 MB. Collection resumes once the daemon serves,
    # with those objects frozen (after_start.serving)
    gc.disable()
    settings = Settings.from_env(env)
    home = Path(home or settings.home)
    env["PATTERN_HOME"] = str(home)
    private.restrict_umask()  # what it and its libraries create in the store is private
    lock = StoreLock(home)
    lock.acquire()
    info_path = home / INFO_FILE
    try:
        from server.service.core.runtime import Runtime

        # the model loads in the background from here on; the vector index's process starts
        # once we serve (its ~1.9 s of CPU would compete with this start-up)
        rt = Runtime.start(env, defer_vectors=True)
        # SQLite's integrity check (~0.1 s at 10k memories, GIL released) runs beside the imports
        checking = ThreadPoolExecutor(1, thread_name_prefix="integrity-check")
        check = checking.submit(rt.engine.store.integrity_check)
        checking.shutdown(wait=False)
        import anyio  # heavy imports after the lock (a losing racer exits at once) and after
        import uvicorn  # the model started loading (it builds beside them: ~0.7 s for the SDK)

        from ..mcp.app import create_server
        from ..mcp.toolset import build_tools
        from .hostguard import guard_settings, host_literal, is_loopback

        security = guard_settings(host, allowed_hosts)

        late = _store_mb(rt) > float(env.get(INTEGRITY_WAIT_ENV, INTEGRITY_WAIT_MB))
        problems = [] if late else check.result()
        if problems:
            raise StoreUnavailable(f"integrity check failed: {problems[:3]}", problems=problems)
        sock = listening_socket(host, port)  # connections queue from now on
        port = sock.getsockname()[1]
        secret = secrets.token_urlsafe(32)
        near = local_address(host)  # where a local bridge connects (and what its Host says)
        info = {"host": near, "port": port, "url": f"http://{host_literal(near)}:{port}/mcp"}
        from server.service.prompting.hook_events import HookService

        from ..hooks.routes import hook_routes

        # hooks, sessions and the lessons learned from them
        hooks = HookService(rt.service, rt.graphs, rt.settings.auto_lessons)
        tokens = TokenStore(home, settings.store_url)  # PostgreSQL: one table for every node
        authenticate = make_authenticator(secret, tokens, rt.identity.project_id)
        from ..ui.mount import DashboardMount

        # /ui goes to the dashboard (cookie sessions), the rest to bearer auth + MCP; the
        # Host/Origin guard covers both (a cookie is what DNS rebinding would steal)
        dashboard = DashboardMount(rt, secret=secret, authenticate=authenticate)
        mcp_server = create_server(runtime=rt)  # its tools are built as first called
        wrapped = build_app(mcp_server, authenticate, info, security,
                            routes=hook_routes(hooks, secret), mount=dashboard.mount)  # fmt: skip
        if not allowed_hosts and not is_loopback(host):
            print("pattern-memory daemon: accepting Host " + ", ".join(security.allowed_hosts)
                  + "; add --allowed-host NAME for the name remote clients use",
                  file=sys.stderr, flush=True)  # fmt: skip
        config = uvicorn.Config(
            wrapped, log_level="warning", lifespan="on", timeout_graceful_shutdown=30
        )
        from .after_start import serving

        stopping, after = threading.Event(), []  # the thread serving() starts, once it serves
        uv = _graceful_server(
            config,
            on_exit=lambda: (stopping.set(), dashboard.close()),
            on_started=lambda: after.append(
                serving(rt, later=(lambda: build_tools(mcp_server),), stopping=stopping)
            ),
        )
        if late:
            _stop_on_damage(check, uv)
        write_private(info_path, {**info, "pid": os.getpid(), "secret": secret})
        bound = f", listening on {host_literal(host)}:{port}" if near != host else ""
        print(f"pattern-memory daemon: pid {os.getpid()} serving {info['url']}{bound} "
              f"(store {home})", file=sys.stderr, flush=True)  # fmt: skip
        try:
            anyio.run(lambda: uv.serve(sockets=[sock]))  # returns after a graceful drain
        finally:
            uv.closing = True  # a second signal from here on is absorbed, a third ends us
            stopping.set()  # nothing more starts; what was starting finishes before the close
            for thread in after:
                thread.join(30)
            hooks.close()
            rt.wait_ready(30)
            try:
                rt.engine.sync()
            except Exception as exc:  # a failing Chroma: the outbox is replayed at next start
                print(f"pattern-memory daemon: vector index not updated at exit ({exc}); "
                      "it catches up at the next start", file=sys.stderr, flush=True)  # fmt: skip
            rt.engine.store.checkpoint()  # WAL folded into the main file
            rt.close()
        return 0
    finally:
        try:
            if (read_info(home) or {}).get("pid") == os.getpid():
                info_path.unlink()
        except FileNotFoundError:
            pass
        lock.release()
