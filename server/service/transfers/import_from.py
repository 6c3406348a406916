"""``import-from``: another memory server's memories, in one command.

A source is read by its importer (``ingest/importers/``, one module per source; the official
memory server's ``memory.jsonl`` by the graph's own reader, as ``import-graph`` reads it) into
neutral items, which :mod:`.import_write` writes through the same path as every write: each
record passes the write policy, the limits and the store's transaction.

Safe to repeat and to stop: a memory's record id is derived from its source, its source id and
the bucket it goes to, so a second run finds every item already there and writes nothing, and a
run stopped half-way (Ctrl-C, a crash) resumes where it stopped; graph items are merged by name
(entities, observations) and triple (relations), as ``import-graph`` merges them. ``dry_run``
writes nothing and reports what would be created, by kind, with a sample of each.

The command reads the source in its own process (the user's files, wherever they are) and
writes either itself or, when a daemon owns the store, through the daemon's ``import-from``
tool, which takes the items in batches (:func:`merge` adds their reports up).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from graph.compat import classify
from ingest.importers import basic_memory, claude_code, claude_mem, mcp_memory_service, mem0
from ingest.importers.bounded import MAX_FIELD_CHARS, SourceError, check_tree, printable
from ingest.importers.items import (
    EntityItem,
    Item,
    LessonItem,
    MemoryItem,
    Read,
    RelationItem,
    invalid,
    unreadable,
)
from ingest.importers.json_rows import read_rows
from retrieval.errors import PatternError
from retrieval.records import Scope
from server.service.core.errors import InvalidInput
from server.service.core.identity import Identity

MEMORY_JSONL = "memory-jsonl"
MEMORY_JSONL_EXPECTED = (
    "the official memory server's memory.jsonl (JSON lines of entities and relations)"
)
SOURCES: dict[str, Callable[[Path], Read]] = {
    "claude-mem": claude_mem.read,
    "mcp-memory-service": mcp_memory_service.read,
    "mem0": mem0.read,
    "basic-memory": basic_memory.read,
    MEMORY_JSONL: lambda path: read_memory_jsonl(path),
    "claude-code": claude_code.read,
}
EXPECTED = {
    "claude-mem": claude_mem.EXPECTED, "mcp-memory-service": mcp_memory_service.EXPECTED,
    "mem0": mem0.EXPECTED, "basic-memory": basic_memory.EXPECTED,
    MEMORY_JSONL: MEMORY_JSONL_EXPECTED, "claude-code": claude_code.EXPECTED,
}  # fmt: skip
ALIASES = {"openmemory": "mem0", "memory.jsonl": MEMORY_JSONL, "official": MEMORY_JSONL}
MAX_LISTED = 50  # skipped items and warnings listed in a report (all are counted)
MAX_ITEM_CHARS = 4 * MAX_FIELD_CHARS  # every text of one item, in all
# reasons counted by their kind, the words before " (" (the rest names the item's own case)
COUNTED_BY_KIND = ("too long", "too large", "too deep", "limit", "not a valid item",
                   "front matter", "unreadable", "not Unicode text")  # fmt: skip
T = TypeVar("T")


class ImportFromResult(BaseModel):
    """What an import did (or, with ``dryRun``, would do)."""

    source: str
    path: str | None = None
    scope: str
    dryRun: bool = False
    read: int = Field(0, description="Items read from the source.")
    created: dict[str, int] = Field(
        default_factory=dict,
        description="Created by kind: memory, entity, observation, relation, lesson.",
    )
    byKind: dict[str, int] = Field(
        default_factory=dict, description="Created items by the source's own kind."
    )
    categories: dict[str, int] = Field(
        default_factory=dict, description="Memories created by scope/category."
    )
    samples: dict[str, str] = Field(
        default_factory=dict, description="One item of each source kind, shortened."
    )
    alreadyImported: int = Field(0, description="Items a previous run imported (unchanged).")
    skipped: dict[str, int] = Field(
        default_factory=dict, description="Items not imported, by reason."
    )
    skippedItems: list[str] = Field(
        default_factory=list, description=f"The first {MAX_LISTED}: 'source id: reason'."
    )
    pending: int = Field(
        0,
        description="Relations kept pending: an entity they link is in neither the graph nor "
        "the source yet (a forward reference); each is made when that entity is created.",
    )
    filtered: int = Field(0, description="Items of other source projects (--source-project).")
    warnings: list[str] = Field(default_factory=list)
    warningCount: int = 0
    seconds: float = 0.0
    interrupted: bool = False

    def skip(self, source_id: str, reason: str) -> None:
        source_id, reason = printable(source_id), printable(reason)
        key = reason.split(" (", 1)[0] if reason.startswith(COUNTED_BY_KIND) else reason
        key = "duplicate" if key.startswith("duplicate") else key
        self.skipped[key] = self.skipped.get(key, 0) + 1
        if len(self.skippedItems) < MAX_LISTED:
            self.skippedItems.append(f"{source_id}: {reason}")

    def warn(self, messages: list[str]) -> None:
        messages = [printable(m) for m in messages]
        self.warningCount += len(messages)
        room = MAX_LISTED - len(self.warnings)
        self.warnings += messages[: max(0, room)]

    @property
    def imported(self) -> int:
        return sum(self.created.values())


def reason(exc: InvalidInput) -> str:
    """A refusal's reason, as the report counts it."""
    policy = exc.data.get("policy")
    if policy == "secret":
        return "secret (PATTERN_SECRET_POLICY=block)"
    if policy == "injection":
        return "instructions to the model (PATTERN_INJECTION_POLICY=block)"
    if "limit" in exc.data and "size" in exc.data:
        return f"too long ({exc.data['size']} bytes; the limit is {exc.data['limit']})"
    if "non-empty" in exc.message:
        return "empty"
    return f"invalid ({exc.message})"


