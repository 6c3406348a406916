"""What an importer reads from another memory server: neutral items, one per unit of the source.

An importer turns a source (a database, an export, a folder of notes) into :class:`Read`: the
items it holds, and the units it left out with the reason (deleted or superseded in the source).
The service writes the items (``server/service/transfers/import_from.py``); nothing here touches the store.

Four kinds of item:

* :class:`MemoryItem`: a text with its source's kind or category, tags, author, project, dates
  and every other field the source keeps (``fields``, stored in the memory's metadata);
* :class:`EntityItem`, :class:`RelationItem`: a knowledge graph, as the official memory server
  shapes it (an entity with its observations; a typed relation between two entity names);
* :class:`LessonItem`: a lesson row of the lessons fork's ``lesson.json``.

Every item has a ``sourceId``, stable within its source (a row id, a content hash, a note's
permalink, a file path): the key a second run of the same import recognises it by.

A source that cannot be read is one :func:`unreadable` error: what was expected, what was found.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from retrieval.errors import InvalidInput


class _Item(BaseModel):
    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    sourceId: str = Field(min_length=1, max_length=1000, description="Stable id in the source.")
    createdAt: datetime | None = None
    updatedAt: datetime | None = None
    fields: dict[str, Any] = Field(
        default_factory=dict, description="The source's other fields, kept in the metadata."
    )


class MemoryItem(_Item):
    kind: Literal["memory"] = "memory"
    content: str = Field(description="The text to remember.")
    title: str | None = None
    category: str | None = Field(
        default=None, description="The source's own kind or category (decision, bugfix, …)."
    )
    tags: list[str] = Field(default_factory=list)
    author: str | None = Field(default=None, description="The agent or user that wrote it.")
    project: str | None = Field(default=None, description="The source's project name.")
    related: list[str] = Field(
        default_factory=list, description="Source ids of memories this one relates to."
    )


class EntityItem(_Item):
    kind: Literal["entity"] = "entity"
    name: str = Field(min_length=1)
    entityType: str = Field(min_length=1)
    observations: list[str] = Field(default_factory=list)


class RelationItem(_Item):
    kind: Literal["relation"] = "relation"
    from_: str = Field(alias="from", min_length=1)
    to: str = Field(min_length=1)
    relationType: str = Field(min_length=1)


class LessonItem(_Item):
    kind: Literal["lesson"] = "lesson"
    row: dict[str, Any] = Field(description="A lesson row of the lessons fork's lesson.json.")


Item = Annotated[MemoryItem | EntityItem | RelationItem | LessonItem, Field(discriminator="kind")]


@dataclass
class Read:
    """What an importer read: the items, and the units it left out with the reason."""

    items: list[Item] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (source id, reason)


def unreadable(source: str, path: Path | str, expected: str, found: str) -> InvalidInput:
    """The one error of a source that cannot be read: what was expected, what was found (in
    one line: a key or a value of the source it quotes may hold any character)."""
    found = "".join(c if c.isprintable() else repr(c)[1:-1] for c in found)
    return InvalidInput(
        f"cannot import {path} as {source}: expected {expected}; found {found}",
        source=source,
        path=str(path),
        expected=expected,
        found=found,
    )


def invalid(exc: ValidationError) -> str:
    """Why a unit of a source is not a valid item (the first problem), in one line."""
    first = exc.errors()[0]
    where = ".".join(map(str, first["loc"])) or "item"
    return f"not a valid item ({where}: {first['msg']})"[:300]


def from_epoch(value: Any, *, millis: bool = False) -> datetime | None:
    """A Unix time (seconds, or milliseconds) as an aware UTC datetime; None when absent or
    not a number."""
    if value is None or isinstance(value, bool):
        return None
    try:
        seconds = float(value) / (1000.0 if millis else 1.0)
        return datetime.fromtimestamp(seconds, UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def parse_time(value: Any) -> datetime | None:
    """An ISO 8601 date or datetime (``Z`` or an offset; none means UTC), a Unix time in
    seconds, or a datetime; None when absent or unreadable."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return from_epoch(value)
    text = str(value).strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def clean(value: Any) -> Any:
    """A field value kept in metadata: JSON-able, empty values dropped (None, "", [], {})."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        out = {str(k): clean(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, "", [], {})}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value if v not in (None, "")]
    return value


def kept(**values: Any) -> dict[str, Any]:
    """The non-empty ``values``, cleaned (see :func:`clean`)."""
    return clean(values)


__all__ = [
    "EntityItem", "Item", "LessonItem", "MemoryItem", "Read", "RelationItem", "clean",
    "from_epoch", "invalid", "kept", "parse_time", "unreadable",
]  # fmt: skip
