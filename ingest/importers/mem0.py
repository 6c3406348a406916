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

import gzip
import json
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .items import MemoryItem, Read, kept, parse_time, unreadable
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


def _lines(text: str, path: Path) -> list[dict]:
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _bad(path, f"line {i} is not JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise _bad(path, f"line {i} is not a JSON object")
        out.append(row)
    return out


def _decode(data: bytes, name: str, path: Path) -> Any:
    """The JSON document (or list of JSON lines) in ``data``."""
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise _bad(path, f"{name}: a damaged gzip stream ({exc})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise _bad(path, f"{name}: not UTF-8 text") from None
    stripped = text.lstrip()
    if not stripped:
        raise _bad(path, f"{name}: an empty file")
    if stripped[0] in "[{":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            if stripped[0] == "{" and "\n{" in stripped:  # JSON lines
                return _lines(text, path)
            raise _bad(path, f"{name}: invalid JSON ({exc.msg}, line {exc.lineno})") from None
    raise _bad(path, f"{name}: text that is not JSON (starts with {stripped[:20]!r})")


def _zip(path: Path) -> tuple[Any, str]:
    try:
        with zipfile.ZipFile(path) as zf:
            names = {n.rsplit("/", 1)[-1]: n for n in zf.namelist() if not n.endswith("/")}
            for wanted in ("memories.json", "memories.jsonl.gz", "memories.jsonl"):
                if wanted in names:
                    return _decode(zf.read(names[wanted]), wanted, path), wanted
    except zipfile.BadZipFile as exc:
        raise _bad(path, f"a damaged zip file ({exc})") from None
    raise _bad(path, f"a zip without memories.json or memories.jsonl.gz ({', '.join(names)})")


def _memories(doc: Any, path: Path) -> tuple[list[dict], dict]:
    """(the memory rows, context: OpenMemory's user, app and category names)."""
    if isinstance(doc, list):
        rows = doc
        ctx: dict = {}
    elif isinstance(doc, dict) and isinstance(doc.get("results"), list):
        rows, ctx = doc["results"], {}
    elif isinstance(doc, dict) and isinstance(doc.get("memories"), list):  # memories.json
        rows = doc["memories"]
        ctx = {
            "user": (doc.get("user") or {}).get("user_id"),
            "apps": {a.get("id"): a.get("name") for a in doc.get("apps") or []},
            "categories": {c.get("id"): c.get("name") for c in doc.get("categories") or []},
        }
    else:
        keys = ", ".join(list(doc)[:6]) if isinstance(doc, dict) else type(doc).__name__
        raise _bad(path, f"JSON without a results or memories list (keys: {keys})")
    bad = next((i for i, r in enumerate(rows) if not isinstance(r, dict)), None)
    if bad is not None:
        raise _bad(path, f"memory #{bad} is not a JSON object")
    return rows, ctx


def read(path: Path, now: datetime | None = None) -> Read:
    if not path.is_file():
        raise _bad(path, describe(path))
    if zipfile.is_zipfile(path):
        doc, _ = _zip(path)
    else:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise _bad(path, f"a file that cannot be read ({exc.strerror})") from None
        doc = _decode(data, path.name, path)
    rows, ctx = _memories(doc, path)
    now = now or datetime.now(UTC)
    out = Read()
    for i, row in enumerate(rows):
        item = _memory(row, ctx, i)
        state = str(row.get("state") or "active")
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
    text = row.get("memory") or row.get("content") or row.get("data") or ""
    app = row.get("app") or ctx.get("apps", {}).get(row.get("app_id"))
    categories = row.get("categories") or [
        ctx["categories"][c]
        for c in row.get("category_ids") or []
        if c in ctx.get("categories", {})
    ]
    metadata = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
    promoted = {k: row.get(k) for k in PROMOTED}
    if ctx.get("user"):  # OpenMemory: the external user id, not the internal uuid
        promoted["user_id"] = ctx["user"]
    created = parse_time(row.get("created_at"))
    return MemoryItem(
        sourceId=f"memory:{row.get('id') or row.get('hash') or index}",
        content=str(text),
        category=str(categories[0]) if categories else None,
        tags=[str(c) for c in categories],
        author=row.get("agent_id") or row.get("actor_id") or app,
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
