"""Shared helpers for the files ``pattern-memory hooks install`` changes, for every client.

Rules they keep for every client:

- a user's own entries are never clobbered or reordered: ours go beside them;
- our entries are recognised by their command exactly (:func:`is_ours_command`: this
  project's hook client, ``…/server/hooks/hookclient.py [--client NAME] EVENT`` from any
  checkout, the former ``…/server/hookclient.py``, or ``pattern-memory hook``), so ``remove``
  takes out exactly what ``add`` put in, never a user's own ``~/tools/hookclient.py``, and a
  re-install replaces an older install of ours (another checkout's path) instead of adding a
  second one;
- ``add`` on a document that already holds exactly our entries changes nothing (idempotence);
- before a file changes, a copy is written beside it (``NAME.bak-<time>``), then the new text
  replaces it atomically; a file ``remove`` leaves empty may be deleted. The file I/O (links,
  devices, modes, temporary files, bounded backups) is :mod:`.safe_files`';
- uninstall restores the file byte for byte when nothing else changed in it since: if a
  backup holds the same document as the result, its bytes are put back (:func:`restore_text`);
- JSON is written in the file's own style (its indentation, its final newline, CRLF line ends),
  and only when it reads back as the same document: a number Python cannot hold (``1e400``)
  or ``NaN`` is refused, a lone surrogate escape (``"\\ud83d"``) is written as an escape;
  TOML is edited as text (:mod:`.toml_text`, re-exported here).
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from retrieval.errors import InvalidInput

from . import safe_files
from .safe_files import MAX_BACKUPS_READ, MAX_CONFIG_BYTES, backups  # noqa: F401
from .spec import ConfigFile
from .toml_text import (  # noqa: F401 - the TOML helpers, as the client modules call them
    TOML_MARK,
    _header_line,
    toml_add_table,
    toml_data,
    toml_key,
    toml_marked,
    toml_remove_marked,
    toml_set,
    toml_value,
)

HOOKCLIENT = Path(__file__).resolve().parents[1] / "hookclient.py"
SERVER_NAME = "pattern-memory"
# the hook client's path as our commands end (this one, and the one before server/hooks/)
OUR_SCRIPTS = ("server/hooks/hookclient.py", "server/hookclient.py")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")  # a client's or an event's name
_QUIET = ["2>/dev/null", "||", "true"]  # Gemini CLI's commands end so (a status of 2 blocks)
MAX_COMMAND = 4096

Hook = dict[str, Any]


# --------------------------------------------------------------------------- commands
def hook_command(client: str, event: str) -> str:
    """``python -S …/hookclient.py [--client NAME] EVENT``: no site-packages scan at start (the
    hook's largest cost); the hook client imports only the standard library and this checkout.
    Claude Code's command has no ``--client`` (the default; installs made before other clients
    existed stay identical)."""
    flag = "" if client == "claude" else f" --client {shlex.quote(client)}"
    return f"{shlex.quote(sys.executable)} -S {shlex.quote(str(HOOKCLIENT))}{flag} {event}"


def is_ours_command(cmd: object) -> bool:
    """A hook command of ours, read as shell words: ``PYTHON [-S] …/server/hooks/hookclient.py
    [--client NAME] EVENT`` (any checkout's; ``…/server/hookclient.py`` of older installs;
    Gemini CLI's ``2>/dev/null || true`` after it), or ``pattern-memory hook [--client NAME]
    EVENT``. Nothing else: a user's ``python3 ~/tools/hookclient.py notify`` is theirs."""
    if not isinstance(cmd, str) or len(cmd) > MAX_COMMAND:
        return False
    try:
        words = shlex.split(cmd)
    except ValueError:
        return False
    if words[-3:] == _QUIET:
        words = words[:-3]
    if len(words) < 2 or not _WORD.fullmatch(words[-1]):
        return False
    head = words[:-1]
    if len(head) >= 2 and head[-2] == "--client":
        if not _WORD.fullmatch(head[-1]):
            return False
        head = head[:-2]
    if len(head) == 2 and head[1] == "hook" and os.path.basename(head[0]) == "pattern-memory":
        return True
    if len(head) not in (2, 3) or (len(head) == 3 and head[1] != "-S"):
        return False  # PYTHON [-S] SCRIPT
    script = head[-1]
    return any(script == s or script.endswith("/" + s) for s in OUR_SCRIPTS)


def ours_by(*keys: str) -> Callable[[object], bool]:
    """A hook entry is ours when one of ``keys`` (``"command"``, or Copilot CLI's ``"bash"``)
    holds our command."""
    return lambda hook: isinstance(hook, dict) and any(is_ours_command(hook.get(k)) for k in keys)


def server_entry() -> dict:
    """The MCP server's stdio command: this install's ``pattern-memory serve``."""
    exe = Path(sys.executable).with_name("pattern-memory")
    if exe.exists():
        return {"command": str(exe), "args": ["serve"]}
    found = shutil.which("pattern-memory")
    if found:
        return {"command": found, "args": ["serve"]}
    return {"command": sys.executable, "args": ["-m", "server.cli", "serve"]}


# --------------------------------------------------------------------------- documents
def decode(data: bytes | None, path: Path) -> str | None:
    """A file's bytes as text (no newline translation: CRLF stays CRLF); not UTF-8: refused."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"{path} is not UTF-8 text; not touching it") from None


def read_text(path: Path) -> str | None:
    """The text of the regular file at ``path`` (None: no file), read by :mod:`.safe_files`."""
    got = safe_files.read(path)
    return None if got is None else decode(got[0], path)


class _Unfaithful(ValueError):
    """A JSON number a float cannot hold (``1e400``): it would be written back as ``inf``."""


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Unfaithful(f"the number {text[:40]}, which would be written back as {value}")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(text: str | None, path: Path) -> dict:
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text, parse_float=_finite, parse_constant=_no_constant)
    except _Unfaithful as exc:
        raise InvalidInput(f"{path} holds {exc}; not touching it") from None
    except (ValueError, RecursionError) as exc:
        raise InvalidInput(
            f"{path} is not valid JSON ({str(exc)[:200]}); not touching it"
        ) from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{path} does not hold a JSON object; not touching it")
    return data


def parse(text: str | None, path: Path, fmt: str) -> Any:
    """The document a :class:`~.spec.ConfigFile` edits: a dict (JSON) or the text (TOML)."""
    if fmt == "toml":
        toml_data(text or "", path)  # refuse a broken file before editing it
        return text or ""
    return parse_json(text, path)


def load(path: Path, fmt: str) -> Any:
    return parse(read_text(path), path, fmt)


def _crlf(text: str) -> bool:
    return text.count("\r\n") * 2 > text.count("\n")


def _escape_surrogates(text: str) -> str:
    """A lone surrogate (from a ``\\udXXX`` escape, valid JSON) written back as that escape."""
    return re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m[0]):04x}", text)


def dump(doc: Any, fmt: str, old_text: str | None) -> str:
    """The document as the file's text, JSON in the style of ``old_text``."""
    if fmt == "toml":
        return doc
    indent: int | str | None = 2
    newline = "\n"
    if old_text and old_text.strip():
        lines = old_text.strip("\r\n").splitlines()
        if len(lines) == 1:
            indent = None
        else:
            first = next((ln for ln in lines[1:] if ln.strip()), "  ")
            indent = first[: len(first) - len(first.lstrip())] or 2
        newline = "\n" if old_text.endswith("\n") else ""
    try:
        text = json.dumps(doc, indent=indent, ensure_ascii=False, allow_nan=False) + newline
    except (ValueError, TypeError, RecursionError) as exc:
        raise InvalidInput(f"cannot write this document as JSON ({str(exc)[:200]})") from None
    text = _escape_surrogates(text)
    return text.replace("\n", "\r\n") if old_text and _crlf(old_text) else text


def encode(text: str, path: Path) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"cannot write {path} as UTF-8 ({exc.reason} at {exc.start}); "
                           "not touching it") from None  # fmt: skip


