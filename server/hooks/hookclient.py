"""``pattern-memory hook EVENT``: a client lifecycle event, answered by the store's daemon.

Reads the client's hook JSON on stdin, posts it to the daemon (``POST /hooks/EVENT`` with the
caller's identity in the local-secret envelope, as the ``serve`` bridge does) and prints the
client's output JSON when there is something to inject, else nothing. Standard library only,
and few modules of it, so a hook costs little more than the interpreter's start: no
``http.client`` (its email parser costs more than the whole request), and the C modules under
``socket``, ``signal`` and ``json`` rather than those packages (``_socket``, ``_signal``, and
:func:`~server.http.daemonfiles.json_loads`): their enums and regular expressions, made at
import, cost a hook process more than everything else it does. Hooks installed by ``pattern-memory
hooks install`` run this file directly with ``python -S`` (no site-packages scan):

    /path/to/python -S /path/to/server/hookclient.py UserPromptSubmit
    /path/to/python -S /path/to/server/hookclient.py --client codex UserPromptSubmit

``--client NAME`` (default ``claude``) names the client whose hook JSON this is; the event is
the client's own event name; the daemon translates both (``server/hooks/clients``).

A hook never breaks or slows its client:
- a hard deadline (``PATTERN_HOOK_DEADLINE`` seconds, default 1.5, at most ``MAX_DEADLINE``;
  a value that is not a positive number, ``inf`` and ``nan`` included, means the default):
  past it the process prints nothing and exits 0;
- any error: exit 0, print nothing, one line in ``$PATTERN_HOME/hooks.log`` (the input, the
  environment, the daemon's answer and the console's encoding included: the output is
  ASCII JSON, written as bytes, so a ``cp1252`` or ``ascii`` stdout cannot fail it);
- no daemon: one is started detached, and the hook waits for it only within the deadline
  (the daemon answers before its model is loaded: it ranks lexically meanwhile); under
  ``PATTERN_HOOK_SPAWN=0`` none is started and the hook prints nothing at once (one being
  started meanwhile is still waited for);
- a bounded input: at most ``MAX_STDIN`` bytes of stdin are read (a longer input is refused,
  one line in the log), each string field is sent up to ``MAX_FIELD`` characters.
"""

from __future__ import annotations

import os
import sys
import time

try:  # the C modules: ``signal`` and ``socket`` build enums of every constant at import
    import _signal as signal
    import _socket as socket
except ImportError:  # pragma: no cover - another interpreter
    import signal
    import socket

if __package__ in (None, ""):  # run as a file: import the package from the checkout
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

try:
    from retrieval.storage import private
    from server.http.daemonfiles import json_dumps, json_loads, owner_alive, read_info, spawn_daemon
    from server.service.core.ids import identity_fields, project_root, store_home
except BaseException:  # noqa: BLE001 - a broken install still never fails the client
    if __name__ == "__main__":
        os._exit(0)
    raise

DEFAULT_DEADLINE = 1.5
MAX_DEADLINE = 60.0  # a longer deadline is cut to this (the client waits on every hook)
MAX_FIELD = 65_536  # a tool output longer than this is sent as its head and tail
MAX_STDIN = 64 * 2**20  # of the client's hook JSON read; a longer input is refused unparsed
CONFIG_ENV = {  # client-side settings forwarded to the daemon (validated there)
    "PATTERN_HOOK_BRIEFING_TOKENS": ("briefing_tokens", int),
    "PATTERN_HOOK_PROMPT_TOKENS": ("prompt_tokens", int),
    "PATTERN_HOOK_THRESHOLD": ("threshold", float),
    "PATTERN_HOOK_LESSON_THRESHOLD": ("lesson_threshold", float),
    "PATTERN_HOOK_MAX_ITEMS": ("max_items", int),
}


class HookError(Exception):
    pass


def log_line(home, event: str, message: str) -> None:
    """One line per failure, never more (the log must not grow with every prompt)."""
    try:
        private.folder(home)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        text = " ".join(str(message).split())[:500]
        with open(os.path.join(home, "hooks.log"), "a", encoding="utf-8",
                  errors="backslashreplace", opener=private.opener) as fh:  # fmt: skip
            fh.write(f"{stamp} pid {os.getpid()} {event or '-'}: {text}\n")
    except Exception:  # noqa: BLE001 - an unwritable log (a file as home, a bad name) too
        pass


