"""Shared helpers for the files ``pattern-memory hooks install`` changes, for every client.

Rules they keep for every client:

- a user's own entries are never clobbered or reordered: ours go beside them;
- our entries are recognised by their command (:func:`is_ours_command`: this project's hook
  client), so ``remove`` takes out exactly what ``add`` put in, and a re-install replaces an
  older install of ours (another checkout's path) instead of adding a second one;
- ``add`` on a document that already holds exactly our entries changes nothing (idempotence);
- before a file changes, a copy is written beside it (``NAME.bak-<time>``), then the new text
  replaces it atomically (:func:`write_file`); a file ``remove`` leaves empty may be deleted;
- uninstall restores the file byte for byte when nothing else changed in it since: if a
  backup holds the same document as the result, its bytes are put back (:func:`restore_text`);
- JSON is written in the file's own style (its indentation, its final newline); TOML is edited
  as text, line by line (the standard library reads TOML but does not write it): every line we
  add ends with :data:`TOML_MARK`, and removing those lines is the whole uninstall; each edit
  is checked by parsing the result (``tomllib``), and one that would not parse as expected is
  refused with the file untouched.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import time
import tomllib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from retrieval.errors import InvalidInput

HOOKCLIENT = Path(__file__).resolve().parents[1] / "hookclient.py"
SERVER_NAME = "pattern-memory"
TOML_MARK = "# added by pattern-memory hooks install"
MAX_BACKUPS_READ = 20  # newest backups compared on uninstall
MAX_CONFIG_BYTES = 16 * 2**20  # a config file larger than this is not ours to rewrite

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
    """A hook command of ours: this project's hook client, from any checkout."""
    return isinstance(cmd, str) and ("hookclient.py" in cmd or "pattern-memory hook " in cmd)


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


# --------------------------------------------------------------------------- reading
def read_text(path: Path) -> str | None:
    """The file's text, None when there is none; a file too large or not UTF-8 is refused."""
    if not path.exists():
        return None
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise InvalidInput(f"{path} is larger than {MAX_CONFIG_BYTES} bytes; not touching it")
    try:
        return path.read_bytes().decode("utf-8")  # no newline translation: CRLF stays CRLF
    except UnicodeDecodeError:
        raise InvalidInput(f"{path} is not UTF-8 text; not touching it") from None


def parse_json(text: str | None, path: Path) -> dict:
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidInput(
            f"{path} is not valid JSON ({str(exc)[:200]}); not touching it"
        ) from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{path} does not hold a JSON object; not touching it")
    return data


def toml_data(text: str, path: Path | str = "the TOML file") -> dict:
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise InvalidInput(
            f"{path} is not valid TOML ({str(exc)[:200]}); not touching it"
        ) from None


def load(path: Path, fmt: str) -> Any:
    """The document a :class:`~.spec.ConfigFile` edits: a dict (JSON) or the text (TOML)."""
    text = read_text(path)
    if fmt == "toml":
        toml_data(text or "", path)  # refuse a broken file before editing it
        return text or ""
    return parse_json(text, path)


def dump(doc: Any, fmt: str, old_text: str | None) -> str:
    """The document as the file's text, JSON in the style of ``old_text``."""
    if fmt == "toml":
        return doc
    indent: int | str | None = 2
    newline = "\n"
    if old_text and old_text.strip():
        body = old_text.strip("\n")
        lines = body.splitlines()
        if len(lines) == 1:
            indent = None
        else:
            first = next((ln for ln in lines[1:] if ln.strip()), "  ")
            indent = first[: len(first) - len(first.lstrip())] or 2
        newline = "\n" if old_text.endswith("\n") else ""
    return json.dumps(doc, indent=indent, ensure_ascii=False) + newline


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


# --------------------------------------------------------------------------- writing
def backups(path: Path) -> list[Path]:
    """This file's backups, newest first."""
    return sorted(path.parent.glob(f"{path.name}.bak-*"), key=lambda p: p.name, reverse=True)


