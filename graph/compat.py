"""Files of the official memory server and of the lessons fork, both directions.

``memory.jsonl`` (official ``@modelcontextprotocol/server-memory``): one JSON object per line,
``{"type": "entity", "name", "entityType", "observations": [...]}`` or
``{"type": "relation", "from", "to", "relationType"}``.

``lesson.json`` (the lessons fork): lesson entities ``{name, entityType: "lesson",
observations, errorPattern, metadata, verificationSteps}``, one per line or as a JSON array.

Reading accepts both layouts (JSON lines or one JSON array) and any mix of rows: a row with
``errorPattern`` (or ``entityType: "lesson"``) is a lesson, ``type: "relation"`` (or
``from``/``to``/``relationType``) a relation, anything else with ``name``/``entityType`` an
entity. Import merges: new entities are created, existing ones get the observations they lack,
lessons that already exist are skipped (reported), and a relation whose endpoint is in neither
the graph nor the file (the official server keeps such relations) is kept pending
(:mod:`.pending`), counted in ``pending``: out of every read of the graph until that entity is
created, then made a relation in the same transaction, as ``import-from`` keeps them.

:func:`export_rows` produces the official layout: entities (creation order), then relations;
:func:`pending_rows` the relations still pending, written after them, so a file the official
server wrote comes back as it was. Lessons are entity rows with all their lesson fields (the
official server reads them as ``lesson`` entities with their observations), or rows of their own
``lesson.json`` when asked. Writing the files is the service's (``GraphServices.export_files``),
as every export.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC

from pydantic import ValidationError

from retrieval.errors import InvalidInput

from . import pending
from . import pending_rows as relations_pending
from .common import MAX_BATCH, Caller, Origin, parse_scope
from .entities import GraphService
from .lessons import LessonService
from .models import EntityInput, ImportGraphResult, Relation


def classify(row: dict) -> str:
    if "errorPattern" in row or row.get("entityType") == "lesson":
        return "lesson"
    if row.get("type") == "relation" or {"from", "to", "relationType"} <= row.keys():
        return "relation"
    return "entity"


def _batches(items: list, size: int = MAX_BATCH) -> Iterable[list]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def import_rows(
    graph: GraphService,
    lessons: LessonService,
    who: Caller,
    rows: list[dict],
    scope: str | None = None,
    *,
    origins: Mapping[str, Origin] | None = None,
) -> ImportGraphResult:
    """``origins`` (``import-from``): per entity name, the date and provenance of the
    observations it brings (see ``GraphService.create_entities``)."""
    sc = parse_scope(scope).value
    bucket = who.bucket(sc)
    res = ImportGraphResult()
    entities: dict[str, EntityInput] = {}
    lesson_rows: dict[str, dict] = {}
    relations: list[tuple[int, Relation]] = []  # (row number, relation)
    for i, row in enumerate(rows):
        kind = classify(row)
        label = row.get("name") or f"#{i}"
        try:
            if kind == "relation":
                relations.append((i, Relation.model_validate(row)))
            elif kind == "lesson":
                if "errorPattern" not in row:
                    raise InvalidInput("entityType 'lesson' without errorPattern")
                lesson_rows.setdefault(
                    row.get("name", f"#{i}"), {k: v for k, v in row.items() if k != "type"}
                )
            else:
                e = EntityInput.model_validate(
                    {k: row.get(k) for k in ("name", "entityType", "observations") if k in row}
                )
                if e.name in entities:  # the same entity twice: merge its observations
                    entities[e.name].observations += e.observations
                else:
                    entities[e.name] = e
        except (ValidationError, InvalidInput) as exc:
            msg = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else exc.message
            res.skipped.append(f"{kind} {label}: {msg}")
    # entities: create the new ones, give the existing ones the observations they lack
    existing = graph.entity_rows(bucket, list(entities))
    new = [e for n, e in entities.items() if n not in existing]
    for part in _batches(new):
        out = graph.create_entities(who, part, sc, origins=origins)
        res.entities += len(out.created)
        res.observations += sum(len(e.observations) for e in out.created)
    lesson_named = [n for n, r in existing.items() if r["entity_type"] == "lesson"]
    more = [
        {"entityName": n, "contents": entities[n].observations}
        for n in existing
        if n not in lesson_named and entities[n].observations
    ]
    for part in _batches(more):
        out = graph.add_observations(who, part, sc, origins=origins)
        res.observations += sum(len(r.addedObservations) for r in out.results)
    # lessons: one transaction per batch; existing names are skipped
    taken = graph.entity_rows(bucket, list(lesson_rows))
    todo = []
    for name, row in lesson_rows.items():
        if name in taken:
            res.skipped.append(f"lesson {name}: already exists")
            continue
        try:
            todo.append(lessons._validate(row))
        except InvalidInput as exc:
            res.skipped.append(f"lesson {name}: {exc.message}")
    for part in _batches(todo):
        lessons.create_lessons(who, part, sc, keep_timestamps=True)
        res.lessons += len(part)
    # relations between entities that exist now; the others wait for their entity (pending)
    known = set(graph.entity_rows(bucket, [n for _, r in relations for n in (r.from_, r.to)]))
    ok = [(i, r) for i, r in relations if r.from_ in known and r.to in known]
    waiting = [(i, r) for i, r in relations if not (r.from_ in known and r.to in known)]

    def made(part: list[Relation]) -> int:
        return len(graph.create_relations(who, part, sc).created)

    def kept(part: list[Relation]) -> int:
        done = pending.keep(graph, who, part, sc)
        res.pending += done.pending
        return done.created

    for items, write in ((ok, made), (waiting, kept)):
        for part in _batches(items):
            res.relations += _refusable(write, part, res)
    return res


def _refusable(write, part: list[tuple[int, Relation]], res: ImportGraphResult) -> int:
    """``write(relations)`` for a batch; when the write policy refuses it (``block``), each
    relation alone, the refused ones reported by row number (their names may hold what the
    policy refused)."""
    try:
        return write([r for _, r in part])
    except InvalidInput as exc:
        if len(part) == 1:
            res.skipped.append(f"relation #{part[0][0]}: {exc.message}")
            return 0
    return sum(_refusable(write, [item], res) for item in part)


def js_time(dt) -> str | None:
    """Timestamps as JavaScript's ``Date.toISOString()`` writes them (milliseconds, ``Z``)."""
    if dt is None:
        return None
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def lesson_row(lesson) -> dict:
    doc = lesson.model_dump(mode="json", exclude={"scope"})
    if doc["errorPattern"].get("stackTrace") is None:
        doc["errorPattern"].pop("stackTrace", None)
    for key in ("createdAt", "updatedAt"):
        doc["metadata"][key] = js_time(getattr(lesson.metadata, key))
    return doc


