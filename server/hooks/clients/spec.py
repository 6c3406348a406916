"""What one agent client is to us: its hook events bound to our handlers, the translation of its
hook JSON in and of our answer out, and the files an install changes.

Every client module (``server/hooks/clients/<name>.py``) defines ``SPEC: ClientSpec``; the
registry (:mod:`server.hooks.clients`) collects them. The daemon's hook route translates with
:attr:`ClientSpec.to_input` and :attr:`ClientSpec.to_output`; ``pattern-memory hooks install``
(:mod:`server.hooks.install`) applies :attr:`ClientSpec.installer`'s files with the helpers of
:mod:`server.hooks.clients.config_files`.

Standard library only (the daemon and the CLI import every client module).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

# our handlers (server.service.prompting.hook_events.EVENTS; repeated here so a client module needs no
# service import)
HANDLERS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "PostToolUseFailure",
            "PreCompact", "Stop", "SessionEnd")  # fmt: skip
SCOPES = ("project", "user")


@dataclass(frozen=True)
class Binding:
    """One hook entry we install: the client's event, the handler of ours it feeds, and the
    matcher of the entry (the client's own syntax; None: the entry has none)."""

    client_event: str
    handler: str
    matcher: str | None = None


@dataclass(frozen=True)
class ConfigFile:
    """One file an install changes, in one format.

    ``path(scope, project_root)`` is the file for a scope (None: the client has no such file in
    that scope). ``add`` and ``remove`` are pure: they take the file's document and return a new
    one (never change their argument): for ``"json"`` a dict (``{}`` for a missing or empty
    file), for ``"toml"`` the file's text (``""`` for a missing file; edit it with
    ``config_files.toml_*`` so a user's formatting and comments survive). ``add`` of a
    document that already holds our entries returns an equal one (idempotence); ``remove``
    takes out exactly what ``add`` puts in, and leaves a user's entry that merely looks like ours
    (the same server name, changed by hand) alone. ``present`` names what of ours the
    document holds (events, the server's name), for ``status``.

    ``kind`` picks the messages: ``"hooks"``, ``"server"`` (an MCP server entry) or
    ``"setting"`` (anything else, such as a feature flag; ``label`` names it).
    ``drop_empty``: a file that ``remove`` leaves empty (``{}`` or blank) is deleted (for
    files an install may have created; not for a client's general state file).
    """

    kind: Literal["hooks", "server", "setting"]
    path: Callable[[str, Path], Path | None]
    add: Callable[[Any], Any]
    remove: Callable[[Any], Any]
    present: Callable[[Any], list[str]]
    fmt: Literal["json", "toml"] = "json"
    drop_empty: bool = True
    label: str = ""


@dataclass(frozen=True)
class Installer:
    """The files ``hooks install`` changes for a client, applied in order."""

    files: tuple[ConfigFile, ...]
    note: str = ""  # one line for ``status`` / install output (e.g. a flag the client needs)


@dataclass(frozen=True)
class ClientSpec:
    """One agent client.

    - ``to_input(client_event, client_json)`` -> ``(handler, input)``: ``handler`` one of
      :data:`HANDLERS`, ``input`` a dict with our ``HookInput`` field names (Claude Code's:
      session_id, transcript_path, cwd, source, prompt, tool_name, tool_input, tool_response,
      tool_use_id, error, is_interrupt, trigger, reason); or None: the event is ignored.
      It must not raise on any JSON object (outside input): a missing or mistyped field is
      left out, never guessed.
    - ``to_output(client_event, text)`` -> the client's stdout JSON for injecting ``text``
      (``""``: nothing to inject; None: print nothing).
    - ``detect()``: the client is on this machine (its config folder or its binary).
    - ``lost``: what this client cannot do (events it lacks), for the docs and ``status``.
    """

    name: str
    title: str
    bindings: tuple[Binding, ...]
    to_input: Callable[[str, dict], tuple[str, dict] | None]
    to_output: Callable[[str, str], dict | None]
    installer: Installer
    detect: Callable[[], bool]
    lost: tuple[str, ...] = ()
    events: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        bad = [b.handler for b in self.bindings if b.handler not in HANDLERS]
        if bad:
            raise ValueError(f"{self.name}: unknown handler(s) {bad}; one of {HANDLERS}")
        object.__setattr__(self, "events", frozenset(b.client_event for b in self.bindings))