class ImportPart:
    """What the memory and the graph halves of one run share: what they write with
    (``backend``: the memory service, or the graph services), the caller, the source, the
    target scope and bucket, dry run, the report, and the stop request's check."""

    def __init__(
        self, backend: Any, who: Identity, source: str, scope: Scope, dry_run: bool,
        result: ImportFromResult,
    ) -> None:  # fmt: skip
        self.backend = backend
        self.who, self.source, self.scope = who, source, scope
        self.dry_run, self.res = dry_run, result
        self.bucket = who.bucket(scope.value)

    def stopped(self, stop: threading.Event | None) -> bool:
        """True (and the report marked interrupted) once a stop was asked for."""
        if stop is not None and stop.is_set():
            self.res.interrupted = True
            return True
        return False

    def parts(self, items: list[T], size: int, stop: threading.Event | None) -> Iterator[list[T]]:
        """``items`` in parts of ``size``, until a stop is asked for (:meth:`stopped`, checked
        before each part)."""
        for start in range(0, len(items), size):
            if self.stopped(stop):
                return
            yield items[start : start + size]


ITEMS = TypeAdapter(list[Item])


def parse_items(raw: list[dict]) -> list[Item]:
    """Items as the ``import-from`` tool receives them (JSON), validated."""
    try:
        items = ITEMS.validate_python(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"]))
        raise InvalidInput(f"invalid import item at {where}: {first['msg']}", at=where) from None
    for i, item in enumerate(items):  # items an agent sends are outside input too
        try:
            check_item(item)
        except SourceError as exc:
            raise InvalidInput(f"invalid import item at {i}: {exc}", at=str(i)) from None
    return items


def source_name(source: str) -> str:
    name = ALIASES.get(source.strip().lower(), source.strip().lower())
    if name not in SOURCES:
        raise InvalidInput(
            f"unknown source {source!r}: use one of {', '.join(SOURCES)}",
            source=source,
            sources=list(SOURCES),
        )
    return name


def read_memory_jsonl(path: Path) -> Read:
    """The official memory server's ``memory.jsonl`` (and the lessons fork's ``lesson.json``),
    read as ``import-graph`` reads them."""
    expected = MEMORY_JSONL_EXPECTED
    if not path.is_file():
        from ingest.importers.sqlite_source import describe

        raise unreadable(MEMORY_JSONL, path, expected, describe(path))
    try:
        rows = read_rows(path)
    except InvalidInput as exc:
        found = exc.message.replace(str(path), "the file").removeprefix("cannot read the file: ")
        raise unreadable(MEMORY_JSONL, path, expected, found) from None
    out = Read()
    for i, row in enumerate(rows):
        kind = classify(row)
        try:
            if kind == "relation":
                out.items.append(RelationItem.model_validate({**row, "sourceId": f"row:{i}"}))
            elif kind == "lesson":
                out.items.append(LessonItem(sourceId=f"lesson:{row.get('name', i)}", row=row))
            else:
                out.items.append(EntityItem.model_validate({**row, "sourceId": f"row:{i}"}))
        except ValidationError as exc:  # a row without its fields
            out.skipped.append((f"row:{i}", f"not an entity, relation or lesson: {invalid(exc)}"))
    return out


def read_source(source: str, path: str | Path, source_project: str | None = None) -> Read:
    """The items of ``path`` read as ``source`` (an alias is accepted); with
    ``source_project``, only the memories of that project of the source (the others are
    counted in ``Read.skipped`` as filtered)."""
    name = source_name(source)
    where = Path(path).expanduser()
    try:
        read = SOURCES[name](where)
    except PatternError:
        raise
    except SourceError as exc:  # over a limit, or not what it should be: what was found
        raise unreadable(name, where, EXPECTED[name], str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - whatever a reader meets, the user gets one line
        found = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        raise unreadable(name, where, EXPECTED[name], found) from None
    read = bounded(read)
    if source_project:
        kept: list[Item] = []
        for item in read.items:
            if getattr(item, "project", source_project) in (source_project, None):
                kept.append(item)
            else:
                read.skipped.append((item.sourceId, "filtered"))
        read.items = kept
    return read


def _texts(item: Item) -> list:
    """Every value of ``item`` a person or a scan reads (its texts and fields)."""
    if isinstance(item, MemoryItem):
        return [item.content, item.title, item.category, item.tags, item.author, item.project,
                item.related, item.fields]  # fmt: skip
    if isinstance(item, EntityItem):
        return [item.name, item.entityType, item.observations, item.fields]
    if isinstance(item, RelationItem):
        return [item.from_, item.to, item.relationType, item.fields]
    return [item.row, item.fields]


def check_item(item: Item) -> None:
    """Raise :class:`~ingest.importers.bounded.SourceError` for an item over a limit of
    :func:`bounded` or holding a text that is not Unicode."""
    check_tree(_texts(item), max_total=MAX_ITEM_CHARS, unicode=True)
    if not item.sourceId.isascii():
        check_tree(item.sourceId, unicode=True)


def _kind_of(why: str) -> str:
    """A limit's message as a reason the report counts by kind."""
    if why.startswith("not Unicode"):
        return why
    return f"too deep ({why})" if "nested" in why else f"too long ({why})"


def bounded(read: Read) -> Read:
    """``read`` without the items over a limit (a text over ``MAX_FIELD_CHARS``, texts over
    ``MAX_ITEM_CHARS`` in all, a value nested deeper than ``bounded.MAX_DEPTH``), each
    counted with its reason."""
    kept: list[Item] = []
    for item in read.items:
        try:
            check_item(item)
        except SourceError as exc:
            read.skipped.append((item.sourceId, _kind_of(str(exc))))
            continue
        kept.append(item)
    read.items = kept
    return read


def fold(res: ImportFromResult, read: Read) -> ImportFromResult:
    """The units the importer left out (deleted, superseded, expired, filtered) into ``res``."""
    for source_id, why in read.skipped:
        if why == "filtered":
            res.filtered += 1
        else:
            res.read += 1
            res.skip(source_id, why)
    return res


def merge(total: ImportFromResult, part: ImportFromResult) -> ImportFromResult:
    """``part`` (one batch's report) added into ``total``."""
    for name in ("created", "byKind", "categories", "skipped"):
        into = getattr(total, name)
        for key, n in getattr(part, name).items():
            into[key] = into.get(key, 0) + n
    for key, text in part.samples.items():
        total.samples.setdefault(key, text)
    total.read += part.read
    total.pending += part.pending
    total.alreadyImported += part.alreadyImported
    total.filtered += part.filtered
    total.skippedItems += part.skippedItems[: max(0, MAX_LISTED - len(total.skippedItems))]
    total.warnings += part.warnings[: max(0, MAX_LISTED - len(total.warnings))]
    total.warningCount += part.warningCount
    total.interrupted = total.interrupted or part.interrupted
    return total


__all__ = [
    "ALIASES", "EXPECTED", "ImportFromResult", "ImportPart", "Item", "MEMORY_JSONL", "SOURCES",
    "bounded", "fold", "merge", "parse_items", "read_memory_jsonl", "read_source", "reason",
    "source_name",
]  # fmt: skip