def _trim(value):
    if isinstance(value, str) and len(value) > MAX_FIELD:
        half = MAX_FIELD // 2
        return (
            f"{value[:half]}\n… [{len(value) - MAX_FIELD} characters left out] …\n{value[-half:]}"
        )
    if isinstance(value, dict):
        return {k: _trim(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_trim(v) for v in value]
    return value


def config_from_env(env) -> dict:
    out = {}
    for name, (key, typ) in CONFIG_ENV.items():
        raw = env.get(name, "").strip()
        if raw:
            try:
                out[key] = typ(raw)
            except ValueError:
                continue
    return out


def http_post(host: str, port: int, path: str, body: bytes, headers: dict, timeout: float):
    """(status, body) of one HTTP/1.1 POST (``Connection: close``)."""
    literal = f"[{host}]" if ":" in host else host  # the daemon's Host guard reads this
    head = [f"POST {path} HTTP/1.1", f"Host: {literal}:{port}", "Content-Type: application/json",
            f"Content-Length: {len(body)}", "Connection: close"]  # fmt: skip
    head += [f"{k}: {v}" for k, v in headers.items()]
    # a plain connect, not create_connection: getaddrinfo would import the idna codec
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.settimeout(max(0.05, timeout))
        s.connect((host, port))
        s.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
        chunks = []
        while True:
            data = s.recv(65536)
            if not data:
                break
            chunks.append(data)
    finally:
        s.close()
    raw = b"".join(chunks)
    header, _, payload = raw.partition(b"\r\n\r\n")
    lines = header.decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        raise HookError(f"bad HTTP answer: {lines[0][:80]!r}") from None
    if any(x.lower().replace(" ", "") == "transfer-encoding:chunked" for x in lines[1:]):
        payload = _unchunk(payload)
    return status, payload


def _unchunk(data: bytes) -> bytes:
    out, pos = [], 0
    while True:
        end = data.index(b"\r\n", pos)
        size = int(data[pos:end].split(b";")[0], 16)
        if size == 0:
            return b"".join(out)
        out.append(data[end + 2 : end + 2 + size])
        pos = end + 4 + size


_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~/")


def percent_encode(text: str) -> str:
    """``urllib.parse.quote(text)`` (safe ``/``) without importing urllib (the daemon unquotes
    it)."""
    return "".join(c if c in _SAFE else "".join(f"%{b:02X}" for b in c.encode()) for c in text)


def envelope(who: dict, secret: str) -> dict:
    headers = {"Authorization": f"Bearer {secret}", "X-Pattern-Project": who["project_id"],
               "X-Pattern-Agent": who["agent_id"]}  # fmt: skip
    if who.get("subagent_type"):
        headers["X-Pattern-Subagent-Type"] = who["subagent_type"]
    if who.get("parent_agent_id"):
        headers["X-Pattern-Parent-Agent"] = who["parent_agent_id"]
    if who.get("root"):  # the caller's project folder (local secret only), percent-encoded
        headers["X-Pattern-Root"] = percent_encode(who["root"])
    return headers


def refusal(data: bytes) -> str:
    """A refusal by its error code and the daemon's own message, never the raw answer: the
    line goes to ``hooks.log``, which must not keep what the client sent."""
    try:
        answer = json_loads(data)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        return "(no JSON answer)"
    return f"{answer.get('error') or '-'}: {answer.get('message') or ''}"[:300]


def call_daemon(home, env, path: str, payload: dict, who: dict, until: float) -> dict:
    """POST to the daemon, starting it when none runs; gives up at ``until``."""
    body = json_dumps(payload).encode()
    spawned = False
    while True:
        info = read_info(home)
        if info:
            try:
                status, data = http_post(info["host"], info["port"], path, body,
                                         envelope(who, info["secret"]), until - time.monotonic())  # fmt: skip
            except (ConnectionRefusedError, FileNotFoundError):
                info = None  # a stale daemon.json: the daemon is gone
            except TimeoutError:
                raise HookError("the daemon did not answer within the deadline") from None
            else:
                if status != 200:
                    raise HookError(f"daemon answered {status}: {refusal(data)}")
                return json_loads(data)
        if not spawned and not owner_alive(home):
            if not may_spawn(env):
                return {}  # no daemon, none starting, none to start here: nothing to say
            spawn_daemon(home, env)
            spawned = True
        if time.monotonic() + 0.05 >= until:
            raise HookError("no daemon answered within the deadline (started one)")
        time.sleep(0.05)


def may_spawn(env) -> bool:
    """Whether a hook may start the store's daemon when none runs: not under
    ``PATTERN_HOOK_SPAWN=0`` (a hook run by an interpreter that is not the project's own, such
    as the Gemini CLI extension's system ``python3``, whose daemon could not start: the hook
    then answers nothing at once, until the MCP server has started the daemon)."""
    return (env.get("PATTERN_HOOK_SPAWN") or "1").strip().lower() not in ("0", "false", "no", "off")


def parse_argv(argv: list[str]) -> tuple[str | None, str]:
    """(client, event) of ``[--client NAME] EVENT`` (also ``--client=NAME``); the name is
    checked by the daemon, not here (this file imports no client module)."""
    client = None
    if argv[:1] == ["--client"] and len(argv) > 1:
        client, argv = argv[1], argv[2:]
    elif argv and argv[0].startswith("--client="):
        client, argv = argv[0][len("--client=") :], argv[1:]
    return client, (argv[0] if argv else "")


def project_dir(data: dict, env) -> str:
    """The folder the client works in: the input's ``cwd``, else the first of Cursor's
    ``workspace_roots``, else the project folder the client names in the hook's environment
    (``CURSOR_PROJECT_DIR``, ``CLAUDE_PROJECT_DIR``: a client may run user hooks from its own
    folder), else the hook's working directory."""
    roots = data.get("workspace_roots")
    given = [data.get("cwd"), *(roots[:1] if isinstance(roots, list) else []),
             env.get("CURSOR_PROJECT_DIR"), env.get("CLAUDE_PROJECT_DIR")]  # fmt: skip
    return next((d for d in given if isinstance(d, str) and os.path.isabs(d)), os.getcwd())


def run(event: str, stdin: bytes, env, home, until: float, client: str | None = None) -> str | None:
    if not event or event.startswith("-"):
        raise HookError("usage: pattern-memory hook [--client NAME] EVENT")
    if len(stdin) > MAX_STDIN:
        raise HookError(f"expected a hook input of at most {MAX_STDIN} bytes; found more")
    data = json_loads(stdin or b"{}")
    if not isinstance(data, dict):
        raise HookError("the hook input is not a JSON object")
    cwd = project_dir(data, env)
    who = {**identity_fields(env, cwd), "root": project_root(os.path.realpath(cwd))}
    payload = {"client": client or "claude", "input": _trim(data), "config": config_from_env(env)}
    answer = call_daemon(home, env, f"/hooks/{event}", payload, who, until)
    out = answer.get("output") if isinstance(answer, dict) else None
    # ASCII: any console encoding can carry it; an empty object too (Cursor reads no output
    # as a failed hook)
    return json_dumps(out) if out is not None else None


def deadline_of(env) -> float:
    """``PATTERN_HOOK_DEADLINE`` in seconds: a positive finite number, at most
    ``MAX_DEADLINE``; anything else (absent, ``inf``, ``nan``, ``0``, negative, not a number)
    is the default."""
    try:
        value = float(env.get("PATTERN_HOOK_DEADLINE") or DEFAULT_DEADLINE)
    except (ValueError, TypeError):
        return DEFAULT_DEADLINE
    if not 0 < value < float("inf"):  # nan fails both comparisons
        return DEFAULT_DEADLINE
    return min(value, MAX_DEADLINE)


def write_out(text: str) -> None:
    """``text`` and a newline on stdout as UTF-8 bytes, whatever the console's encoding; an
    unwritable stdout (closed, a broken pipe) is ignored."""
    try:
        data = (text + "\n").encode("utf-8", "backslashreplace")
        out = getattr(sys.stdout, "buffer", None)
        if out is not None:
            out.write(data)
            out.flush()
        elif sys.stdout is not None:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()
    except Exception:  # noqa: BLE001 - the client gets nothing rather than an error
        pass


def _arm(seconds: float, handler):
    """Call ``handler`` after ``seconds`` (SIGALRM; a timer thread where there is none);
    returns the function that cancels it."""
    if hasattr(signal, "setitimer"):
        signal.signal(signal.SIGALRM, handler)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        return lambda: signal.setitimer(signal.ITIMER_REAL, 0)
    import threading

    timer = threading.Timer(seconds, handler, (None, None))
    timer.daemon = True
    timer.start()
    return timer.cancel


def main(argv: list[str] | None = None) -> int:
    """Always 0: whatever happens, the client goes on (see the module docstring)."""
    start = time.monotonic()
    home, event = None, ""
    try:
        client, event = parse_argv(sys.argv[1:] if argv is None else argv)
        env = os.environ
        deadline = deadline_of(env)
        home = store_home(env)

        def expired(_signum, _frame):
            log_line(home, event, f"deadline of {deadline}s reached; nothing injected")
            os._exit(0)

        disarm = _arm(deadline, expired)
        try:
            stdin = sys.stdin.buffer.read(MAX_STDIN + 1)
            text = run(event, stdin, env, home, start + deadline - 0.02, client)
        finally:
            disarm()
        if text:
            write_out(text)
    except BaseException as exc:  # noqa: BLE001 - a hook never fails its client
        if home is not None:
            log_line(home, event, f"{type(exc).__name__}: {exc}")
    return 0


if __name__ == "__main__":
    main()
    os._exit(0)  # no exit-time flush of a closed stdout can turn this into 120
