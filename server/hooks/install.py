"""``pattern-memory hooks install | uninstall | status``: our entries in Claude Code's settings.

Where Claude Code reads them (https://code.claude.com/docs/en/hooks, /settings, /mcp):

- hooks: ``.claude/settings.json`` of the project (``--project``, the default) or
  ``~/.claude/settings.json`` (``--user``), under ``"hooks": {EVENT: [{"matcher": …,
  "hooks": [{"type": "command", "command": …, "timeout": …}]}]}``; events without tools take
  no matcher;
- the MCP server: ``.mcp.json`` at the project root (project scope) or the top-level
  ``mcpServers`` of ``~/.claude.json`` (user scope). Claude Code does not read MCP servers from
  ``settings.json``, so that is where the server entry goes.

Rules: existing settings are never clobbered (our hooks go in matcher groups of their own,
beside the user's); running install twice changes nothing; before a file changes, a copy is
written next to it (``<name>.bak-<time>``); uninstall removes exactly our groups (recognised by
their command: this checkout's hook client) and our server entry if it is still ours, and
nothing else (a ``hooks`` object we created and left empty goes too, and a settings or
``.mcp.json`` file left empty is removed).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import time
from pathlib import Path

from retrieval.errors import InvalidInput

CLIENT = Path(__file__).resolve().with_name("hookclient.py")
SERVER_NAME = "pattern-memory"
# event -> matcher (None: the event takes none). Failed commands come from the Bash tool.
EVENTS: dict[str, str | None] = {
    "SessionStart": "startup|resume|clear|compact",
    "UserPromptSubmit": None,
    "PostToolUse": "Bash",
    "PostToolUseFailure": "Bash",
    "PreCompact": None,
    "Stop": None,
    "SessionEnd": None,
}
TIMEOUT_S = 10  # the client's own limit; ours is PATTERN_HOOK_DEADLINE (1.5 s)


def hook_command(event: str) -> str:
    """``python -S …/hookclient.py EVENT``: no site-packages scan at start (it is the hook's
    largest cost); the client imports only the standard library and this checkout."""
    return f"{shlex.quote(sys.executable)} -S {shlex.quote(str(CLIENT))} {event}"


def is_ours(hook: object) -> bool:
    cmd = hook.get("command", "") if isinstance(hook, dict) else ""
    return isinstance(cmd, str) and ("hookclient.py" in cmd or "pattern-memory hook " in cmd)


def server_entry() -> dict:
    exe = Path(sys.executable).with_name("pattern-memory")
    if exe.exists():
        return {"command": str(exe), "args": ["serve"]}
    found = shutil.which("pattern-memory")
    if found:
        return {"command": found, "args": ["serve"]}
    return {"command": sys.executable, "args": ["-m", "server.cli", "serve"]}


def targets(scope: str, project: Path | None = None) -> tuple[Path, Path, list[str]]:
    """(settings file, MCP file, key path of mcpServers inside it) for a scope."""
    if scope == "user":
        home = Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")
        return home / "settings.json", Path.home() / ".claude.json", ["mcpServers"]
    root = project or Path.cwd()
    return root / ".claude" / "settings.json", root / ".mcp.json", ["mcpServers"]


def _load(path: Path) -> dict:
    if not path.exists():
        return {}
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{path} is not valid JSON ({exc}); not touching it") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{path} does not hold a JSON object; not touching it")
    return data


def _save(path: Path, data: dict) -> Path | None:
    """Back the old file up, then replace it atomically. Returns the backup's path."""
    backup = None
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        backup = path.with_name(f"{path.name}.bak-{time.strftime('%Y%m%d-%H%M%S')}")
        n = 1
        while backup.exists():
            backup = path.with_name(f"{path.name}.bak-{time.strftime('%Y%m%d-%H%M%S')}-{n}")
            n += 1
        shutil.copy2(path, backup)
    if not data and path.name in ("settings.json", ".mcp.json"):
        path.unlink()  # nothing left but what we had added: the file goes too
        return backup
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if path.exists():
        shutil.copymode(path, tmp)
    os.replace(tmp, path)
    return backup