def is_empty(doc: Any) -> bool:
    return not doc.strip() if isinstance(doc, str) else not doc


def same(a: Any, b: Any, fmt: str) -> bool:
    return a == b if fmt == "toml" else json.dumps(a) == json.dumps(b)


def same_file(a: Any, b: Any, fmt: str) -> bool:
    """The same document for a backup to be put back: JSON equal, TOML text equal but for
    final newlines (the one an append added before our lines)."""
    return a.rstrip("\r\n") == b.rstrip("\r\n") if fmt == "toml" else same(a, b, fmt)


def copy(doc: Any) -> Any:
    return doc if isinstance(doc, str) else json.loads(json.dumps(doc))


def restore_text(path: Path, doc: Any, fmt: str) -> str | None:
    """The bytes (as text) of the newest backup holding the same document as ``doc``, if any:
    uninstall then gives back the user's file exactly as it was. Backups that are links or
    not regular files are never read."""
    for b in backups(path)[:MAX_BACKUPS_READ]:
        try:
            text = read_text(b)
            if text is None:
                continue
            old = text if fmt == "toml" else parse_json(text, b)
        except (InvalidInput, OSError):
            continue
        if same_file(old, doc, fmt) and (fmt == "toml" or text.strip()):
            return text
    return None


# --------------------------------------------------------------------------- hooks: groups
def with_groups(doc: dict, wanted: dict[str, list[dict]], is_ours: Callable[[object], bool],
                key: str = "hooks") -> dict:  # fmt: skip
    """Claude Code's layout (and clients that copied it): ``{key: {EVENT: [{"matcher": …,
    "hooks": [HOOK, …]}, …]}}``. ``wanted``: event -> our groups. A group of ours (every hook
    in it ours) that is not exactly what we want is replaced; the user's groups stay first,
    untouched (:func:`with_flat`, its entries the groups)."""
    return with_flat(doc, wanted, lambda g: _group_is_ours(g, is_ours), key)


