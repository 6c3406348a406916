"""claude-mem: its SQLite database (``~/.claude-mem/claude-mem.db``).

The tables as claude-mem's migrations leave them (``src/services/sqlite/SessionStore.ts``):

* ``observations``: one per observation the worker distilled from a tool call; ``type`` (decision,
  bugfix, feature, refactor, discovery, change), ``title``, ``subtitle``, ``narrative`` (older
  rows: ``text``), ``facts`` / ``concepts`` / ``files_read`` / ``files_modified`` (JSON arrays),
  ``project``, ``memory_session_id`` (before migration 17: ``sdk_session_id``),
  ``prompt_number``, ``discovery_tokens``, ``agent_type`` / ``agent_id`` (a sub-agent's),
  ``generated_by_model``, ``metadata`` (JSON, manual memories), ``merged_into_project``,
  ``content_hash``, ``created_at`` / ``created_at_epoch`` (milliseconds);
* ``session_summaries``: one per summarised prompt: ``request``, ``investigated``, ``learned``,
  ``completed``, ``next_steps``, ``notes``, ``files_read`` / ``files_edited``, ``project``,
  ``prompt_number``, dates;
* ``sdk_sessions``: a session's ``platform_source`` (claude, cursor, …) and ``custom_title``.

Each observation and each summary becomes a memory: its text is the title, subtitle, narrative
and facts (a summary's: its labelled sections); concepts become tags; the type is the kind;
every other column is kept. ``user_prompts`` (raw prompts) are not memories and are not read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import sqlite_source as db
from .items import MemoryItem, Read, from_epoch, kept

SOURCE = "claude-mem"
EXPECTED = "a claude-mem database (~/.claude-mem/claude-mem.db) with an observations table"
SUMMARY_SECTIONS = (
    ("request", "Request"), ("investigated", "Investigated"), ("learned", "Learned"),
    ("completed", "Completed"), ("next_steps", "Next steps"), ("notes", "Notes"),
)  # fmt: skip


def json_list(value: Any) -> list[str]:
    """A JSON array column (``["a","b"]``); a plain string is one item."""
    if value is None or value == "":
        return []
    try:
        parsed = json.loads(value) if isinstance(value, str) else value
    except json.JSONDecodeError:
        return [str(value)]
    if isinstance(parsed, list):
        return [str(x) for x in parsed if x not in (None, "")]
    return [str(parsed)]


def json_dict(value: Any) -> dict:
    if not value:
        return {}
    try:
        parsed = json.loads(value)
    except (TypeError, json.JSONDecodeError):
        return {"raw": str(value)}
    return parsed if isinstance(parsed, dict) else {"value": parsed}


def _get(row, name: str) -> Any:
    return row[name] if name in row.keys() else None


def observation_text(row) -> str:
    head = [x.strip() for x in (_get(row, "title"), _get(row, "subtitle")) if x and x.strip()]
    body = (_get(row, "narrative") or _get(row, "text") or "").strip()
    facts = [f"- {f}" for f in json_list(_get(row, "facts"))]
    parts = ["\n".join(head), body, "\n".join(facts)]
    return "\n\n".join(p for p in parts if p)


def summary_text(row) -> str:
    parts = [
        f"{label}: {str(row[col]).strip()}"
        for col, label in SUMMARY_SECTIONS
        if col in row.keys() and row[col] and str(row[col]).strip()
    ]
    return "\n".join(parts)


def _sessions(conn) -> dict[str, Any]:
    """{memory session id: sdk_sessions row} (empty for a database without the table)."""
    if "sdk_sessions" not in db.tables(conn):
        return {}
    cols = db.columns(conn, "sdk_sessions")
    key = "memory_session_id" if "memory_session_id" in cols else "sdk_session_id"
    if key not in cols:
        return {}
    return {r[key]: r for r in conn.execute("SELECT * FROM sdk_sessions") if r[key]}


def _author(row, session) -> str | None:
    sub = _get(row, "agent_id") or _get(row, "agent_type")
    if sub:
        return str(sub)
    platform = _get(session, "platform_source") if session is not None else None
    return str(platform) if platform else None


def read(path: Path) -> Read:
    conn = db.open_readonly(path, SOURCE, EXPECTED)
    try:
        db.require(conn, path, SOURCE, EXPECTED,
                   {"observations": ("id", "project", "type", "created_at_epoch")})  # fmt: skip
        obs_cols = db.columns(conn, "observations")
        sess_col = "memory_session_id" if "memory_session_id" in obs_cols else "sdk_session_id"
        sessions = _sessions(conn)
        out = Read()
        for row in db.rows(conn, "SELECT * FROM observations ORDER BY id", path, SOURCE, EXPECTED):
            out.items.append(_observation(row, sess_col, sessions))
        if "session_summaries" in db.tables(conn):
            sql = "SELECT * FROM session_summaries ORDER BY id"
            for row in db.rows(conn, sql, path, SOURCE, EXPECTED):
                item = _summary(row, sess_col, sessions)
                if item.content:
                    out.items.append(item)
                else:
                    out.skipped.append((item.sourceId, "empty in the source"))
        return out
    finally:
        conn.close()


def _observation(row, sess_col: str, sessions: dict) -> MemoryItem:
    session_id = _get(row, sess_col)
    session = sessions.get(session_id)
    created = from_epoch(row["created_at_epoch"], millis=True)
    return MemoryItem(
        sourceId=f"observation:{row['id']}",
        content=observation_text(row),
        title=_get(row, "title"),
        category=row["type"],
        tags=json_list(_get(row, "concepts")),
        author=_author(row, session),
        project=_get(row, "merged_into_project") or row["project"],
        createdAt=created,
        updatedAt=created,
        fields=kept(
            table="observations", subtitle=_get(row, "subtitle"), session=session_id,
            sessionTitle=_get(session, "custom_title") if session is not None else None,
            platform=_get(session, "platform_source") if session is not None else None,
            project=row["project"], promptNumber=_get(row, "prompt_number"),
            filesRead=json_list(_get(row, "files_read")),
            filesModified=json_list(_get(row, "files_modified")),
            agentType=_get(row, "agent_type"), agentId=_get(row, "agent_id"),
            model=_get(row, "generated_by_model"), contentHash=_get(row, "content_hash"),
            discoveryTokens=_get(row, "discovery_tokens") or None,
            relevanceCount=_get(row, "relevance_count") or None,
            metadata=json_dict(_get(row, "metadata")),
        ),
    )  # fmt: skip


def _summary(row, sess_col: str, sessions: dict) -> MemoryItem:
    session_id = _get(row, sess_col if sess_col in row.keys() else "memory_session_id")
    session = sessions.get(session_id)
    created = from_epoch(row["created_at_epoch"], millis=True)
    return MemoryItem(
        sourceId=f"summary:{row['id']}",
        content=summary_text(row),
        title=(_get(session, "custom_title") if session is not None else None),
        category="session-summary",
        author=_author(row, session),
        project=_get(row, "merged_into_project") or row["project"],
        createdAt=created,
        updatedAt=created,
        fields=kept(
            table="session_summaries", session=session_id, project=row["project"],
            promptNumber=_get(row, "prompt_number"),
            filesRead=json_list(_get(row, "files_read")),
            filesEdited=json_list(_get(row, "files_edited")),
            platform=_get(session, "platform_source") if session is not None else None,
            discoveryTokens=_get(row, "discovery_tokens") or None,
        ),
    )  # fmt: skip