def export_rows(
    graph: GraphService,
    lessons: LessonService,
    who: Caller,
    scope: str | None = None,
    *,
    with_lessons: bool = True,
) -> tuple[list[dict], list[dict]]:
    """(memory.jsonl rows, lesson rows). Lessons are inside the first list when ``with_lessons``."""
    bucket = who.bucket(parse_scope(scope).value)
    by_name = {lesson.name: lesson for lesson in lessons.all_lessons(bucket)}
    rows: list[dict] = []
    for e in graph.all_entities(bucket):
        if e.entityType == "lesson" and e.name in by_name:
            if with_lessons:
                rows.append({"type": "entity", **lesson_row(by_name[e.name])})
            continue
        rows.append(
            {
                "type": "entity",
                "name": e.name,
                "entityType": e.entityType,
                "observations": e.observations,
            }
        )
    rows += [{"type": "relation", **r.dump()} for r in graph.all_relations(bucket)]
    return rows, [lesson_row(x) for x in by_name.values()]


def pending_rows(graph: GraphService, who: Caller, scope: str | None = None) -> list[dict]:
    """The relations still pending in the scope's graph, as memory.jsonl relation rows."""
    bucket = who.bucket(parse_scope(scope).value)
    return [{"type": "relation", "from": f, "to": t, "relationType": k}
            for f, t, k in relations_pending.of(graph.reader, bucket)]  # fmt: skip


def jsonl_text(rows: Iterable[dict]) -> str:
    """Rows as the official server writes them: one compact JSON object per line."""
    return "".join(
        json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n" for row in rows
    )
