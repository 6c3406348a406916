"""Stable project and agent ids from the environment and a working directory.

Standard library only: the hook client (``server/hookclient.py``), which must start in a few
milliseconds, derives the caller's identity with these same functions as the service
(``server/service/identity.py`` builds its :class:`Identity` from :func:`identity_fields`).
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import sys
from collections.abc import Mapping
from pathlib import Path


def first(env: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return value
    return None


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-").lower() or "root"


def git_root(path: Path) -> Path | None:
    for parent in [path, *path.parents]:
        if (parent / ".git").exists():
            return parent
    return None


def project_root(cwd: Path) -> Path:
    return git_root(cwd) or cwd


def derive_project_id(cwd: Path) -> str:
    root = project_root(cwd.resolve())
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:8]
    return f"{slug(root.name)}-{digest}"


def derive_agent_id(cwd: Path) -> str:
    """Stable per host + project path: a restarted agent keeps its memories."""
    root = project_root(cwd.resolve())
    digest = hashlib.sha256(f"{socket.gethostname()}|{root}".encode()).hexdigest()[:12]
    return f"agent-{digest}"


def identity_fields(env: Mapping[str, str], cwd: Path) -> dict[str, str | None]:
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


def default_home(env: Mapping[str, str] | None = None) -> Path:
    """The store folder when ``PATTERN_HOME`` is unset: the user data folder, as
    ``platformdirs.user_data_dir("pattern-memory", appauthor=False)`` names it (a test keeps
    the two equal)."""
    env = os.environ if env is None else env
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "pattern-memory"
    if sys.platform == "win32":
        base = env.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "pattern-memory"
    base = env.get("XDG_DATA_HOME", "").strip() or str(Path.home() / ".local" / "share")
    return Path(base).expanduser() / "pattern-memory"


def store_home(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get("PATTERN_HOME") or default_home(env)).expanduser()
