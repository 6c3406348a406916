"""mem0 and OpenMemory: an export of memories.

Three shapes, told apart by their content (never by the file name alone):

* mem0's ``get_all`` answer saved as JSON (the open-source ``Memory`` and the Platform's
  ``MemoryClient`` alike): a list of memories or ``{"results": [...]}`` (paginated: with
  ``count``/``next``); each memory has ``id``, ``memory`` (the text), ``hash``, ``metadata``,
  ``created_at``/``updated_at`` and, when set, ``user_id``, ``agent_id``, ``run_id``,
  ``actor_id``, ``role``, ``app_id``, ``categories``, ``expiration_date``
  (``mem0/memory/main.py``, ``docs/api-reference/memory/get-memories.mdx``);
* OpenMemory's backup (``POST /api/v1/backup/export``): a zip with ``memories.json`` (the user,
  apps, categories and memories with ``state``, ``app_id``, ``category_ids``,
  ``archived_at``/``deleted_at``) and ``memories.jsonl.gz`` (one memory a line with its
  ``app`` and ``categories`` by name) (``openmemory/api/app/routers/backup.py``); either file
  alone is read too, and a plain ``.jsonl``;
* the same memories as JSON lines.

A memory becomes a memory: the agent (or OpenMemory app) is the author, categories are tags,
user, run, actor, role, app, hash, state and metadata are kept. Deleted memories and memories
whose ``expiration_date`` has passed are left out, and counted.
"""

from __future__ import annotations

import json
import os
import stat
import struct
import zipfile
import zlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .bounded import (
    MAX_DOCUMENT_BYTES,
    SourceError,
    check_count,
    gunzip,
    load_json,
    read_capped,
    read_member,
    size_text,
    text,
    texts,
    zip_members,
)
from .items import MemoryItem, Read, invalid, kept, parse_time, unreadable
from .source_files import OPEN_FLAGS
from .sqlite_source import describe

SOURCE = "mem0"
EXPECTED = (
    'a mem0 export: get_all() saved as JSON ({"results": [...]} or a list), '
    "OpenMemory's backup zip (memories.json, memories.jsonl.gz) or JSON lines"
)
PROMOTED = ("user_id", "agent_id", "run_id", "actor_id", "role", "app_id", "hash",
            "expiration_date", "immutable", "attributed_to")  # fmt: skip


def _bad(path: Path, found: str) -> Exception:
    return unreadable(SOURCE, path, EXPECTED, found)