def with_hooks(settings: dict) -> dict:
    """``settings`` with our hook groups (the user's groups untouched, ours once)."""
    out = json.loads(json.dumps(settings))
    hooks = out.setdefault("hooks", {})
    for event, matcher in EVENTS.items():
        groups = hooks.setdefault(event, [])
        want = {"type": "command", "command": hook_command(event), "timeout": TIMEOUT_S}
        mine = [g for g in groups if isinstance(g, dict) and g.get("hooks")
                and all(is_ours(h) for h in g["hooks"])]  # fmt: skip
        group = {"hooks": [want]} if matcher is None else {"matcher": matcher, "hooks": [want]}
        if mine == [group]:
            continue
        hooks[event] = [g for g in groups if g not in mine] + [group]
    return out


def without_hooks(settings: dict) -> dict:
    out = json.loads(json.dumps(settings))
    hooks = out.get("hooks")
    if not isinstance(hooks, dict):
        return out
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
        elif event in EVENTS:
            del hooks[event]
    if not hooks:
        del out["hooks"]
    return out


def install(scope: str = "project", project: Path | None = None) -> list[str]:
    settings_path, mcp_path, _ = targets(scope, project)
    lines = []
    before = _load(settings_path)
    after = with_hooks(before)
    if after != before:
        backup = _save(settings_path, after)
        lines.append(
            f"hooks written to {settings_path}" + (f" (backup {backup})" if backup else "")
        )
    else:
        lines.append(f"hooks already installed in {settings_path}")
    mcp = _load(mcp_path)
    servers = mcp.setdefault("mcpServers", {})
    if SERVER_NAME in servers:
        lines.append(f"MCP server {SERVER_NAME!r} already configured in {mcp_path} (kept)")
    else:
        servers[SERVER_NAME] = server_entry()
        backup = _save(mcp_path, mcp)
        lines.append(f"MCP server added to {mcp_path}" + (f" (backup {backup})" if backup else ""))
    return lines


def uninstall(scope: str = "project", project: Path | None = None) -> list[str]:
    settings_path, mcp_path, _ = targets(scope, project)
    lines = []
    before = _load(settings_path)
    after = without_hooks(before)
    if after != before:
        backup = _save(settings_path, after)
        lines.append(f"hooks removed from {settings_path} (backup {backup})")
    else:
        lines.append(f"no pattern-memory hooks in {settings_path}")
    mcp = _load(mcp_path)
    entry = (mcp.get("mcpServers") or {}).get(SERVER_NAME)
    if entry is not None and entry == server_entry():
        del mcp["mcpServers"][SERVER_NAME]
        if not mcp["mcpServers"]:
            del mcp["mcpServers"]
        backup = _save(mcp_path, mcp)
        lines.append(f"MCP server removed from {mcp_path} (backup {backup})")
    elif entry is not None:
        lines.append(f"MCP server {SERVER_NAME!r} in {mcp_path} was changed by hand: kept")
    return lines


def status(project: Path | None = None) -> list[str]:
    lines = []
    for scope in ("project", "user"):
        settings_path, mcp_path, _ = targets(scope, project)
        try:
            settings = _load(settings_path)
            mcp = _load(mcp_path)
        except (InvalidInput, OSError) as exc:
            lines.append(f"{scope}: cannot read: {exc}")
            continue
        hooks = settings.get("hooks") if isinstance(settings.get("hooks"), dict) else {}
        events = [e for e in EVENTS if any(
            is_ours(h) for g in hooks.get(e) or [] if isinstance(g, dict)
            for h in g.get("hooks") or [])]  # fmt: skip
        server = SERVER_NAME in (mcp.get("mcpServers") or {})
        state = ", ".join(events) if events else "no hooks"
        lines.append(f"{scope}: {settings_path}: {state}; MCP server in {mcp_path}: "
                     f"{'yes' if server else 'no'}")  # fmt: skip
    return lines
