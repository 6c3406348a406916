"""``pattern-memory hooks install | uninstall | status``: our hook entries and MCP server entry
in any client's config files, as its :class:`~server.hooks.clients.spec.ClientSpec` names them.

The files and their layouts are each client's (``server/hooks/clients/<name>.py``, with the
documentation each cites); the rules are common (:mod:`server.hooks.clients.config_files`):
existing settings are never clobbered (ours go beside the user's); running install twice
changes nothing; before a file changes, a copy is written next to it (``<name>.bak-<time>``);
uninstall removes exactly what install added (and the server entry only while it is still
ours), gives the file back byte for byte when nothing else changed in it, and deletes a file
it leaves empty where the client allows (a file install created).
"""

from __future__ import annotations

from pathlib import Path

from retrieval.errors import InvalidInput

from .clients import BROKEN, CLIENTS, get
from .clients import config_files as cf
from .clients.claude import MATCHERS as EVENTS  # noqa: F401 - the names before other clients
from .clients.claude import is_ours  # noqa: F401
from .clients.spec import SCOPES, ClientSpec, ConfigFile

CLIENT = cf.HOOKCLIENT  # the hook client's path
SERVER_NAME = cf.SERVER_NAME

_SAID = {  # kind -> (written, already, removed, absent) sentences; {p} the file, {l} the label
    "hooks": ("hooks written to {p}", "hooks already installed in {p}", "hooks removed from {p}",
              "no pattern-memory hooks in {p}"),
    "server": ("MCP server added to {p}",
               f"MCP server {SERVER_NAME!r} already configured in {{p}} (kept)",
               "MCP server removed from {p}", ""),
    "setting": ("{l} set in {p}", "{l} already set in {p}", "{l} removed from {p}", ""),
}  # fmt: skip


def _files(spec: ClientSpec, scope: str, project: Path | None) -> list[tuple[ConfigFile, Path]]:
    if scope not in SCOPES:
        raise InvalidInput(f"unknown scope {scope!r}; one of {', '.join(SCOPES)}")
    root = project or Path.cwd()
    out = [(f, p) for f in spec.installer.files if (p := f.path(scope, root)) is not None]
    if not out:
        raise InvalidInput(f"{spec.title} has nothing to install in the {scope} scope")
    return out


def _with_backup(line: str, backup: Path | None) -> str:
    return line + (f" (backup {backup})" if backup else "")


def _apply(spec: ClientSpec, scope: str, project: Path | None, adding: bool) -> list[str]:
    """Install (``adding``) or uninstall: the client's files, each read once, changed by every
    one of its parts in order, and written once (one backup per file and run)."""
    by_path: dict[Path, list[ConfigFile]] = {}
    for f, path in _files(spec, scope, project):
        by_path.setdefault(path, []).append(f)
    lines = []
    for path, files in by_path.items():
        fmt = files[0].fmt
        if any(f.fmt != fmt for f in files):
            raise InvalidInput(f"{spec.name}: {path} is edited as both JSON and TOML")
        old_text = cf.read_text(path)
        doc = cf.load(path, fmt)
        results = []  # (part, changed, document before the part)
        for f in files:
            new = (f.add if adding else f.remove)(cf.copy(doc))
            results.append((f, not cf.same(new, doc, fmt), doc))
            doc = new
        backup = None
        if any(changed for _, changed, _ in results):
            text = None if adding else cf.restore_text(path, doc, fmt)
            if text is None:
                empty = not adding and cf.is_empty(doc) and all(f.drop_empty for f in files)
                text = None if empty else cf.dump(doc, fmt, old_text)
            backup = cf.write_file(path, text)
        for f, changed, before in results:
            line = _said(f, path, adding, changed, before)
            if line:
                lines.append(_with_backup(line, backup) if changed else line)
    if adding and spec.installer.note:
        lines.append(spec.installer.note)
    return lines


def _said(f: ConfigFile, path: Path, adding: bool, changed: bool, before) -> str:
    written, already, removed, absent = _SAID[f.kind]
    if adding:
        template = written if changed else already
    elif changed:
        template = removed
    elif f.kind == "server" and f.present(before):
        template = f"MCP server {SERVER_NAME!r} in {{p}} was changed by hand: kept"
    else:
        template = absent
    return template.format(p=path, l=f.label)


def install(scope: str = "project", project: Path | None = None,
            client: str = "claude") -> list[str]:  # fmt: skip
    return _apply(get(client), scope, project, adding=True)


def uninstall(scope: str = "project", project: Path | None = None,
              client: str = "claude") -> list[str]:  # fmt: skip
    return _apply(get(client), scope, project, adding=False)


def status(project: Path | None = None, client: str | None = "claude") -> list[str]:
    """What is installed where: for one client, or every registered one (``client`` None)."""
    specs = [get(client)] if client else list(CLIENTS.values())
    lines = []
    for spec in specs:
        if client is None:
            lines.append(f"{spec.title} ({spec.name}): {'found' if _found(spec) else 'not found'} "
                         "on this machine")  # fmt: skip
        for scope in SCOPES:
            root = project or Path.cwd()
            files = [(f, p) for f in spec.installer.files if (p := f.path(scope, root)) is not None]
            if not files:
                lines.append(
                    f"  {scope}: not supported" if client is None else f"{scope}: not supported"
                )
                continue
            parts = []
            for f, path in files:
                try:
                    found = f.present(cf.load(path, f.fmt))
                except (InvalidInput, OSError) as exc:
                    parts.append(f"cannot read {path}: {exc}")
                    continue
                parts.append(_state(f, path, found))
            lines.append(("  " if client is None else "") + f"{scope}: " + "; ".join(parts))
        if client is None and spec.lost:
            lines.append("  not supported by the client: " + "; ".join(spec.lost))
    if client is None:
        lines += [f"{name}: not loaded ({why})" for name, why in BROKEN.items()]
    return lines


def _state(f: ConfigFile, path: Path, found: list[str]) -> str:
    if f.kind == "hooks":
        return f"{path}: {', '.join(found) if found else 'no hooks'}"
    if f.kind == "server":
        return f"MCP server in {path}: {'yes' if found else 'no'}"
    return f"{f.label or 'setting'} in {path}: {'yes' if found else 'no'}"


def _found(spec: ClientSpec) -> bool:
    try:
        return bool(spec.detect())
    except Exception:  # noqa: BLE001 - a detector's fault is "not found"
        return False


def detected() -> list[ClientSpec]:
    """The clients found on this machine (``--client auto``)."""
    return [spec for spec in CLIENTS.values() if _found(spec)]
