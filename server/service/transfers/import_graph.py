"""The knowledge-graph part of an import: entities, relations and lessons, merged into the
target scope's graph by ``import-graph``'s own :func:`graph.compat.import_rows`.

What is there already is recognised by name (an entity that has every observation it brings),
by triple (a relation) and by name (a lesson): a second run writes nothing. A relation whose
endpoint is in neither the graph nor the source (a forward reference in basic-memory, a
dangling relation in memory.jsonl) is kept pending (``graph.pending``): counted in the report,
out of the graph until that entity is created, then made in the same transaction (by a later
import, ``create_entities``, a lesson). Each entity's observations keep the
entity's date and provenance (``graph.common.Origin``). Under a ``block`` write policy an entity
whose name or observations are refused is skipped alone: its batch is written entity by entity.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from graph import pending
from graph.common import Origin
from graph.compat import import_rows
from graph.models import ImportGraphResult, Relation
from ingest.importers.items import EntityItem, Item, LessonItem, RelationItem
from server.service.core.errors import InvalidInput
from server.service.graphs.graph_services import GraphServices
from server.service.transfers.import_from import ImportPart, reason

ENTITY_BATCH = 200
RELATION_BATCH = 500
DANGLING = "relation to an entity in neither the graph nor the source"


class GraphImport(ImportPart):
    """One run's graph items (see the module docstring)."""

    @property
    def graphs(self) -> GraphServices:
        return self.backend

    # ------------------------------------------------------------------ accounting
    def _count(self, kind: str, n: int, sample: str | None = None) -> None:
        if n:
            self.res.created[kind] = self.res.created.get(kind, 0) + n
        if sample is not None and kind in ("entity", "relation", "lesson"):
            self.res.byKind[kind] = self.res.byKind.get(kind, 0) + 1
            self.res.samples.setdefault(kind, sample)

    def origin(self, item: EntityItem) -> Origin:
        meta = {"source": f"imported from {self.source}, id {item.sourceId}",
                "importedFrom": self.source, "sourceId": item.sourceId}  # fmt: skip
        if item.fields:
            meta["sourceFields"] = item.fields
        return Origin(at=item.createdAt, metadata=meta)

    # ------------------------------------------------------------------ plan
    def run(self, items: list[Item], stop: threading.Event | None = None) -> Iterator[int]:
        """Import ``items``; yields how many items each step handled (for progress)."""
        graph = self.graphs.graph
        entities: dict[str, EntityItem] = {}
        for e in (i for i in items if isinstance(i, EntityItem)):
            if e.name in entities:  # the same name twice: one entity, both observation lists
                entities[e.name].observations += e.observations
                self.res.alreadyImported += 1
            else:
                entities[e.name] = e.model_copy(deep=True)
        existing = graph.entity_rows(self.bucket, list(entities))
        have = graph.observations_of(self.bucket, existing.values())
        todo: list[EntityItem] = []
        for name, e in entities.items():
            obs = list(dict.fromkeys(e.observations))
            missing = [o for o in obs if o not in set(have.get(name, []))]
            if name in existing and not missing:
                self.res.alreadyImported += 1
            else:
                todo.append(e)
        yield from self._entities(todo, existing, have, stop)
        rels = [i for i in items if isinstance(i, RelationItem)]
        ends = [n for r in rels for n in (r.from_, r.to)]
        known = set(graph.entity_rows(self.bucket, ends)) | {e.name for e in todo}
        triples = self._triples()
        relations, waiting = [], []
        for r in rels:
            if (r.from_, r.to, r.relationType) in triples:
                self.res.alreadyImported += 1
                continue
            triples.add((r.from_, r.to, r.relationType))
            (relations if r.from_ in known and r.to in known else waiting).append(r)
        yield from self._relations(relations, stop)
        yield from self._pending(waiting, stop)
        yield from self._lessons([i for i in items if isinstance(i, LessonItem)])

    def _triples(self) -> set[tuple[str, str, str]]:
        rows = self.graphs.graph.reader.execute(
            "SELECT from_name, to_name, relation_type FROM relations WHERE bucket=?",
            (self.bucket,),
        ).fetchall()
        return {(r[0], r[1], r[2]) for r in rows}

    # ------------------------------------------------------------------ writes
    def _rows(self, rows: list[dict], origins: dict[str, Origin] | None = None):
        g = self.graphs
        return import_rows(g.graph, g.lessons, self.who, rows, self.scope.value, origins=origins)

    def _entities(self, todo: list[EntityItem], existing, have, stop) -> Iterator[int]:
        for part in self.parts(todo, ENTITY_BATCH, stop):
            if self.dry_run:
                for e in part:
                    obs = [
                        o for o in dict.fromkeys(e.observations) if o not in have.get(e.name, [])
                    ]
                    self._count("entity", 0 if e.name in existing else 1, _entity_text(e, obs))
                    self._count("observation", len(obs))
            else:
                self._write_entities(part)
            yield len(part)

    def _write_entities(self, part: list[EntityItem]) -> None:
        rows = [{"type": "entity", "name": e.name, "entityType": e.entityType,
                 "observations": list(dict.fromkeys(e.observations))} for e in part]  # fmt: skip
        origins = {e.name: self.origin(e) for e in part}
        try:
            done = self._rows(rows, origins)
        except InvalidInput:
            if len(part) == 1:
                raise
            for e in part:  # one refused entity must not stop the others: one at a time
                try:
                    self._write_entities([e])
                except InvalidInput as exc:
                    self.res.skip(e.sourceId, reason(exc))
            return
        self._merge(done)
        for e in part:
            self._count("entity", 0, _entity_text(e, e.observations))

    def _relations(self, relations: list[RelationItem], stop) -> Iterator[int]:
        for part in self.parts(relations, RELATION_BATCH, stop):
            if self.dry_run:
                self._count("relation", len(part))
            else:
                self._merge(self._rows([{"type": "relation", **r.model_dump(
                    include={"from_", "to", "relationType"}, by_alias=True)} for r in part]))  # fmt: skip
            for r in part:
                self._count("relation", 0, f"{r.from_} -{r.relationType}-> {r.to}")
            yield len(part)

    def _pending(self, waiting: list[RelationItem], stop) -> Iterator[int]:
        """Keep ``waiting`` (an endpoint in neither the graph nor the source) pending."""
        for part in self.parts(waiting, RELATION_BATCH, stop):
            if self.dry_run:
                self.res.pending += len(part)
            else:
                rels = [Relation.model_validate(r.model_dump(
                    include={"from_", "to", "relationType"}, by_alias=True)) for r in part]  # fmt: skip
                try:
                    kept = pending.keep(self.graphs.graph, self.who, rels, self.scope.value)
                except InvalidInput as exc:  # a name the write policy refuses (block)
                    for r in part:
                        self.res.skip(r.sourceId, reason(exc))
                    yield len(part)
                    continue
                self.res.pending += kept.pending
                self._count("relation", kept.created)
                self.res.warn(kept.warnings)
            yield len(part)

    def _lessons(self, lessons: list[LessonItem]) -> Iterator[int]:
        if not lessons:
            return
        names = [str(x.row.get("name", "")) for x in lessons]
        taken = set(self.graphs.graph.entity_rows(self.bucket, names))
        new = [x for x, n in zip(lessons, names, strict=True) if n not in taken]
        self.res.alreadyImported += len(lessons) - len(new)
        if self.dry_run:
            self._count("lesson", len(new))
        elif new:
            self._merge(self._rows([x.row for x in new]))
        for x in new:
            self._count("lesson", 0, str(x.row.get("name")))
        yield len(lessons)

    def _merge(self, done: ImportGraphResult) -> None:
        self._count("entity", done.entities)
        self._count("observation", done.observations)
        self._count("relation", done.relations)
        self._count("lesson", done.lessons)
        self.res.pending += done.pending  # an endpoint refused meanwhile (a block policy)
        for message in done.skipped:
            what, _, why = message.partition(": ")
            self.res.skip(what, DANGLING if why.startswith("no entity") else why)


def _entity_text(e: EntityItem, obs: list[str]) -> str:
    first = f": {obs[0]}" if obs else ""
    return f"{e.name} ({e.entityType}){first}"[:160]
