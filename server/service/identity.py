"""Who is calling: project and agent ids, stable across restarts, and sub-agents.

Identity comes from the process environment (or an authenticated connection), never from tool
arguments: a model cannot claim to be another agent.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel

from retrieval.buckets import bucket_of


def _first(env: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return value
    return None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-").lower() or "root"


def git_root(path: Path) -> Path | None:
    for parent in [path, *path.parents]:
        if (parent / ".git").exists():
            return parent
    return None


def project_root(cwd: Path) -> Path:
    return git_root(cwd) or cwd


class Identity(BaseModel):
    """The caller. ``parent_agent_id`` is set for sub-agents. ``root`` is the caller's project
    folder on this machine (local callers only: its own process, or a bridge on the same
    machine, trusted through the local secret): the default folder to ingest, the base of
    relative paths, the default allowed directory. A remote agent has none."""

    project_id: str
    agent_id: str
    subagent_type: str | None = None
    parent_agent_id: str | None = None
    root: str | None = None

    @property
    def is_subagent(self) -> bool:
        return self.parent_agent_id is not None

    def bucket(self, scope: str) -> str:
        return bucket_of(scope, self.project_id, self.agent_id)

    def visible_buckets(self, scopes: list[str] | None = None) -> list[str]:
        """The buckets this caller may read (Pattern's visibility table).

        private: its own (this project) and, for a sub-agent, its parent's; personal: its own
        (a sub-agent never sees the parent's personal bucket, which holds core memories);
        team: this project's; public: everyone's.
        """
        scopes = scopes or ["private", "personal", "team", "public"]
        out: list[str] = []
        for scope in scopes:
            out.append(self.bucket(scope))
            if scope == "private" and self.parent_agent_id:
                out.append(bucket_of("private", self.project_id, self.parent_agent_id))
        return list(dict.fromkeys(out))


def derive_project_id(cwd: Path) -> str:
    root = project_root(cwd.resolve())
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:8]
    return f"{_slug(root.name)}-{digest}"


def derive_agent_id(cwd: Path) -> str:
    """Stable per host + project path: a restarted agent keeps its memories."""
    root = project_root(cwd.resolve())
    digest = hashlib.sha256(f"{socket.gethostname()}|{root}".encode()).hexdigest()[:12]
    return f"agent-{digest}"


def identity_from_env(env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Identity:
    env = os.environ if env is None else env
    cwd = cwd or Path.cwd()
    project = _first(env, "PATTERN_PROJECT_ID", "LOOMINAL_PROJECT_ID") or derive_project_id(cwd)
    subagent = _first(env, "PATTERN_SUBAGENT_TYPE", "LOOMINAL_SUBAGENT_TYPE")
    parent = _first(env, "PATTERN_PARENT_AGENT_ID", "LOOMINAL_PARENT_AGENT_ID")
    agent = _first(env, "PATTERN_AGENT_ID", "LOOMINAL_AGENT_ID")
    if subagent:
        parent = parent or agent or derive_agent_id(cwd)
        if agent is None or agent == parent:
            agent = f"{parent}.{_slug(subagent)}"
    else:
        parent = None
    return Identity(
        project_id=project,
        agent_id=agent or derive_agent_id(cwd),
        subagent_type=subagent,
        parent_agent_id=parent,
        root=str(project_root(cwd.resolve())),
    )
