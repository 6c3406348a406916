"""mcp-memory-service (doobidoo): its SQLite + sqlite-vec database (``sqlite_vec.db``, in
``~/.local/share/mcp-memory/`` on Linux, ``~/Library/Application Support/mcp-memory/`` on macOS).

The tables as its storage backend and migrations leave them
(``src/mcp_memory_service/storage/sqlite_vec.py``, ``storage/migrations/*.sql``):

* ``memories``: ``content``, ``content_hash`` (unique: SHA-256 of the stripped, lower-cased
  text), ``tags`` (comma-separated; namespaces ``agent:``, ``proj:``, ``topic:``, …),
  ``memory_type`` (observation, decision, learning, error, pattern, … and their subtypes),
  ``metadata`` (JSON), ``created_at`` / ``updated_at`` (Unix seconds, with ISO copies),
  ``deleted_at`` (a tombstone), and since memory evolution ``parent_id``, ``version``,
  ``confidence``, ``last_accessed``, ``superseded_by``;
* ``memory_graph``: typed edges between memories by content hash (``relationship_type``:
  causes, fixes, contradicts, supports, follows, related), with a similarity and the
  connection types;
* ``memory_embeddings``: the vectors, a ``vec0`` virtual table: never read (its model is not
  ours; every memory is embedded again here), so sqlite-vec is not needed.

A memory becomes a memory: its type is the kind; ``agent:`` tags name the author and
``proj:`` tags the project; its edges become ``relatedTo`` links (and are kept with their type).
Tombstones and superseded versions are left out, and counted.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from . import sqlite_source as db
from .bounded import SourceError, load_json, plain, text
from .items import MemoryItem, Read, from_epoch, invalid, kept, parse_time

SOURCE = "mcp-memory-service"
EXPECTED = "an mcp-memory-service database (sqlite_vec.db) with a memories table"


def split_tags(value: object) -> list[str]:
    return [t.strip() for t in (text(value) or "").split(",") if t.strip()]


def _json(value: object) -> object:
    """A JSON column's value; its text when it is not JSON (or over a limit)."""
    raw = text(value)
    try:
        return load_json(raw, "a JSON column") if raw else None
    except (json.JSONDecodeError, SourceError):
        return raw


def _edges(conn, path: Path) -> dict[str, list[dict]]:
    """{source content hash: [{to, type, similarity, connections}, …]} from memory_graph."""
    if "memory_graph" not in db.tables(conn):
        return {}
    cols = db.columns(conn, "memory_graph")
    if not {"source_hash", "target_hash"} <= cols:
        return {}
    out: dict[str, list[dict]] = {}
    for r in db.rows(conn, "memory_graph", path, SOURCE, EXPECTED):
        edge = kept(
            to=text(r["target_hash"]),
            type=text(r["relationship_type"]) if "relationship_type" in cols else "related",
            similarity=plain(r["similarity"]) if "similarity" in cols else None,
            connections=_json(r["connection_types"]) if "connection_types" in cols else None,
        )
        out.setdefault(text(r["source_hash"]) or "", []).append(edge)
    return out


def read(path: Path) -> Read:
    conn = db.open_readonly(path, SOURCE, EXPECTED)
    try:
        db.require(conn, path, SOURCE, EXPECTED,
                   {"memories": ("content", "content_hash", "tags", "created_at")})  # fmt: skip
        edges = _edges(conn, path)
        out = Read()
        for row in db.rows(conn, "memories", path, SOURCE, EXPECTED, out.skipped, "memory row"):
            keys = row.keys()
            sid = f"memory:{text(row['content_hash'])}"
            if "deleted_at" in keys and row["deleted_at"] is not None:
                out.skipped.append((sid, "deleted in the source"))
                continue
            if "superseded_by" in keys and row["superseded_by"]:
                out.skipped.append((sid, "superseded in the source"))
                continue
            try:
                out.items.append(_memory(row, edges.get(text(row["content_hash"]) or "", [])))
            except ValidationError as exc:
                out.skipped.append((sid, invalid(exc)))
        return out
    finally:
        conn.close()


def _memory(row, edges: list[dict]) -> MemoryItem:
    keys = row.keys()

    def col(name: str):
        return plain(row[name]) if name in keys else None

    tags, authors, projects = [], [], []
    for tag in split_tags(row["tags"]):
        ns, _, value = tag.partition(":")
        if ns == "agent" and value:
            authors.append(value)
        elif ns == "proj" and value:
            projects.append(value)
        if tag != "untagged":  # the service's placeholder for a memory without tags
            tags.append(tag)
    meta = _json(col("metadata")) or {}
    if isinstance(meta, str):
        meta = {"raw": meta}
    created = from_epoch(col("created_at")) or parse_time(col("created_at_iso"))
    updated = from_epoch(col("updated_at")) or parse_time(col("updated_at_iso")) or created
    return MemoryItem(
        sourceId=f"memory:{text(row['content_hash'])}",
        content=text(row["content"]) or "",
        category=text(col("memory_type")),
        tags=tags,
        author=authors[0] if authors else None,
        project=projects[0] if projects else None,
        createdAt=created,
        updatedAt=updated,
        related=[f"memory:{e['to']}" for e in edges if e.get("to")],
        fields=kept(
            contentHash=col("content_hash"), memoryType=col("memory_type"),
            metadata=meta if isinstance(meta, dict) else {"value": meta},
            parentId=col("parent_id"), version=col("version"), confidence=col("confidence"),
            lastAccessed=from_epoch(col("last_accessed")),
            relations=edges,
        ),
    )  # fmt: skip
