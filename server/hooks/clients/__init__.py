"""The agent clients we install hooks for, by name: ``CLIENTS[name]`` is its
:class:`~.spec.ClientSpec`, :func:`get` the same with a clear error.

Each client is a module of this package named in :data:`NAMES` and defining ``SPEC``; a module
that is not there (yet) is skipped, one that fails to import is skipped and named in
:data:`BROKEN` (``hooks status`` shows it), so one client never breaks another's hooks.
Imported by the daemon and the CLI, never by the hook client (which stays standard library
only and passes ``--client`` through unread).
"""

from __future__ import annotations

import importlib
import logging

from retrieval.errors import InvalidInput

from .spec import Binding, ClientSpec, ConfigFile, Installer

__all__ = ["BROKEN", "CLIENTS", "NAMES", "Binding", "ClientSpec", "ConfigFile", "Installer",
           "get"]  # fmt: skip

NAMES = ("claude", "codex", "gemini", "cursor", "copilot")
DEFAULT = "claude"
log = logging.getLogger("pattern_memory.hooks")
# each client's module, imported by its literal name (the layer test reads these imports)
MODULES = {
    "claude": lambda: importlib.import_module("server.hooks.clients.claude"),
    "codex": lambda: importlib.import_module("server.hooks.clients.codex"),
    "gemini": lambda: importlib.import_module("server.hooks.clients.gemini"),
    "cursor": lambda: importlib.import_module("server.hooks.clients.cursor"),
    "copilot": lambda: importlib.import_module("server.hooks.clients.copilot"),
}


def _load() -> tuple[dict[str, ClientSpec], dict[str, str]]:
    found: dict[str, ClientSpec] = {}
    broken: dict[str, str] = {}
    for name in NAMES:
        module = f"{__name__}.{name}"
        try:
            spec = MODULES[name]().SPEC
        except ModuleNotFoundError as exc:
            if exc.name == module:
                continue  # not written yet
            broken[name] = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # noqa: BLE001 - one client's bug never breaks the others
            broken[name] = f"{type(exc).__name__}: {exc}"
        else:
            if isinstance(spec, ClientSpec) and spec.name == name:
                found[name] = spec
            else:
                broken[name] = f"{module}.SPEC is not a ClientSpec named {name!r}"
    for name, why in broken.items():
        log.warning("client %s not loaded: %s", name, why)
    return found, broken


CLIENTS, BROKEN = _load()


def get(name: str | None) -> ClientSpec:
    """The client called ``name`` (None: Claude Code); an unknown one raises ``InvalidInput``."""
    name = name or DEFAULT
    if not isinstance(name, str):
        raise InvalidInput(f"expected a client name; found a JSON {type(name).__name__}")
    spec = CLIENTS.get(name)
    if spec is None:
        why = f" (its module failed to load: {BROKEN[name]})" if name in BROKEN else ""
        raise InvalidInput(f"unknown client {name[:100]!r}{why}; one of {', '.join(CLIENTS)}")
    return spec
