"""``export-to``: leave as easily as you came: the knowledge graph and memories of a scope in
another memory server's own format.

* ``basic-memory``: a folder of Markdown notes basic-memory reads as it is (its ``sync``
  indexes them): one note per entity (its type, observations and outgoing relations), one per
  memory (under ``memories/<category>/``: its text, tags, dates, and its id, scope and category
  in the front matter). A memory imported from a basic-memory note goes back into that note.
* ``memory-jsonl``: the official memory server's ``memory.jsonl`` (``export-graph``).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from graph.common import parse_scope
from ingest.importers.basic_memory import NoteOut, write_notes
from retrieval.records import Kind, Record, RecordFilter
from retrieval.store import parse_ts

from .errors import InvalidInput
from .graph_services import GraphServices
from .identity import Identity
from .memory import MemoryService

FORMATS = ("basic-memory", "memory-jsonl")
TITLE_CHARS = 80


class ExportToResult(BaseModel):
    format: str
    path: str
    notes: int = 0
    entities: int = 0
    relations: int = 0
    memories: int = 0
    lessons: int = 0


def _title(rec: Record) -> str:
    title = rec.metadata.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()
    first = next((ln.strip("# ").strip() for ln in rec.content.split("\n") if ln.strip()), "")
    return (first[: TITLE_CHARS - 1] + "…") if len(first) > TITLE_CHARS else first or rec.id


def memory_note(rec: Record) -> NoteOut:
    meta = rec.metadata
    return NoteOut(
        title=_title(rec), type=str(meta.get("sourceKind") or "memory"), prose=rec.content,
        tags=[str(t) for t in rec.tags], created=rec.created_at, modified=rec.updated_at,
        extra={"memory_id": rec.id, "scope": rec.scope.value, "category": rec.category,
               **({"source": meta["source"]} if meta.get("source") else {})},
        folder=f"memories/{rec.category}",
    )  # fmt: skip


def export_basic_memory(
    svc: MemoryService, graphs: GraphServices, who: Identity, folder: str | Path,
    scope: str | None = None,
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
    notes: dict[str, NoteOut] = {}
    for e in entities:
        row = rows.get(e.name)
        notes[e.name] = NoteOut(
            title=e.name, type=e.entityType, observations=list(e.observations),
            relations=outgoing.get(e.name, []),
            created=parse_ts(row["created_at"]) if row is not None else None,
            modified=parse_ts(row["updated_at"]) if row is not None else None,
        )  # fmt: skip
    memories = svc.store.list(
        RecordFilter(buckets=[bucket], kinds=[Kind.memory], now=svc.clock()),
        order="r.created_at ASC, r.rowid ASC",
    )
    loose: list[NoteOut] = []
    for rec in memories:
        entity = (rec.metadata.get("sourceFields") or {}).get("entity")
        if entity in notes and not notes[entity].prose:  # a note's text, imported: back into it
            notes[entity].prose = rec.content
            notes[entity].tags = [str(t) for t in rec.tags]
            notes[entity].created, notes[entity].modified = rec.created_at, rec.updated_at
        else:
            loose.append(memory_note(rec))
    written = write_notes(target, [*notes.values(), *loose])
    return ExportToResult(
        format="basic-memory", path=str(target), notes=len(written), entities=len(entities),
        relations=len(relations), memories=len(memories),
        lessons=sum(e.entityType == "lesson" for e in entities),
    )  # fmt: skip


def export_to(
    svc: MemoryService, graphs: GraphServices, who: Identity, fmt: str, path: str | Path,
    scope: str | None = None,
) -> ExportToResult:  # fmt: skip
    if fmt == "basic-memory":
        return export_basic_memory(svc, graphs, who, path, scope)
    if fmt == "memory-jsonl":
        res = graphs.export_files(who, path, None, scope)
        return ExportToResult(format=fmt, path=res.path, entities=res.entities,
                              relations=res.relations, lessons=res.lessons)  # fmt: skip
    raise InvalidInput(f"unknown format {fmt!r}: use {' or '.join(FORMATS)}", formats=FORMATS)
