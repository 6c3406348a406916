"""Who is calling: project and agent ids, stable across restarts, and sub-agents.

Identity comes from the process environment (or an authenticated connection), never from tool
arguments: a model cannot claim to be another agent.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel

from retrieval.storage.buckets import SCOPE_NAMES, bucket_of
from server.service.core import ids
from server.service.core.ids import derive_agent_id, derive_project_id, identity_fields  # noqa: F401 - re-exported


def git_root(path: Path) -> Path | None:
    found = ids.git_root(path)
    return Path(found) if found is not None else None


def project_root(cwd: Path) -> Path:
    return Path(ids.project_root(cwd))


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
        scopes = scopes or list(SCOPE_NAMES)
        out: list[str] = []
        for scope in scopes:
            out.append(self.bucket(scope))
            if scope == "private" and self.parent_agent_id:
                out.append(bucket_of("private", self.project_id, self.parent_agent_id))
        return list(dict.fromkeys(out))


def identity_from_env(env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Identity:
    env = os.environ if env is None else env
    cwd = cwd or Path.cwd()
    return Identity(**identity_fields(env, cwd), root=str(project_root(cwd.resolve())))
