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

from pydantic import ValidationError

from . import sqlite_source as db
from .bounded import SourceError, load_json, plain, text, texts
from .items import MemoryItem, Read, from_epoch, invalid, kept

SOURCE = "claude-mem"
EXPECTED = "a claude-mem database (~/.claude-mem/claude-mem.db) with an observations table"
SUMMARY_SECTIONS = (
    ("request", "Request"), ("investigated", "Investigated"), ("learned", "Learned"),
    ("completed", "Completed"), ("next_steps", "Next steps"), ("notes", "Notes"),
)  # fmt: skip


def _parsed(value: Any) -> Any:
    """A JSON column's value; the text itself when it is not JSON (or over a limit)."""
    raw = text(value)
    try:
        return load_json(raw, "a JSON column")
    except (json.JSONDecodeError, SourceError):
        return raw


def json_list(value: Any) -> list[str]:
    """A JSON array column (``["a","b"]``); a plain string is one item."""
    if value is None or value == "":
        return []
    parsed = _parsed(value)
    return texts(parsed) if isinstance(parsed, list) else texts(text(parsed))


def json_dict(value: Any) -> dict:
    if not value:
        return {}
    parsed = _parsed(value)
    if isinstance(parsed, str):
        return {"raw": parsed}
    return parsed if isinstance(parsed, dict) else {"value": parsed}


def _get(row, name: str) -> Any:
    """A column's value, JSON-able (a BLOB as text, an integer past 64 bits as text)."""
    return plain(row[name]) if name in row.keys() else None


def _text(row, name: str) -> str | None:
    """A text column as text (SQLite keeps any type in any column: a number, a BLOB)."""
    return text(_get(row, name))


def observation_text(row) -> str:
    head = [x.strip() for x in (_text(row, "title"), _text(row, "subtitle")) if x and x.strip()]
    body = (_text(row, "narrative") or _text(row, "text") or "").strip()
    facts = [f"- {f}" for f in json_list(_get(row, "facts"))]
    parts = ["\n".join(head), body, "\n".join(facts)]
    return "\n\n".join(p for p in parts if p)


def summary_text(row) -> str:
    parts = [
        f"{label}: {text(row[col]).strip()}"
        for col, label in SUMMARY_SECTIONS
        if col in row.keys() and row[col] and text(row[col]).strip()
    ]
    return "\n".join(parts)


def _sessions(conn, path: Path) -> dict[str, Any]:
    """{memory session id: sdk_sessions row} (empty for a database without the table)."""
    if "sdk_sessions" not in db.tables(conn):
        return {}
    cols = db.columns(conn, "sdk_sessions")
    key = "memory_session_id" if "memory_session_id" in cols else "sdk_session_id"
    if key not in cols:
        return {}
    rows = db.rows(conn, "sdk_sessions", path, SOURCE, EXPECTED)
    return {text(r[key]): r for r in rows if r[key]}


def _author(row, session) -> str | None:
    sub = _text(row, "agent_id") or _text(row, "agent_type")
    if sub:
        return sub
    platform = _text(session, "platform_source") if session is not None else None
    return platform or None


def read(path: Path) -> Read:
    conn = db.open_readonly(path, SOURCE, EXPECTED)
    try:
        db.require(conn, path, SOURCE, EXPECTED,
                   {"observations": ("id", "project", "type", "created_at_epoch")})  # fmt: skip
        obs_cols = db.columns(conn, "observations")
        sess_col = "memory_session_id" if "memory_session_id" in obs_cols else "sdk_session_id"
        sessions = _sessions(conn, path)
        out = Read()
        for row in db.rows(conn, "observations", path, SOURCE, EXPECTED, out.skipped,
                           "observation"):  # fmt: skip
            try:
                out.items.append(_observation(row, sess_col, sessions))
            except ValidationError as exc:
                out.skipped.append((f"observation:{row['_rowid_']}", invalid(exc)))
        if "session_summaries" in db.tables(conn):
            for row in db.rows(conn, "session_summaries", path, SOURCE, EXPECTED, out.skipped,
                               "summary"):  # fmt: skip
                try:
                    item = _summary(row, sess_col, sessions)
                except ValidationError as exc:
                    out.skipped.append((f"summary:{row['_rowid_']}", invalid(exc)))
                    continue
                if item.content:
                    out.items.append(item)
                else:
                    out.skipped.append((item.sourceId, "empty in the source"))
        return out
    finally:
        conn.close()


def _observation(row, sess_col: str, sessions: dict) -> MemoryItem:
    session_id = _text(row, sess_col)
    session = sessions.get(session_id)
    created = from_epoch(_get(row, "created_at_epoch"), millis=True)
    return MemoryItem(
        sourceId=f"observation:{_text(row, 'id')}",
        content=observation_text(row),
        title=_text(row, "title"),
        category=_text(row, "type"),
        tags=json_list(_get(row, "concepts")),
        author=_author(row, session),
        project=_text(row, "merged_into_project") or _text(row, "project"),
        createdAt=created,
        updatedAt=created,
        fields=kept(
            table="observations", subtitle=_get(row, "subtitle"), session=session_id,
            sessionTitle=_get(session, "custom_title") if session is not None else None,
            platform=_get(session, "platform_source") if session is not None else None,
            project=_get(row, "project"), promptNumber=_get(row, "prompt_number"),
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
    session_id = _text(row, sess_col if sess_col in row.keys() else "memory_session_id")
    session = sessions.get(session_id)
    created = from_epoch(_get(row, "created_at_epoch"), millis=True)
    return MemoryItem(
        sourceId=f"summary:{_text(row, 'id')}",
        content=summary_text(row),
        title=(_text(session, "custom_title") if session is not None else None),
        category="session-summary",
        author=_author(row, session),
        project=_text(row, "merged_into_project") or _text(row, "project"),
        createdAt=created,
        updatedAt=created,
        fields=kept(
            table="session_summaries", session=session_id, project=_get(row, "project"),
            promptNumber=_get(row, "prompt_number"),
            filesRead=json_list(_get(row, "files_read")),
            filesEdited=json_list(_get(row, "files_edited")),
            platform=_get(session, "platform_source") if session is not None else None,
            discoveryTokens=_get(row, "discovery_tokens") or None,
        ),
    )  # fmt: skip
