"""``verify-memories`` / ``pattern-memory verify``: keep your memories true to the code they cite.

``list`` checks every citation of the caller's own records (memories, observations, lessons it
wrote) and returns those whose cited code changed or is gone (``includeMoved``: also those whose
lines only moved), each with a unified diff of the cited lines as written (the ingested file
version from the artifact store when there is one, else the stored text, which is capped at
4 KB) against the lines there now; under the ``redact`` and ``block`` secret policies a secret in
the diff is shown redacted. Then, per record:

- ``confirm``: the memory is still right; its citations are re-anchored to the current lines
  (moved: where the lines are now; changed: where the code most likely went, else the same
  lines; a deleted file's citation is dropped). A ``citations`` change event follows.
- ``update``: new content, re-anchored the same way, through ``update-memory`` (its rules, its
  revision check with ``expectedRevision``, its secret policy).
- ``forget``: delete the memory, through ``forget`` (its rules: creator only, core needs force).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from ingest.workspace.artifacts import ArtifactStore
from ingest.workspace.walker import read_within
from retrieval.cite import CitationState, read_lines, unified_diff
from retrieval.records import Kind
from retrieval.storage.store import ts
from server.service.core.errors import InvalidInput
from server.service.core.identity import Identity
from server.service.memories.memory import MemoryService
from server.service.recalling.citations import MAX_FILE_BYTES, CitationService

Action = Literal["list", "confirm", "update", "forget"]
DEFAULT_LIMIT = 50


class CitationDiff(BaseModel):
    cited: str = Field(description="The citation as written (path:lines).")
    status: str
    current: str | None = Field(
        default=None, description="Where the cited lines are now, or most likely went."
    )
    diff: str | None = Field(
        default=None, description="Unified diff: the cited lines as written -> the lines now."
    )
    note: str | None = None


class StaleMemory(BaseModel):
    id: str
    kind: str
    scope: str
    category: str
    content: str
    revision: int
    updatedAt: datetime
    citations: list[CitationState]
    diffs: list[CitationDiff] = Field(default_factory=list)
    suspicious: str | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="Why the write policy flagged it as possible instructions to the model "
        "(listed without its text unless includeSuspicious).",
    )


class VerifyResult(BaseModel):
    action: Action
    memories: list[StaleMemory] = Field(
        default_factory=list,
        description="list: your stale memories with diffs; confirm/update: the memory after it.",
    )
    checked: int = Field(default=0, description="Your records with citations that were checked.")
    memoryId: str | None = None
    revision: int | None = Field(default=None, description="The memory's revision after update.")
    deleted: bool = False
    warnings: list[str] = Field(default_factory=list)


def _cites(svc: MemoryService) -> CitationService:
    if svc.citations is None:
        raise InvalidInput("citations are not available on this service")
    return svc.citations


def _old_text(artifacts: ArtifactStore, row) -> tuple[str, str | None]:
    """The cited lines as written: from the ingested file version when stored, else the
    anchor's text (capped)."""
    start, end = row["start_line"], row["end_line"]
    try:
        if artifacts.has(row["sha256"]):
            lines = read_lines(artifacts.get(row["sha256"])) or []
            return "\n".join(lines if start is None else lines[start - 1 : end]), None
    except (OSError, ValueError):
        pass
    if start is None:
        return "", "whole-file citation: the file changed (its old version is not stored)"
    note = "first 4 KB of the cited lines" if len(row["text"].encode()) >= 4096 else None
    return row["text"], note


def _new_text(row, state: CitationState, allowed: list[Path]) -> tuple[str, str | None]:
    """The cited lines now, read only inside the caller's allowed directories at this moment
    (never through a symlink swapped in since), at most ``MAX_FILE_BYTES``."""
    if state.status == "deleted":
        return "", "deleted"
    try:
        lines = read_lines(read_within(row["abs_path"], allowed, MAX_FILE_BYTES)) or []
    except (OSError, ValueError):
        return "", None
    if row["start_line"] is None:
        return "\n".join(lines), row["path"]
    start = state.currentStartLine or row["start_line"]
    end = state.currentEndLine or row["end_line"]
    start, end = min(start, len(lines)), min(end, len(lines))
    return "\n".join(lines[start - 1 : end]), f"{row['path']}:{start}-{end}"


def diffs(cites: CitationService, who: Identity, record_id: str, states) -> list[CitationDiff]:
    out = []
    allowed = cites.allowed(who) if who.root else []
    for row, state in zip(cites.rows([record_id]), states, strict=False):
        if state.status == "fresh":
            continue
        if not any(Path(row["abs_path"]).is_relative_to(a) for a in allowed):
            out.append(CitationDiff(cited=state.label, status=state.status,
                                    note="outside your allowed directories: not read"))  # fmt: skip
            continue
        old, note = _old_text(cites.artifacts, row)
        new, where = _new_text(row, state, allowed)
        text = unified_diff(old, new, row["path"], "as cited", "now") if old or new else None
        if text and cites.policy is not None:  # the file's lines now were never screened
            text = cites.policy.show(text)
        out.append(CitationDiff(cited=state.label, status=state.status, current=where,
                                diff=text or None, note=note))  # fmt: skip
    return out


