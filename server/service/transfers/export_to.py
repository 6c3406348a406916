"""``export-to``: leave as easily as you came: the knowledge graph and memories of a scope in
another memory server's own format.

* ``basic-memory``: a folder of Markdown notes basic-memory reads as it is (its ``sync``
  indexes them): one note per entity (its type, observations, outgoing relations and the
  relations still pending from it, which basic-memory keeps as forward references), one per
  memory (under ``memories/<category>/``: its text, tags, dates, and its id, scope and category
  in the front matter). A note imported from basic-memory goes back to its own path and
  permalink (kept in its ``sourceFields``), with its custom front matter and its text.
* ``memory-jsonl``: the official memory server's ``memory.jsonl`` (``export-graph``'s rows).

Both write through ``ingest.importers.export_files``: an existing file with other content is
refused unless ``force`` (then kept as ``<name>.bak-<time>``), nothing is written through a
link, files are 0600 and the folders created 0700.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field

from graph import pending_rows
from graph.common import parse_scope
from graph.compat import export_rows
from ingest.importers.basic_memory import STANDARD, NoteOut, file_slug, note_files
from ingest.importers.export_files import NAME_BYTES, safe_relative, write_files
from retrieval.records import Kind, Record, RecordFilter
from retrieval.storage.store import parse_ts
from server.service.core.errors import InvalidInput
from server.service.core.identity import Identity
from server.service.graphs.graph_services import GraphServices
from server.service.memories.memory import MemoryService

FORMATS = ("basic-memory", "memory-jsonl")
TITLE_CHARS = 80
BASIC_MEMORY = "basic-memory"
KEPT_ELSEWHERE = {"permalink", "path", "tags", "entity", "moreTags"}  # not custom front matter


class ExportToResult(BaseModel):
    format: str
    path: str
    notes: int = 0
    entities: int = 0
    relations: int = 0
    pending: int = Field(0, description="Relations still waiting for their entity, written too.")
    memories: int = 0
    lessons: int = 0
    unchanged: int = Field(0, description="Files already there with the same content.")
    backups: list[str] = Field(
        default_factory=list, description="With --force: 'file -> its backup', per file replaced."
    )


def _title(rec: Record) -> str:
    title = rec.metadata.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()
    first = next((ln.strip("# ").strip() for ln in rec.content.split("\n") if ln.strip()), "")
    return (first[: TITLE_CHARS - 1] + "…") if len(first) > TITLE_CHARS else first or rec.id


def _origin(fields: object) -> dict:
    """A basic-memory note's place and custom front matter, from the source fields an import
    kept ({} when there are none, or its path would leave the folder)."""
    if not isinstance(fields, dict):
        return {}
    path = fields.get("path")
    rel = safe_relative(path) if isinstance(path, str) else None
    if rel is None or not rel.endswith(".md"):
        return {}
    if any(len(p.encode("utf-8", "replace")) > NAME_BYTES for p in rel.split("/")):
        return {}  # a name no export writes: the note goes to its title's file
    permalink = fields.get("permalink")
    extra = {k: v for k, v in fields.items() if k not in KEPT_ELSEWHERE and k not in STANDARD}
    return {"path": rel, "permalink": permalink if isinstance(permalink, str) else "",
            "extra": extra}  # fmt: skip


def _from_basic_memory(meta: dict) -> dict:
    return _origin(meta.get("sourceFields")) if meta.get("importedFrom") == BASIC_MEMORY else {}


def memory_note(rec: Record) -> NoteOut:
    meta = rec.metadata
    origin = _from_basic_memory(meta)
    return NoteOut(
        title=_title(rec), type=str(meta.get("sourceKind") or "memory"), prose=rec.content,
        tags=[str(t) for t in rec.tags], created=rec.created_at, modified=rec.updated_at,
        extra={"memory_id": rec.id, "scope": rec.scope.value, "category": rec.category,
               **({"source": meta["source"]} if meta.get("source") else {}),
               **origin.get("extra", {})},
        folder=f"memories/{file_slug(rec.category)}", path=origin.get("path", ""),
        permalink=origin.get("permalink", ""),
    )  # fmt: skip


def _entity_origins(svc: MemoryService, bucket: str) -> dict[str, dict]:
    """{entity name: its basic-memory origin} from the provenance its observations keep."""
    rows = svc.store.reader.execute(
        "SELECT entity_name, metadata FROM records WHERE bucket=? AND kind='observation' "
        "AND entity_name IS NOT NULL AND json_extract(metadata, '$.importedFrom') = ?",
        (bucket, BASIC_MEMORY),
    ).fetchall()
    out: dict[str, dict] = {}
    for name, raw in rows:
        if name not in out:
            origin = _from_basic_memory(json.loads(raw))
            if origin:
                out[name] = origin
    return out


def export_basic_memory(
    svc: MemoryService, graphs: GraphServices, who: Identity, folder: str | Path,
    scope: str | None = None, *, force: bool = False,
) -> ExportToResult:  # fmt: skip
    """The scope's graph and memories as basic-memory notes under ``folder``."""
    target = Path(folder).expanduser()
    if target.exists() and not target.is_dir():
        raise InvalidInput(f"{target} is a file; give a folder for the notes", path=str(target))
    sc = parse_scope(scope)
    bucket = who.bucket(sc.value)
    graph = graphs.graph
    entities = graph.all_entities(bucket)
    rows = graph.entity_rows(bucket, [e.name for e in entities])
    outgoing: dict[str, list[tuple[str, str]]] = {}
    relations = graph.all_relations(bucket)
    for r in relations:
        outgoing.setdefault(r.from_, []).append((r.relationType, r.to))
    waiting = pending_rows.of(graph.reader, bucket)
    for f, t, kind in waiting:  # basic-memory keeps them as forward references
        outgoing.setdefault(f, []).append((kind, t))
    origins = _entity_origins(svc, bucket)
    notes: dict[str, NoteOut] = {}
    for e in entities:
        row = rows.get(e.name)
        origin = origins.get(e.name, {})
        notes[e.name] = NoteOut(
            title=e.name, type=e.entityType, observations=list(e.observations),
            relations=outgoing.get(e.name, []),
            created=parse_ts(row["created_at"]) if row is not None else None,
            modified=parse_ts(row["updated_at"]) if row is not None else None,
            path=origin.get("path", ""), permalink=origin.get("permalink", ""),
            extra=origin.get("extra", {}),
        )  # fmt: skip
    memories = svc.store.list(
        RecordFilter(buckets=[bucket], kinds=[Kind.memory], now=svc.clock()),
        order="r.created_at ASC, r.rowid ASC",
    )
    loose: list[NoteOut] = []
    for rec in memories:
        entity = (rec.metadata.get("sourceFields") or {}).get("entity")
        if entity in notes and not notes[entity].prose:  # a note's text, imported: back into it
            note = notes[entity]
            note.prose = rec.content
            note.tags = [str(t) for t in rec.tags]
            note.created, note.modified = rec.created_at, rec.updated_at
            origin = _from_basic_memory(rec.metadata)
            if origin and not note.path:
                note.path, note.permalink = origin["path"], origin["permalink"]
                note.extra = {**origin["extra"], **note.extra}
        else:
            loose.append(memory_note(rec))
    done = write_files(target, note_files([*notes.values(), *loose]), force=force)
    return ExportToResult(
        format="basic-memory", path=str(target), notes=len(done.written) + len(done.unchanged),
        entities=len(entities), relations=len(relations), pending=len(waiting),
        memories=len(memories), lessons=sum(e.entityType == "lesson" for e in entities),
        unchanged=len(done.unchanged), backups=done.backups,
    )  # fmt: skip