def _lines(text: str, path: Path, name: str) -> list[dict]:
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = load_json(line, f"{name} line {i}")
        except json.JSONDecodeError as exc:
            raise _bad(path, f"line {i} is not JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise _bad(path, f"line {i} is not a JSON object")
        out.append(row)
    return out


def _decode(data: bytes, name: str, path: Path) -> Any:
    """The JSON document (or list of JSON lines) in ``data`` (gzip inflated within bounds)."""
    if data[:2] == b"\x1f\x8b":
        data = gunzip(data, name)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise _bad(path, f"{name}: not UTF-8 text") from None
    stripped = text.lstrip()
    if not stripped:
        raise _bad(path, f"{name}: an empty file")
    if stripped[0] in "[{":
        try:
            return load_json(text, name)
        except json.JSONDecodeError as exc:
            if stripped[0] == "{" and "\n{" in stripped:  # JSON lines
                return _lines(text, path, name)
            raise _bad(path, f"{name}: invalid JSON ({exc.msg}, line {exc.lineno})") from None
    raise _bad(path, f"{name}: text that is not JSON (starts with {stripped[:20]!r})")


def _zip(path: Path, fh) -> tuple[Any, str]:
    names: dict[str, zipfile.ZipInfo] = {}
    try:
        zip_members(fh, path.name)
        with zipfile.ZipFile(fh) as zf:
            # by their base name: a member is only read, never written anywhere
            names = {i.filename.rsplit("/", 1)[-1]: i for i in zf.infolist() if not i.is_dir()}
            for wanted in ("memories.json", "memories.jsonl.gz", "memories.jsonl"):
                if wanted in names:
                    return _decode(read_member(zf, names[wanted], path.name), wanted, path), wanted
    except (zipfile.BadZipFile, NotImplementedError, EOFError, zlib.error, struct.error) as exc:
        # a damaged header can name a zip version or a method Python does not read
        raise _bad(path, f"a damaged zip file ({type(exc).__name__}: {exc})") from None
    listed = ", ".join(list(names)[:8])
    raise _bad(path, f"a zip without memories.json or memories.jsonl.gz ({listed})")


def _document(path: Path) -> Any:
    """The export's JSON: the file is opened once (not following a final link swapped in, not
    waiting on a named pipe), must be a regular file of at most ``MAX_DOCUMENT_BYTES``."""
    try:
        fd = os.open(path.resolve(), OPEN_FLAGS)
    except OSError as exc:
        raise _bad(path, f"a file that cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise _bad(path, describe(path))
        if st.st_size > MAX_DOCUMENT_BYTES:
            raise _bad(path, f"a file of {size_text(st.st_size)} "
                             f"(at most {size_text(MAX_DOCUMENT_BYTES)} are read)")  # fmt: skip
        if zipfile.is_zipfile(fh):
            return _zip(path, fh)[0]
        fh.seek(0)
        return _decode(read_capped(fh, MAX_DOCUMENT_BYTES, path.name), path.name, path)


def _memories(doc: Any, path: Path) -> tuple[list[dict], dict]:
    """(the memory rows, context: OpenMemory's user, app and category names)."""
    if isinstance(doc, list):
        rows = doc
        ctx: dict = {}
    elif isinstance(doc, dict) and isinstance(doc.get("results"), list):
        rows, ctx = doc["results"], {}
    elif isinstance(doc, dict) and isinstance(doc.get("memories"), list):  # memories.json
        rows = doc["memories"]
        user = doc.get("user")
        ctx = {
            "user": text(user.get("user_id")) if isinstance(user, dict) else None,
            "apps": _names(doc.get("apps")),
            "categories": _names(doc.get("categories")),
        }
    else:
        keys = ", ".join(list(doc)[:6]) if isinstance(doc, dict) else type(doc).__name__
        raise _bad(path, f"JSON without a results or memories list (keys: {keys[:200]})")
    bad = next((i for i, r in enumerate(rows) if not isinstance(r, dict)), None)
    if bad is not None:
        raise _bad(path, f"memory #{bad} is not a JSON object")
    return rows, ctx


def _names(value: Any) -> dict[str, str | None]:
    """{id: name} of OpenMemory's apps or categories (rows that are not objects ignored)."""
    if not isinstance(value, list):
        return {}
    return {text(a.get("id")) or "": text(a.get("name")) for a in value if isinstance(a, dict)}


def read(path: Path, now: datetime | None = None) -> Read:
    if not path.is_file():
        raise _bad(path, describe(path))
    try:
        doc = _document(path)
    except SourceError as exc:
        raise _bad(path, str(exc)) from None
    rows, ctx = _memories(doc, path)
    check_count(len(rows))
    now = now or datetime.now(UTC)
    out = Read()
    for i, row in enumerate(rows):
        try:
            item = _memory(row, ctx, i)
        except ValidationError as exc:
            out.skipped.append((f"memory:{text(row.get('id')) or i}"[:200], invalid(exc)))
            continue
        state = text(row.get("state")) or "active"
        expires = parse_time(row.get("expiration_date"))
        if state == "deleted" or row.get("deleted_at"):
            out.skipped.append((item.sourceId, "deleted in the source"))
        elif expires is not None and expires <= now:
            out.skipped.append((item.sourceId, "expired in the source"))
        elif not item.content.strip():
            out.skipped.append((item.sourceId, "no text in the source"))
        else:
            out.items.append(item)
    return out


def _memory(row: dict, ctx: dict, index: int) -> MemoryItem:
    content = row.get("memory") or row.get("content") or row.get("data") or ""
    app = text(row.get("app")) or ctx.get("apps", {}).get(text(row.get("app_id")))
    categories = texts(row.get("categories")) or [
        ctx["categories"][c]
        for c in texts(row.get("category_ids"))
        if ctx.get("categories", {}).get(c)
    ]
    metadata = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
    promoted = {k: row.get(k) for k in PROMOTED}
    if ctx.get("user"):  # OpenMemory: the external user id, not the internal uuid
        promoted["user_id"] = ctx["user"]
    created = parse_time(row.get("created_at"))
    return MemoryItem(
        sourceId=f"memory:{text(row.get('id') or row.get('hash')) or index}",
        content=text(content),
        category=categories[0] if categories else None,
        tags=categories,
        author=text(row.get("agent_id") or row.get("actor_id")) or app,
        createdAt=created,
        updatedAt=parse_time(row.get("updated_at")) or created,
        fields=kept(
            **promoted,
            app=app,
            state=row.get("state"),
            archivedAt=row.get("archived_at"),
            metadata=metadata,
        ),  # fmt: skip
    )
