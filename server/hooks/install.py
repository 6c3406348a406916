"""``pattern-memory hooks install | uninstall | status``: our hook entries and MCP server entry
in any client's config files, as its :class:`~server.hooks.clients.spec.ClientSpec` names them.

The files and their layouts are each client's (``server/hooks/clients/<name>.py``, with the
documentation each cites); the rules are common (:mod:`server.hooks.clients.config_files`):
existing settings are never clobbered (ours go beside the user's); running install twice
changes nothing; before a file changes, a copy is written next to it (``<name>.bak-<time>``);
uninstall removes exactly what install added (and the server entry only while it is still
ours), gives the file back byte for byte when nothing else changed in it, and deletes a file
it leaves empty where the client allows (a file install created; never a link's target).

A client's install is all or nothing: every file is read, parsed and given its new bytes
before any is written; a file refused (not valid JSON, a folder, a device, a link out of the
project, unreadable) stops the install with nothing changed, and a write that fails puts back
the files already written. The file I/O is :mod:`server.hooks.clients.safe_files`'.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from retrieval.errors import InvalidInput

from .clients import BROKEN, CLIENTS, get
from .clients import config_files as cf
from .clients import safe_files as sf
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


def _inside(scope: str, project: Path | None) -> Path | None:
    """The folder a scope's files must resolve into: the project's (None: the user's files,
    which may be links to anywhere, e.g. a dotfiles repository)."""
    return (project or Path.cwd()) if scope == "project" else None


def _with_backup(line: str, backup: Path | None) -> str:
    return line + (f" (backup {backup})" if backup else "")


@dataclass
class _Plan:
    """One file of an install: read, changed by its parts and encoded before any is written."""

    path: Path  # as the client names it
    real: Path  # the file read and written (where a link leads)
    old: bytes | None  # its bytes (None: no file)
    mode: int | None  # its permission bits (None: a new file's)
    new: bytes | None | object  # the new bytes (None: delete it; _KEEP: unchanged)
    results: list = field(default_factory=list)  # (part, changed, document before the part)
    backup: Path | None = None


_KEEP = object()


def _plan(spec: ClientSpec, scope: str, project: Path | None, adding: bool) -> list[_Plan]:
    """Every file's new bytes, or ``InvalidInput`` (nothing written): the client's files, each
    read once and changed by every one of its parts in order."""
    inside = _inside(scope, project)
    by_real: dict[Path, tuple[Path, list[ConfigFile]]] = {}
    for f, path in _files(spec, scope, project):
        by_real.setdefault(sf.target(path, inside), (path, []))[1].append(f)
    plans = []
    for real, (path, files) in by_real.items():
        fmt = files[0].fmt
        if any(f.fmt != fmt for f in files):
            raise InvalidInput(f"{spec.name}: {path} is edited as both JSON and TOML")
        try:
            plans.append(_plan_file(path, real, files, fmt, adding))
        except OSError as exc:
            raise InvalidInput(
                f"cannot read {path}: {exc.strerror or exc}; not touching it"
            ) from None
        except RecursionError:
            raise InvalidInput(f"{path} is nested too deeply; not touching it") from None
    return plans


def _plan_file(path: Path, real: Path, files: list[ConfigFile], fmt: str, adding: bool) -> _Plan:
    got = sf.read(real, path)
    old, mode = got if got is not None else (None, None)
    old_text = cf.decode(old, path)
    doc = cf.parse(old_text, path, fmt)
    plan = _Plan(path, real, old, mode, _KEEP)
    for f in files:
        new = (f.add if adding else f.remove)(cf.copy(doc))
        plan.results.append((f, not cf.same(new, doc, fmt), doc))
        doc = new
    if not any(changed for _, changed, _ in plan.results):
        return plan
    text = None if adding else cf.restore_text(real, doc, fmt)
    if text is None:
        empty = not adding and cf.is_empty(doc) and all(f.drop_empty for f in files)
        keep_link = os.path.islink(path)  # a link install did not make: never left dangling
        text = None if empty and not keep_link else cf.dump(doc, fmt, old_text)
    plan.new = None if text is None else cf.encode(text, path)
    return plan


def _write(plans: list[_Plan]) -> None:
    """Write every changed file (a backup of each first); when one fails, those already
    written are put back and the error says what could not be."""
    done: list[_Plan] = []
    for plan in plans:
        if plan.new is _KEEP:
            continue
        try:
            if plan.old is not None:
                plan.backup = sf.backup(plan.real, plan.old, plan.mode or 0o600)
            if plan.new is None:
                os.unlink(plan.real)
            else:
                sf.replace(plan.real, plan.new, plan.mode)  # type: ignore[arg-type]
        except (OSError, InvalidInput) as exc:
            why = exc.message if isinstance(exc, InvalidInput) else exc.strerror or exc
            left = _undo(done)
            said = (
                f"; left changed (put back by hand from the backup beside each): "
                f"{', '.join(map(str, left))}"
                if left
                else "; nothing was changed"
            )
            raise InvalidInput(f"cannot write {plan.path}: {why}{said}") from None
        done.append(plan)


def _undo(done: list[_Plan]) -> list[Path]:
    """Put files written back as they were; the ones that could not be."""
    left = []
    for plan in reversed(done):
        try:
            if plan.old is None:
                os.unlink(plan.real)
            else:
                sf.replace(plan.real, plan.old, plan.mode)
        except OSError:
            left.append(plan.path)
    return left


def _apply(spec: ClientSpec, scope: str, project: Path | None, adding: bool) -> list[str]:
    """Install (``adding``) or uninstall, all or nothing: every file read, parsed and changed
    first; written only when all of them could be (one backup per file and run)."""
    plans = _plan(spec, scope, project, adding)
    _write(plans)
    lines = []
    for plan in plans:
        for f, changed, before in plan.results:
            line = _said(f, plan.path, adding, changed, before)
            if line:
                lines.append(_with_backup(line, plan.backup) if changed else line)
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
                    real = sf.target(path, _inside(scope, project))
                    found = f.present(cf.parse(cf.decode(_bytes(real, path), path), path, f.fmt))
                except (InvalidInput, OSError, RecursionError) as exc:
                    parts.append(f"cannot read {path}: {exc}")
                    continue
                parts.append(_state(f, path, found))
            lines.append(("  " if client is None else "") + f"{scope}: " + "; ".join(parts))
        if client is None and spec.lost:
            lines.append("  not supported by the client: " + "; ".join(spec.lost))
    if client is None:
        lines += [f"{name}: not loaded ({why})" for name, why in BROKEN.items()]
    return lines


def _bytes(real: Path, path: Path) -> bytes | None:
    got = sf.read(real, path)
    return None if got is None else got[0]


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


def apply_found(adding: bool, scope: str = "project",
                project: Path | None = None) -> tuple[list[str], list[str]]:  # fmt: skip
    """``--client auto``: install (``adding``) or uninstall for every client found, each all or
    nothing; the lines said, per client, and the titles of the clients that failed (their
    error in their lines: nothing of theirs was changed, or what was is named)."""
    found = detected()
    lines = [f"clients found: {', '.join(s.title for s in found) or 'none'}"]
    failed = []
    for spec in found:
        lines.append(f"{spec.title}:")
        try:
            lines += [f"  {line}" for line in _apply(spec, scope, project, adding)]
        except InvalidInput as exc:
            failed.append(spec.title)
            lines.append(f"  not {'installed' if adding else 'uninstalled'}: {exc.message}")
    return lines, failed
