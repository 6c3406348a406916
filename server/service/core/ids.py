"""Stable project and agent ids from the environment and a working directory.

Standard library only, and the cheap part of it (``os.path``, no ``pathlib``; ``hashlib`` and
``socket`` only when an id is derived): the hook client (``server/hooks/hookclient.py``), which must
start in a few milliseconds, derives the caller's identity with these same functions as the
service (``server/service/core/identity.py`` builds its :class:`Identity` from
:func:`identity_fields` and wraps the folder functions to return ``Path``). Paths are strings
here (any ``os.PathLike`` is accepted).
"""

from __future__ import annotations

import os
import sys
from _collections_abc import Mapping  # collections.abc's own module, loaded with os


def first(env: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return value
    return None


def slug(text: str) -> str:
    import re  # here: the hook client, which imports this module, has no other use for it

    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-").lower() or "root"


def git_root(path: str | os.PathLike) -> str | None:
    """The nearest folder at or above ``path`` holding ``.git``, or None."""
    cur = os.fspath(path)
    while True:
        if os.path.exists(os.path.join(cur, ".git")):
            return cur
        parent = os.path.dirname(cur)
        if parent == cur:
            return None
        cur = parent


def project_root(cwd: str | os.PathLike) -> str:
    return git_root(cwd) or os.fspath(cwd)


def _digest(text: str, n: int) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:n]


def derive_project_id(cwd: str | os.PathLike) -> str:
    root = project_root(os.path.realpath(cwd))
    return f"{slug(os.path.basename(root) or root)}-{_digest(root, 8)}"


def derive_agent_id(cwd: str | os.PathLike) -> str:
    """Stable per host + project path: a restarted agent keeps its memories."""
    import socket

    root = project_root(os.path.realpath(cwd))
    return f"agent-{_digest(f'{socket.gethostname()}|{root}', 12)}"


def identity_fields(env: Mapping[str, str], cwd: str | os.PathLike) -> dict[str, str | None]:
    """``project_id``, ``agent_id``, ``subagent_type``, ``parent_agent_id`` (Pattern's rules:
    the environment first, else derived from the project folder; a sub-agent's id is its
    parent's plus its type)."""
    project = first(env, "PATTERN_PROJECT_ID", "LOOMINAL_PROJECT_ID") or derive_project_id(cwd)
    subagent = first(env, "PATTERN_SUBAGENT_TYPE", "LOOMINAL_SUBAGENT_TYPE")
    parent = first(env, "PATTERN_PARENT_AGENT_ID", "LOOMINAL_PARENT_AGENT_ID")
    agent = first(env, "PATTERN_AGENT_ID", "LOOMINAL_AGENT_ID")
    if subagent:
        parent = parent or agent or derive_agent_id(cwd)
        if agent is None or agent == parent:
            agent = f"{parent}.{slug(subagent)}"
    else:
        parent = None
    return {
        "project_id": project,
        "agent_id": agent or derive_agent_id(cwd),
        "subagent_type": subagent,
        "parent_agent_id": parent,
    }


def default_home(env: Mapping[str, str] | None = None) -> str:
    """The store folder when ``PATTERN_HOME`` is unset: the user data folder, as
    ``platformdirs.user_data_dir("pattern-memory", appauthor=False)`` names it (a test keeps
    the two equal)."""
    env = os.environ if env is None else env
    home = os.path.expanduser("~")
    if sys.platform == "darwin":
        return os.path.join(home, "Library", "Application Support", "pattern-memory")
    if sys.platform == "win32":
        base = env.get("LOCALAPPDATA") or os.path.join(home, "AppData", "Local")
        return os.path.join(base, "pattern-memory")
    base = env.get("XDG_DATA_HOME", "").strip() or os.path.join(home, ".local", "share")
    return os.path.join(os.path.expanduser(base), "pattern-memory")


def store_home(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    return os.path.expanduser(env.get("PATTERN_HOME") or default_home(env))