def matcher_groups(bindings: Iterable, hook_of: Callable[[object], dict]) -> dict[str, list[dict]]:
    """Event -> our groups in Claude Code's layout: one group per binding, with its matcher
    when it has one, holding ``hook_of(binding)``."""
    out: dict[str, list[dict]] = {}
    for b in bindings:
        group = {"hooks": [hook_of(b)]}
        out.setdefault(b.client_event, []).append(
            group if b.matcher is None else {"matcher": b.matcher, **group}
        )
    return out


def _group_is_ours(group: object, is_ours: Callable[[object], bool]) -> bool:
    return (isinstance(group, dict) and isinstance(group.get("hooks"), list)
            and bool(group["hooks"]) and all(is_ours(h) for h in group["hooks"]))  # fmt: skip


def without_groups(doc: dict, is_ours: Callable[[object], bool], events: Iterable[str],
                   key: str = "hooks") -> dict:  # fmt: skip
    """``doc`` without our hooks: a group left with none of the user's goes, so does an event
    of ours left with no group (an event an earlier version bound and this one does not
    included), and ``key`` left empty; an event the user left empty stays."""
    out = copy(doc)
    hooks = out.get(key)
    if not isinstance(hooks, dict):
        return out
    events = set(events)
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = []
        for g in groups:
            if isinstance(g, dict) and isinstance(g.get("hooks"), list):
                rest = [h for h in g["hooks"] if not is_ours(h)]
                if not rest and g["hooks"]:
                    continue  # a group of ours only
                g = {**g, "hooks": rest}
            kept.append(g)
        if kept:
            hooks[event] = kept
        elif event in events or groups:
            del hooks[event]
    if not hooks:
        del out[key]
    return out


def groups_present(doc: dict, is_ours: Callable[[object], bool], key: str = "hooks") -> list[str]:
    hooks = doc.get(key) if isinstance(doc.get(key), dict) else {}
    return [e for e, groups in hooks.items() if isinstance(groups, list) and any(
        is_ours(h) for g in groups if isinstance(g, dict) and isinstance(g.get("hooks"), list)
        for h in g["hooks"])]  # fmt: skip


def groups_file(path: Callable[[str, Path], Path | None], wanted: Callable[[], dict[str, list[dict]]],
                is_ours: Callable[[object], bool], events: Iterable[str]) -> ConfigFile:  # fmt: skip
    """A client's hooks file in Claude Code's layout: :func:`with_groups` of ``wanted()``,
    :func:`without_groups` (``events``: ours, dropped when left empty), :func:`groups_present`."""
    return ConfigFile("hooks", path, lambda doc: with_groups(doc, wanted(), is_ours),
                      lambda doc: without_groups(doc, is_ours, events),
                      lambda doc: groups_present(doc, is_ours))  # fmt: skip