def _entry(svc, cites, who, rec, states, with_diffs: bool) -> StaleMemory:
    return StaleMemory(
        id=rec.id, kind=rec.kind.value, scope=rec.scope.value, category=rec.category,
        content=rec.content, revision=rec.revision, updatedAt=rec.updated_at, citations=states,
        diffs=diffs(cites, who, rec.id, states) if with_diffs else [],
    )  # fmt: skip


def list_stale(
    svc: MemoryService, who: Identity, *, include_moved: bool = False, limit: int = DEFAULT_LIMIT
) -> VerifyResult:
    """Your records whose cited code changed or is gone (and moved, when asked), with diffs."""
    if not 1 <= limit <= 500:
        raise InvalidInput(f"limit must be between 1 and 500, got {limit}")
    cites = _cites(svc)
    buckets = who.visible_buckets()
    rows = svc.store.reader.execute(
        "SELECT DISTINCT c.record_id FROM citations c JOIN records r ON r.id = c.record_id "
        f"WHERE r.agent_id = ? AND r.bucket IN ({','.join('?' * len(buckets))}) "
        "AND (r.expires_at IS NULL OR r.expires_at > ?)",
        [who.agent_id, *buckets, ts(svc.clock())],
    ).fetchall()
    ids = [r[0] for r in rows]
    states = cites.states(who, ids)
    wanted = {"changed", "deleted", "moved"} if include_moved else {"changed", "deleted"}
    hits = [i for i in ids if any(s.status in wanted for s in states.get(i, []))]
    recs = svc.store.get(hits)
    hits = sorted((i for i in hits if i in recs), key=lambda i: recs[i].updated_at, reverse=True)
    out = [_entry(svc, cites, who, recs[i], states[i], True) for i in hits[:limit]]
    return VerifyResult(action="list", memories=out, checked=len(ids))


def _own(svc: MemoryService, who: Identity, memory_id: str, action: str, memories_only: bool):
    rec = svc.get_visible(who, memory_id)
    svc.check_owner(who, rec, action)
    if memories_only and rec.kind is not Kind.memory:
        raise InvalidInput(
            f"{memory_id} is a {rec.kind.value}; {action} it with the {rec.kind.value} tools "
            "(verify-memories can confirm it)",
            memoryId=memory_id,
            kind=rec.kind.value,
        )
    return rec


def confirm(svc: MemoryService, who: Identity, memory_id: str) -> VerifyResult:
    """Re-anchor the record's citations to the current code (it is still right)."""
    cites = _cites(svc)
    rec = _own(svc, who, memory_id, "confirm", memories_only=False)
    pending = cites.resolve(who, cites.reanchor(who, memory_id))
    with svc.store.transaction() as conn:
        if conn.execute("SELECT 1 FROM records WHERE id=?", (memory_id,)).fetchone() is None:
            raise InvalidInput(f"memory {memory_id} was deleted meanwhile", memoryId=memory_id)
        cites.replace(conn, memory_id, pending)
    states = cites.states(who, [memory_id]).get(memory_id, [])
    return VerifyResult(
        action="confirm", memoryId=memory_id, revision=rec.revision,
        memories=[_entry(svc, cites, who, rec, states, False)],
    )  # fmt: skip


def update(
    svc: MemoryService,
    who: Identity,
    memory_id: str,
    content: str | None,
    expected_revision: int | None = None,
    idempotency_key: str | None = None,
) -> VerifyResult:
    """New content for a stale memory, its citations re-anchored (update-memory's rules)."""
    if not content or not content.strip():
        raise InvalidInput("update needs the new content", memoryId=memory_id)
    cites = _cites(svc)
    _own(svc, who, memory_id, "update", memories_only=True)
    res = svc.update_memory(
        who, memory_id, content, expected_revision=expected_revision,
        idempotency_key=idempotency_key, citations=cites.reanchor(who, memory_id),
    )  # fmt: skip
    rec = svc.get_visible(who, memory_id)
    states = cites.states(who, [memory_id]).get(memory_id, [])
    return VerifyResult(
        action="update", memoryId=memory_id, revision=res.revision, warnings=res.warnings,
        memories=[_entry(svc, cites, who, rec, states, False)],
    )  # fmt: skip


def forget(
    svc: MemoryService,
    who: Identity,
    memory_id: str,
    force: bool = False,
    idempotency_key: str | None = None,
) -> VerifyResult:
    """Delete a stale memory (forget's rules)."""
    _own(svc, who, memory_id, "delete", memories_only=True)
    res = svc.forget(who, memory_id, force, idempotency_key)
    return VerifyResult(action="forget", memoryId=memory_id, deleted=res.deleted)


def verify(
    svc: MemoryService,
    who: Identity,
    action: Action = "list",
    memory_id: str | None = None,
    *,
    content: str | None = None,
    expected_revision: int | None = None,
    include_moved: bool = False,
    limit: int = DEFAULT_LIMIT,
    force: bool = False,
    idempotency_key: str | None = None,
) -> VerifyResult:
    """One entry point for the tool and the CLI."""
    if action == "list":
        return list_stale(svc, who, include_moved=include_moved, limit=limit)
    if not memory_id:
        raise InvalidInput(f"{action} needs a memoryId")
    if action == "confirm":
        return confirm(svc, who, memory_id)
    if action == "update":
        return update(svc, who, memory_id, content, expected_revision, idempotency_key)
    if action == "forget":
        return forget(svc, who, memory_id, force, idempotency_key)
    raise InvalidInput(f"unknown action {action!r}: use list, confirm, update or forget")
