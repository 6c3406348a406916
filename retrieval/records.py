"""Pydantic models shared by storage, tool I/O and export: records, filters, hits."""

from __future__ import annotations

import hashlib
import os
import threading
import time
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from retrieval.storage.buckets import Scope, bucket_of

from .errors import InvalidInput


class Kind(StrEnum):
    memory = "memory"
    observation = "observation"
    lesson = "lesson"
    chunk = "chunk"
    turn = (
        "turn"  # a conversation turn from an agent transcript (server/service/indexing/sessions.py)
    )


MAX_TEXT_BYTES = 32 * 1024  # a memory's content, an observation, one lesson field


def check_text(text: object, what: str) -> str:
    """``text`` if it is a non-empty string of at most :data:`MAX_TEXT_BYTES` (UTF-8), else
    :class:`InvalidInput` naming ``what`` (with ``size`` and ``limit`` for an oversized one)."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput(f"{what} must be a non-empty string")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:  # a lone surrogate: not text any store can keep
        raise InvalidInput(
            f"{what} must be Unicode text; found a lone surrogate "
            f"U+{ord(text[exc.start]):04X} at character {exc.start}",
            position=exc.start,
        ) from None
    if size > MAX_TEXT_BYTES:
        raise InvalidInput(
            f"{what} is {size} bytes; the limit is {MAX_TEXT_BYTES} bytes (32 KB)",
            size=size,
            limit=MAX_TEXT_BYTES,
        )
    return text


def utcnow() -> datetime:
    return datetime.now(UTC)


_TS = "%Y-%m-%dT%H:%M:%S.%fZ"


def ts(dt: datetime | None) -> str | None:
    """UTC timestamps as fixed-width text, so SQL string comparison is time comparison."""
    if dt is None:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    dt = dt.astimezone(UTC)
    return f"{dt.year:04d}{dt.strftime(_TS[2:])}"  # the year zero-padded (strftime may not)


def parse_ts(text: str | None) -> datetime | None:
    if text is None:
        return None
    if len(text) == 27 and text[26] == "Z" and text[19] == "." and text[10] == "T":
        # ``ts``'s own shape: datetime's ISO reader is ~30 times faster than strptime (a recall
        # reads three dates of each of its candidates); anything else, strptime judges
        try:
            return datetime.fromisoformat(text)
        except ValueError:
            pass
    year, dash, rest = text.partition("-")
    if dash and len(year) < 4:  # a year before 1000 written unpadded (by ``ts`` before)
        text = f"{year:0>4}-{rest}"
    return datetime.strptime(text, _TS).replace(tzinfo=UTC)


_ID_LOCK = threading.Lock()
_last_id = [0, 0]  # (milliseconds, 12-bit counter) of the latest id of this process


def new_id() -> str:
    """A time-ordered UUID, version 7 (RFC 9562 §5.7): 48 bits of Unix milliseconds, then a
    12-bit counter (method 1 of §6.2: random at each new millisecond, +1 within one, so the ids
    of one process sort in creation order), then 62 random bits.

    Ordered ids append to the B-tree indexes keyed by id (``records.id``, the vectors' and the
    vector index's id tables) instead of landing on a random page each: a bulk write touches a
    few pages per index, not one per record."""
    with _ID_LOCK:
        ms = time.time_ns() // 1_000_000
        last_ms, counter = _last_id
        if ms > last_ms:
            counter = int.from_bytes(os.urandom(2), "big") & 0x7FF  # headroom for the +1s
        elif counter < 0xFFF:
            ms, counter = last_ms, counter + 1
        else:  # 4,096 ids in one millisecond: borrow the next one
            ms, counter = last_ms + 1, 0
        _last_id[:] = [ms, counter]
    rand = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | counter << 64 | 0b10 << 62 | rand
    return str(uuid.UUID(int=value))


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class UpdatedBy(BaseModel):
    """The newer record that updates this one (retrieval/timeline/links.py)."""

    id: str
    at: datetime = Field(description="When the link was made.")
    how: str = Field(default="stated", description="stated (supersedes) or detected.")


class Record(BaseModel):
    """One embedded, searchable unit: a memory, an observation, a lesson, a workspace chunk or a
    conversation turn."""

    model_config = ConfigDict(use_enum_values=False)

    id: str = Field(default_factory=new_id)
    kind: Kind = Kind.memory
    project_id: str
    agent_id: str
    scope: Scope = Scope.private
    category: str = "longterm"
    content: str
    context: str = Field(
        default="",
        description="Extra text indexed with the record but not part of its content "
        "(neighbouring turns, session date, speaker, file path).",
    )
    metadata: dict[str, Any] = Field(default_factory=dict)
    entity_name: str | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime | None = None
    revision: int = 1
    content_hash: str = ""
    embedding_model: str | None = None
    updated_by: UpdatedBy | None = Field(
        default=None,
        exclude=True,
        description="Read, not stored: the newest record updating this one (an active link "
        "of retrieval/timeline/links.py), filled by the store's reads.",
    )

    @property
    def bucket(self) -> str:
        return bucket_of(self.scope, self.project_id, self.agent_id)

    @property
    def tags(self) -> list[str]:
        return [str(t) for t in self.metadata.get("tags", []) or []]

    @property
    def priority(self) -> int:
        try:
            return int(self.metadata.get("priority", 2))
        except (TypeError, ValueError, OverflowError):  # not a number, or an infinite one
            return 2

    def current_hash(self) -> str:
        """The hash of what is indexed now (``content_hash`` goes stale after ``model_copy``)."""
        return content_hash(self.content + "\x00" + self.context)

    def model_post_init(self, __context: Any) -> None:
        if not self.content_hash:
            self.content_hash = self.current_hash()


class RecordFilter(BaseModel):
    """Filters applied inside both retrievers, before truncation. Empty fields are ignored."""

    buckets: list[str] | None = Field(default=None, description="Visible buckets; None = all.")
    kinds: list[Kind] | None = None
    categories: list[str] | None = None
    exclude_categories: list[str] | None = None
    tags: list[str] | None = Field(default=None, description="AND: every tag must be present.")
    min_priority: int | None = None
    max_priority: int | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None
    include_expired: bool = False
    now: datetime | None = Field(default=None, description="Clock for expiry; default now.")

    def is_visibility_only(self) -> bool:
        """True when nothing but buckets and expiry restricts the result."""
        return not any(
            [
                self.kinds,
                self.categories,
                self.exclude_categories,
                self.tags,
                self.min_priority is not None,
                self.max_priority is not None,
                self.created_after,
                self.created_before,
                self.updated_after,
                self.updated_before,
            ]
        )


class Explanation(BaseModel):
    """Why a hit ranks where it does."""

    lexical_rank: int | None = None
    lexical_score: float | None = Field(default=None, description="FTS5 bm25, higher is better")
    vector_rank: int | None = None
    vector_similarity: float | None = Field(default=None, description="cosine similarity")
    fused_score: float = 0.0
    boosts: dict[str, float] = Field(default_factory=dict)
    mode: str = "hybrid"
    updated_by: UpdatedBy | None = Field(
        default=None, description="A newer record updates this one: which, when."
    )
    may_restate: dict[str, str | bool] | None = Field(
        default=None,
        description="Another item of the same answer may state the same thing (nobody decided "
        "yet): {id, newer: whether this one is the newer}.",
    )
    gate: float | None = Field(
        default=None,
        description="the prompt gate's relevance (0-1): the hooks inject an item from "
        "their threshold up",
    )


class Hit(BaseModel):
    record: Record
    score: float
    explanation: Explanation