# --------------------------------------------------------------------------- hooks: flat lists
def with_flat(doc: dict, wanted: dict[str, list[Hook]], is_ours: Callable[[object], bool],
              key: str = "hooks", top: dict | None = None) -> dict:  # fmt: skip
    """A flat layout (Cursor's, Copilot CLI's): ``{key: {event: [HOOK, …]}}``, plus ``top``
    fields the file needs (e.g. ``{"version": 1}``, set only when absent)."""
    out = copy(doc)
    for k, v in (top or {}).items():
        out.setdefault(k, v)
    hooks = out.get(key)
    if hooks is None:
        hooks = out[key] = {}
    if not isinstance(hooks, dict):
        raise InvalidInput(f'"{key}" is not a JSON object; not touching it')
    for event, mine_wanted in wanted.items():
        entries = hooks.get(event)
        if entries is None:
            entries = []
        if not isinstance(entries, list):
            raise InvalidInput(f'"{key}.{event}" is not a JSON list; not touching it')
        mine = [h for h in entries if is_ours(h)]
        if mine == mine_wanted:
            continue
        hooks[event] = [h for h in entries if not is_ours(h)] + mine_wanted
    return out


def without_flat(doc: dict, is_ours: Callable[[object], bool], events: Iterable[str],
                 key: str = "hooks", top: dict | None = None) -> dict:  # fmt: skip
    """``doc`` without our hooks; ``top`` fields go too when nothing else is left."""
    out = copy(doc)
    hooks = out.get(key)
    if not isinstance(hooks, dict):
        return out
    events = set(events)
    for event in list(hooks):
        entries = hooks[event]
        if not isinstance(entries, list):
            continue
        kept = [h for h in entries if not is_ours(h)]
        if kept or event not in events:
            hooks[event] = kept
        else:
            del hooks[event]
    if not hooks:
        del out[key]
        if top and all(out.get(k) == v for k, v in top.items()) and set(out) == set(top):
            out = {}
    return out


def flat_present(doc: dict, is_ours: Callable[[object], bool], key: str = "hooks") -> list[str]:
    hooks = doc.get(key) if isinstance(doc.get(key), dict) else {}
    return [e for e, entries in hooks.items()
            if isinstance(entries, list) and any(is_ours(h) for h in entries)]  # fmt: skip


def flat_file(path: Callable[[str, Path], Path | None], wanted: Callable[[], dict[str, list[Hook]]],
              is_ours: Callable[[object], bool], events: Iterable[str],
              top: dict | None = None) -> ConfigFile:  # fmt: skip
    """A client's hooks file in a flat layout: :func:`with_flat` of ``wanted()``,
    :func:`without_flat` (``events``: ours, dropped when left empty), :func:`flat_present`."""
    return ConfigFile("hooks", path, lambda doc: with_flat(doc, wanted(), is_ours, top=top),
                      lambda doc: without_flat(doc, is_ours, events, top=top),
                      lambda doc: flat_present(doc, is_ours))  # fmt: skip


# --------------------------------------------------------------------------- MCP server (JSON)
def with_server(doc: dict, entry: dict | None = None, key: str = "mcpServers",
                name: str = SERVER_NAME) -> dict:  # fmt: skip
    """``doc`` with our server entry (``entry``, else :func:`server_entry`) under ``key``; an
    entry of that name already there is kept as it is (the user's, or ours from before)."""
    entry = server_entry() if entry is None else entry
    out = copy(doc)
    servers = out.get(key)
    if servers is None:
        servers = out[key] = {}
    if not isinstance(servers, dict):
        raise InvalidInput(f'"{key}" is not a JSON object; not touching it')
    servers.setdefault(name, entry)
    return out


def without_server(doc: dict, entry: dict | None = None, key: str = "mcpServers",
                   name: str = SERVER_NAME) -> dict:  # fmt: skip
    """``doc`` without our server entry (``entry``, else :func:`server_entry`), only when it
    is still exactly what we wrote."""
    entry = server_entry() if entry is None else entry
    out = copy(doc)
    servers = out.get(key)
    if isinstance(servers, dict) and servers.get(name) == entry:
        del servers[name]
        if not servers:
            del out[key]
    return out


def server_present(doc: dict, key: str = "mcpServers", name: str = SERVER_NAME) -> list[str]:
    servers = doc.get(key)
    return [name] if isinstance(servers, dict) and name in servers else []
