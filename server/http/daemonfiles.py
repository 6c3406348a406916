"""The two files by which a store's daemon is found: ``daemon.lock`` (an exclusive ``flock``
held by the owner; the kernel releases it when the owner dies) and ``daemon.json`` (its address,
pid and local secret, readable only by the store's user).

Standard library only and no ``pathlib``: the hook client (``server/hooks/hookclient.py``, run with
``python -S``) reads these files too, and its start-up is measured in milliseconds. For the same
reason JSON is read and written here (:func:`json_loads`, :func:`json_dumps`) by the ``json``
package's C parts alone: the package itself imports ``re`` and compiles its patterns, which
cost a hook process more than the rest of its work.
"""

from __future__ import annotations

import os

from retrieval.storage import private  # standard library only

try:
    import _json as _cjson
except ImportError:  # pragma: no cover - an interpreter without the C accelerator
    _cjson = None

_WS = " \t\n\r"  # JSON's whitespace


class _Decoding:
    """What ``_json.make_scanner`` reads of a decoder: ``json.loads``'s defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {
        "-Infinity": float("-inf"),
        "Infinity": float("inf"),
        "NaN": float("nan"),
    }.__getitem__


def _unserialisable(obj):
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


_scan = _cjson.make_scanner(_Decoding()) if _cjson is not None else None


def json_loads(data: str | bytes):
    """``json.loads(data)``: the same values, the same errors (``ValueError``), without
    importing the ``json`` package for UTF-8 input (anything else is handed to it)."""
    if isinstance(data, bytes | bytearray):
        if _scan is None or data[:3] == b"\xef\xbb\xbf" or b"\x00" in data[:4]:
            import json  # a BOM or UTF-16/32: json detects the encoding

            return json.loads(data)
        data = data.decode("utf-8", "surrogatepass")
    if _scan is None:  # pragma: no cover
        import json

        return json.loads(data)
    start = len(data) - len(data.lstrip(_WS))
    try:
        obj, end = _scan(data, start)
        if not data[end:].strip(_WS):
            return obj
    except Exception:  # noqa: BLE001, S110 - json says what is wrong, below (its error, its place)
        pass  # (the C scanner raises its errors only when the json package is loaded)
    import json

    return json.loads(data)


def json_dumps(obj) -> str:
    """``json.dumps(obj)`` (ASCII, ``", "`` and ``": "``), by the C encoder alone."""
    if _cjson is None:  # pragma: no cover
        import json

        return json.dumps(obj)
    encode = _cjson.make_encoder({}, _unserialisable, _cjson.encode_basestring_ascii, None,
                                 ": ", ", ", False, False, True)  # fmt: skip
    return "".join(encode(obj, 0))


LOCK_FILE = "daemon.lock"
INFO_FILE = "daemon.json"


def read_info(home) -> dict | None:
    """The running daemon's ``daemon.json``, or None when there is none (or it is half-written)."""
    try:
        with open(os.path.join(home, INFO_FILE), encoding="utf-8") as fh:
            return json_loads(fh.read())
    except (FileNotFoundError, ValueError):
        return None


def wait_announced(home, proc, timeout: float = 60.0) -> dict:
    """``daemon.json`` once the daemon started as ``proc`` (a ``subprocess.Popen`` of
    ``pattern-memory daemon``) announces itself in it. ``RuntimeError`` when ``proc`` exits
    first (its stderr in the message, when it was captured) or after ``timeout`` seconds
    (``proc`` is then killed)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = read_info(home)
        if info and info.get("pid") == proc.pid:
            return info
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
            raise RuntimeError(f"the daemon exited with {proc.returncode} before it served"
                               + (f": {err}" if err else ""))  # fmt: skip
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"the daemon did not start within {timeout:g} s")


def owner_alive(home) -> bool:
    """True while some process holds the store lock (the authoritative test: a dead owner's
    lock is released by the kernel, even if it left daemon.json behind)."""
    from retrieval.storage import locks  # standard library only

    return locks.held(os.path.join(home, LOCK_FILE))


def spawn_daemon(home, env: dict[str, str]) -> None:
    """Start the store's daemon detached (``pattern-memory daemon``, its own session: nobody
    waits for it), its output appended to ``daemon.log``. A second one started meanwhile exits
    at the store lock. The checkout holding this package is put on the child's ``PYTHONPATH``
    (the hook client runs from a checkout with ``python -S``); the folder it starts in (the
    project's, for the hook client and the bridge) is not: a project's own ``server/`` would
    be run instead of ours."""
    import subprocess
    import sys

    home = str(home)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    child = dict(env)
    child["PATTERN_HOME"] = home
    child["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    private.folder(home)
    log_path = os.path.join(home, "daemon.log")
    with open(log_path, "ab", opener=private.opener) as log:  # the child keeps its own copy
        subprocess.Popen(
            # -P: the project folder it starts in is not on its import path
            [sys.executable, "-P", "-m", "server.cli", "daemon", "--home", home],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=child,
            start_new_session=True, close_fds=True,
        )  # fmt: skip


def start_early(env: dict[str, str]) -> float | None:
    """``pattern-memory serve`` calls this before its own imports: when the store has no
    daemon, start one now, so the daemon's start-up runs beside the bridge's (~0.4 s sooner
    to the first answer). Returns the ``time.monotonic()`` of the spawn (the bridge then
    waits for that daemon instead of starting another), or None. A store folder that cannot
    be written raises ``StoreUnavailable`` naming the fault."""
    import time

    from server.service.core.ids import store_home  # stdlib only, as the hook client uses it

    home = store_home(env)
    try:
        if owner_alive(home):
            return None
        spawn_daemon(home, env)
    except OSError as exc:  # a read-only store folder: say so, not a traceback
        from server.service.core.errors import storage_error

        failed = storage_error(exc, home, "no daemon can serve it")
        if failed is None:
            raise
        raise failed from exc
    return time.monotonic()
