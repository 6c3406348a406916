"""``export-memories`` / ``import-memories``: versioned JSON files, inside allowed directories.

File format (``version`` 1)::

    {"format": "pattern-memory", "version": 1, "exportedAt": "...", "projectId": "...",
     "agentId": "...", "count": N, "memories": [Memory, ...]}

The file is written as every export is (``ingest.importers.export_files``): an existing file
is refused unless ``force``, which keeps it as ``<name>.bak-<time>`` first; it is 0600, the
folders made for it 0700, and nothing is written through a symbolic link (a link at its name,
even one that stays inside the allowed directories, is an existing file).

Every field of a memory round-trips. Imported memories belong to the importing agent and
project. Pattern's own export files (``"version": "1.0"``) are accepted too. Every imported
memory passes the write policy (:mod:`.policy`): under ``block`` an entry with a secret or an
injection is an error of its own (skipped, or the whole import stops without ``skipInvalid``),
under ``redact`` it is stored redacted, and a flagged entry is stored marked ``suspicious``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from pydantic import ValidationError

from ingest.importers.export_files import write_paths
from retrieval.records import Kind, RecordFilter, Scope
from server.service.core import scopes as rules
from server.service.core.errors import AccessDenied, InvalidInput, PatternError
from server.service.core.identity import Identity
from server.service.core.models import ExportResult, ImportResult, Memory
from server.service.memories.memory import MemoryService
from server.service.trust.policy import SUSPICIOUS

FORMAT = "pattern-memory"
VERSION = 1
ACCEPTED_VERSIONS = {1, "1", "1.0"}


def check_path(path: str | Path, allowed: Sequence[Path], *, must_exist: bool) -> Path:
    """Resolve ``path`` (relative paths against the first allowed directory) and refuse
    anything outside the allowed directories, symlinks included."""
    if not allowed:
        raise AccessDenied("no directory is allowed for import/export; set PATTERN_ALLOWED_DIRS")
    p = Path(path).expanduser()
    if not p.is_absolute():
        p = allowed[0] / p
    resolved = p.resolve()
    roots = [Path(a).expanduser().resolve() for a in allowed]
    if not any(resolved == r or resolved.is_relative_to(r) for r in roots):
        raise AccessDenied(
            f"{resolved} is outside the allowed directories ({', '.join(map(str, roots))}); "
            "set PATTERN_ALLOWED_DIRS to allow another one",
            path=str(resolved),
            allowed=[str(r) for r in roots],
        )
    if must_exist and not resolved.is_file():
        raise InvalidInput(f"file not found: {resolved}", path=str(resolved))
    return resolved


def export_memories(
    svc: MemoryService,
    who: Identity,
    allowed: Sequence[Path],
    output_path: str | None = None,
    scope: str | None = None,
    category: str | None = None,
    since: datetime | None = None,
    include_expired: bool = False,
    *,
    force: bool = False,
) -> ExportResult:
    now = svc.clock()
    if scope is not None and scope not in {s.value for s in Scope}:
        raise InvalidInput(f"invalid scope {scope!r}: use private, personal, team or public")
    name = output_path or f"memories-backup-{now.strftime('%Y%m%dT%H%M%SZ')}.json"
    check_path(name, allowed, must_exist=False)  # where a link at the name would lead, too
    # written at its own name in its resolved folder: a link at the name is never followed
    given = Path(name).expanduser()
    given = given if given.is_absolute() else Path(allowed[0]) / given
    target = check_path(given.parent, allowed, must_exist=False) / given.name
    f = RecordFilter(
        buckets=who.visible_buckets([scope] if scope else None),
        kinds=[Kind.memory],
        categories=[category] if category else None,
        updated_after=since,
        include_expired=include_expired,
        now=now,
    )
    # oldest first; ties in insertion order, so a re-export of an import is the same file
    memories = [
        Memory.from_record(r) for r in svc.store.list(f, order="r.created_at ASC, r.rowid ASC")
    ]
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "exportedAt": now.isoformat(),
        "projectId": who.project_id,
        "agentId": who.agent_id,
        "count": len(memories),
        "memories": [m.model_dump(mode="json") for m in memories],
    }
    data = json.dumps(doc, ensure_ascii=False, indent=2).encode("utf-8")
    done = write_paths([(target, data.decode("utf-8"))], force=force)
    flagged = sum(bool(m.metadata.get(SUSPICIOUS)) for m in memories)
    return ExportResult(
        exported=len(memories), filepath=str(target), bytes=len(data), suspicious=flagged,
        backups=done.backups,
    )  # fmt: skip


def _load(path: Path) -> list:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"{path} is not a valid JSON export: {exc}", path=str(path)) from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("memories"), list):
        raise InvalidInput(f"{path} is not a memory export (no 'memories' list)", path=str(path))
    version = doc.get("version")
    if (
        isinstance(version, bool)
        or not isinstance(version, int | str)
        or version not in ACCEPTED_VERSIONS
    ):
        raise InvalidInput(
            f"{path}: unsupported export version {doc.get('version')!r} (supported: 1)",
            path=str(path),
        )
    return doc["memories"]


def record_id(value: str) -> bool:
    """Whether ``value`` is a record id as the store makes them (a UUID in its usual form): an
    imported id is stored and indexed as it is, so it may be nothing else."""
    try:
        return len(value) == 36 and str(uuid.UUID(value)) == value.lower()
    except ValueError:
        return False


def import_memories(
    svc: MemoryService,
    who: Identity,
    allowed: Sequence[Path],
    input_path: str,
    overwrite_existing: bool = False,
    skip_invalid: bool = True,
) -> ImportResult:
    path = check_path(input_path, allowed, must_exist=True)
    items = _load(path)
    adds, replaces, errors, warnings = [], [], [], []
    seen: set[str] = set()
    for i, raw in enumerate(items):
        given = raw.get("id") if isinstance(raw, dict) else None
        # an id is named in messages only when it is one (a text there could be anything)
        label = given if isinstance(given, str) and record_id(given) else f"#{i}"
        try:
            try:
                mem = Memory.model_validate(raw)
            except ValidationError as exc:
                first = exc.errors()[0]
                raise InvalidInput(
                    f"Invalid memory structure: {label} ({'.'.join(map(str, first['loc']))}: {first['msg']})"
                ) from None
            if not record_id(mem.id):
                raise InvalidInput(
                    f"Invalid memory structure: {label} (id: a UUID, as export-memories "
                    f"writes it, expected; found {len(mem.id)} characters that are not one)"
                )
            if mem.kind != Kind.memory.value:
                raise InvalidInput(f"Invalid memory structure: {label} (kind {mem.kind!r})")
            rules.check_scope_category(mem.scope, mem.category)
            rules.check_content(mem.content)
            mem.metadata = rules.check_metadata(mem.metadata)
            if mem.id in seen:
                raise InvalidInput(f"Memory {mem.id} appears twice in the file")
            seen.add(mem.id)
            rec, found = svc.engine.screen_record(mem.to_record(who.project_id, who.agent_id))
            existing = svc.store.get([mem.id]).get(mem.id)
            if existing is not None:
                if not overwrite_existing:
                    raise InvalidInput(
                        f"Memory {mem.id} already exists (use overwriteExisting to replace)"
                    )
                if not svc.visible(who, existing) or existing.agent_id != who.agent_id:
                    raise InvalidInput(f"Memory {mem.id} exists and belongs to another agent")
                if existing.bucket != rec.bucket:  # moving buckets: delete + insert
                    rec.revision = max(rec.revision, existing.revision + 1)  # never goes back
                    replaces.append(("move", rec))
                else:
                    replaces.append(("replace", rec))
            else:
                adds.append(rec)
            warnings += [f"Memory {label}: {w}" for w in found]
        except PatternError as exc:
            # every error names its memory (the rule checks above do not know the id)
            message = exc.message if label in exc.message else f"Memory {label}: {exc.message}"
            if not skip_invalid:
                raise InvalidInput(
                    f"import stopped at entry {i}: {message}; nothing was imported",
                    index=i,
                ) from None
            errors.append(message)
    moved = [r for op, r in replaces if op == "move"]
    svc.engine.apply(
        add=[*adds, *moved],
        replace=[r for op, r in replaces if op == "replace"],
        delete=[r.id for r in moved],
        # inside the transaction: the limits, and that the new ids are still new (Conflict
        # when a concurrent import of the same file stored them first)
        check=svc.checks(svc.absent_check([r.id for r in adds]), svc.limits_check(who, adds)),
    )
    imported = len(adds) + len(replaces)
    return ImportResult(
        imported=imported, skipped=len(items) - imported, errors=errors, warnings=warnings
    )