def write_file(path: Path, text: str | None) -> Path | None:
    """Back the old file up, then replace it atomically with ``text`` (None: delete it).
    Returns the backup's path (None: there was no file)."""
    backup = None
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        stamp = time.strftime("%Y%m%d-%H%M%S")
        backup = path.with_name(f"{path.name}.bak-{stamp}")
        n = 1
        while backup.exists():
            backup = path.with_name(f"{path.name}.bak-{stamp}-{n}")
            n += 1
        shutil.copy2(path, backup)
    if text is None:
        path.unlink(missing_ok=True)
        return backup
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8", newline="")
    if path.exists():
        shutil.copymode(path, tmp)
    os.replace(tmp, path)
    return backup


def restore_text(path: Path, doc: Any, fmt: str) -> str | None:
    """The bytes (as text) of the newest backup holding the same document as ``doc``, if any:
    uninstall then gives back the user's file exactly as it was."""
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
    untouched."""
    out = copy(doc)
    hooks = out.get(key)
    if hooks is None:
        hooks = out[key] = {}
    if not isinstance(hooks, dict):
        raise InvalidInput(f'"{key}" is not a JSON object; not touching it')
    for event, groups_wanted in wanted.items():
        groups = hooks.get(event)
        if groups is None:
            groups = []
        if not isinstance(groups, list):
            raise InvalidInput(f'"{key}.{event}" is not a JSON list; not touching it')
        mine = [g for g in groups if _group_is_ours(g, is_ours)]
        if mine == groups_wanted:
            continue
        hooks[event] = [g for g in groups if g not in mine] + groups_wanted
    return out


def _group_is_ours(group: object, is_ours: Callable[[object], bool]) -> bool:
    return (isinstance(group, dict) and isinstance(group.get("hooks"), list)
            and bool(group["hooks"]) and all(is_ours(h) for h in group["hooks"]))  # fmt: skip


def without_groups(doc: dict, is_ours: Callable[[object], bool], events: Iterable[str],
                   key: str = "hooks") -> dict:  # fmt: skip
    """``doc`` without our hooks: a group left with none of the user's goes, so does an event
    of ours left with no group, and ``key`` left empty."""
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
        elif event in events:
            del hooks[event]
    if not hooks:
        del out[key]
    return out


def groups_present(doc: dict, is_ours: Callable[[object], bool], key: str = "hooks") -> list[str]:
    hooks = doc.get(key) if isinstance(doc.get(key), dict) else {}
    return [e for e, groups in hooks.items() if isinstance(groups, list) and any(
        is_ours(h) for g in groups if isinstance(g, dict) and isinstance(g.get("hooks"), list)
        for h in g["hooks"])]  # fmt: skip


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


# --------------------------------------------------------------------------- MCP server (JSON)
def with_server(doc: dict, entry: dict, key: str = "mcpServers", name: str = SERVER_NAME) -> dict:
    """``doc`` with our server entry under ``key``; an entry of that name already there is
    kept as it is (the user's, or ours from before)."""
    out = copy(doc)
    servers = out.get(key)
    if servers is None:
        servers = out[key] = {}
    if not isinstance(servers, dict):
        raise InvalidInput(f'"{key}" is not a JSON object; not touching it')
    servers.setdefault(name, entry)
    return out


def without_server(doc: dict, entry: dict, key: str = "mcpServers",
                   name: str = SERVER_NAME) -> dict:  # fmt: skip
    """``doc`` without our server entry, only when it is still exactly what we wrote."""
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


# --------------------------------------------------------------------------- TOML (as text)
def toml_value(value: Any) -> str:
    """A string, bool, int or list of them as TOML (JSON's string escapes are TOML's, with
    ``ensure_ascii=False``: no surrogate pair escapes)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def toml_key(part: str) -> str:
    bare = part and all(c.isascii() and (c.isalnum() or c in "-_") for c in part)
    return part if bare else json.dumps(part, ensure_ascii=False)


def _lookup(data: dict, path: tuple[str, ...]) -> Any:
    for p in path:
        if not isinstance(data, dict) or p not in data:
            return None
        data = data[p]
    return data


def _header_line(line: str) -> str | None:
    """The table name of a ``[a.b]`` header line (comment allowed), else None."""
    s = line.strip()
    if s.startswith("[") and not s.startswith("[["):
        end = s.find("]")
        rest = s[end + 1 :].strip() if end > 0 else "x"
        if not rest or rest.startswith("#"):
            return ".".join(p.strip().strip('"') for p in s[1:end].split("."))
    return None


def toml_add_table(text: str, table: tuple[str, ...], values: dict) -> str:
    """``text`` with a table ``[table]`` of ``values`` appended, each line marked; unchanged when
    the table already exists (the user's, or ours: kept as it is)."""
    data = toml_data(text)
    if _lookup(data, table) is not None:
        return text
    lines = [f"[{'.'.join(toml_key(p) for p in table)}]  {TOML_MARK}"]
    lines += [f"{toml_key(k)} = {toml_value(v)}  {TOML_MARK}" for k, v in values.items()]
    out = _append(text, lines)
    _check(out, table, values, f"cannot add [{'.'.join(table)}] to this TOML file by appending "
           "(is it an inline table?); add it by hand")  # fmt: skip
    return out


def _check(out: str, path: tuple[str, ...], want: Any, message: str) -> None:
    """Refuse an edit whose result does not parse to what we meant."""
    try:
        ok = _lookup(tomllib.loads(out), path) == want
    except (tomllib.TOMLDecodeError, RecursionError):
        ok = False
    if not ok:
        raise InvalidInput(message)


def toml_set(text: str, table: tuple[str, ...], key: str, value: Any) -> str:
    """``text`` with ``key = value`` in ``[table]`` (inserted under the table's header, or a
    new marked table appended); unchanged when it already holds that value. A different value
    the user set is refused (never overwritten)."""
    data = toml_data(text)
    have = _lookup(data, (*table, key))
    if have == value:
        return text
    if have is not None:
        raise InvalidInput(f"{'.'.join((*table, key))} is set to {have!r} in the TOML file; "
                           f"set it to {value!r} by hand")  # fmt: skip
    line = f"{toml_key(key)} = {toml_value(value)}  {TOML_MARK}"
    name = ".".join(table)
    lines = text.splitlines(keepends=True)
    at = next((i for i, ln in enumerate(lines) if _header_line(ln) == name), None)
    if at is None:
        out = _append(text, [f"[{'.'.join(toml_key(p) for p in table)}]  {TOML_MARK}", line])
    else:
        nl = "\r\n" if lines[at].endswith("\r\n") else "\n"
        if not lines[at].endswith("\n"):
            lines[at] += nl
        lines.insert(at + 1, line + nl)
        out = "".join(lines)
    _check(out, (*table, key), value, f"cannot set {name}.{key} in this TOML file; set it by hand")
    return out


def _append(text: str, lines: list[str]) -> str:
    nl = "\r\n" if "\r\n" in text else "\n"
    sep = "" if not text or text.endswith("\n") else nl
    blank = f"{TOML_MARK}{nl}" if text.strip() else ""  # a marked line parts our block
    return text + sep + blank + "".join(ln + nl for ln in lines)


def toml_remove_marked(text: str) -> str:
    """``text`` without every line we added (those ending with :data:`TOML_MARK`)."""
    kept = [ln for ln in text.splitlines(keepends=True) if not ln.rstrip().endswith(TOML_MARK)]
    out = "".join(kept)
    toml_data(out)
    return out


def toml_marked(text: str) -> list[str]:
    """The tables and keys of our marked lines, for ``status``."""
    out = []
    for ln in text.splitlines():
        if ln.rstrip().endswith(TOML_MARK):
            head = _header_line(ln)
            if head is not None:
                out.append(head)
    return out