def export_memory_jsonl(
    graphs: GraphServices, who: Identity, path: str | Path, scope: str | None = None,
    *, force: bool = False,
) -> ExportToResult:  # fmt: skip
    """The scope's graph as the official ``memory.jsonl`` at ``path`` (lessons inline); the
    relations still pending are written too (the official server keeps such relations)."""
    target = Path(path).expanduser()
    if target.is_dir():
        raise InvalidInput(f"{target} is a folder; give the file to write", path=str(target))
    rows, lesson_docs = export_rows(graphs.graph, graphs.lessons, who, scope)
    bucket = who.bucket(parse_scope(scope).value)
    waiting = pending_rows.of(graphs.graph.reader, bucket)
    rows += [{"type": "relation", "from": f, "to": t, "relationType": k} for f, t, k in waiting]
    text = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in rows)
    done = write_files(target.parent, {target.name: text}, force=force, hidden=True)
    return ExportToResult(
        format="memory-jsonl", path=str(target.resolve()),
        entities=sum(r["type"] == "entity" for r in rows),
        relations=sum(r["type"] == "relation" for r in rows) - len(waiting),
        pending=len(waiting), lessons=len(lesson_docs), unchanged=len(done.unchanged),
        backups=done.backups,
    )  # fmt: skip


def export_to(
    svc: MemoryService, graphs: GraphServices, who: Identity, fmt: str, path: str | Path,
    scope: str | None = None, *, force: bool = False,
) -> ExportToResult:  # fmt: skip
    if fmt == "basic-memory":
        return export_basic_memory(svc, graphs, who, path, scope, force=force)
    if fmt == "memory-jsonl":
        return export_memory_jsonl(graphs, who, path, scope, force=force)
    raise InvalidInput(f"unknown format {fmt!r}: use {' or '.join(FORMATS)}", formats=FORMATS)
