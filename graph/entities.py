"""Entities, relations and observations: the official memory server's tools, transactional.

Semantics (the seed's, made precise):

- ``create_entities``: names that already exist in the graph are ignored (reported in
  ``skipped``); a name repeated inside one call counts once (the first wins).
- ``create_relations``: a relation whose triple already exists is skipped. **Both endpoints
  must exist**: if any relation names a missing entity the call fails with ``not_found``
  listing the missing names and writes nothing (the official server stores such dangling
  relations silently; an agent that mistyped a name should hear about it). The call is
  idempotent, so retrying the whole batch after creating the entities is safe.
- ``add_observations``: fails with ``not_found`` and writes nothing if any entity is missing;
  returns what was added per entity; an observation the entity already has is not re-added.
- ``delete_entities``: cascades to the entities' relations (either direction), observations
  and lessons; missing names are ignored.
- ``delete_observations`` / ``delete_relations``: missing items are ignored.
- ``read_graph``: paginated (entities in creation order; each relation on the page of its
  source entity), so a large graph never floods the context.
- ``open_nodes``: missing names are skipped silently; returns the relations among the
  requested entities.

Observations are embedded ``observation`` records (``entity_name`` set, context = entity name
and type) in the graph's bucket; entity rows, relation rows and records change in one
transaction. A lesson is an entity of type ``lesson`` whose observations live in its lesson
(see ``graph.lessons``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from retrieval.errors import Conflict, InvalidInput, NotFound
from retrieval.records import Kind, Record

from . import orset
from .common import (
    Caller,
    GraphBase,
    Origin,
    check_batch,
    chunks,
    entity_context,
    first_revisions,
    parse_scope,
    placeholders,
    ts,
    validated,
)
from .models import (
    AddedObservations,
    AddObservationsResult,
    CreateEntitiesResult,
    CreateRelationsResult,
    DeleteResult,
    Entity,
    EntityInput,
    Graph,
    GraphPage,
    ObservationDeletion,
    ObservationInput,
    Relation,
)
from .pending_rows import forget as forget_pending

DEFAULT_PAGE = 100
MAX_PAGE = 1000


class GraphService(GraphBase):
    """Every method takes the caller and a ``scope`` (default team) selecting the graph."""

    lessons = None  # set by graph.lessons.LessonService (lesson observations live there)

    # ------------------------------------------------------------------ helpers
    def _observation(
        self, who: Caller, scope, name: str, entity_type: str, text: str, now,
        origin: Origin | None = None,
    ) -> Record:  # fmt: skip
        at = origin.at if origin is not None and origin.at is not None else now
        return Record(
            kind=Kind.observation, project_id=who.project_id, agent_id=who.agent_id, scope=scope,
            category="observation", content=text, context=entity_context(name, entity_type),
            entity_name=name, created_at=at, updated_at=at,
            metadata=dict(origin.metadata) if origin is not None else {},
        )  # fmt: skip

    def _missing(self, bucket: str, names: Sequence[str], conn=None) -> list[str]:
        found = self.entity_rows(bucket, names, conn)
        return [n for n in dict.fromkeys(names) if n not in found]

    # ------------------------------------------------------------------ entities
    def create_entities(
        self, who: Caller, entities: Sequence[EntityInput | dict], scope: str | None = None,
        *, origins: Mapping[str, Origin] | None = None,
    ) -> CreateEntitiesResult:  # fmt: skip
        """``origins`` (imports): per entity name, the date and provenance its observations
        (and its row) keep instead of now's."""
        try:
            return self._create_entities(who, entities, scope, origins or {})
        except Conflict:
            if self.store.cluster is None:
                raise
            # PostgreSQL mode: another daemon created one of the names an instant ago; the
            # replica has caught up (the failed transaction does that), so the retry skips it
            # as one daemon would have
            return self._create_entities(who, entities, scope, origins or {})

    def _create_entities(
        self, who: Caller, entities: Sequence[EntityInput | dict], scope: str | None,
        origins: Mapping[str, Origin],
    ) -> CreateEntitiesResult:  # fmt: skip
        sc = parse_scope(scope)
        bucket = who.bucket(sc.value)
        items = validated(EntityInput, entities, "entities")
        warnings: list[str] = []
        wanted: dict[str, tuple[str, list[str]]] = {}
        for e in items:
            if e.entityType == "lesson":
                raise InvalidInput(
                    f"entity {e.name!r}: entityType 'lesson' is reserved; use create_lesson",
                    name=e.name,
                )
            name = self.clean_name(e.name, "entity name", warnings)
            if name in wanted:
                continue
            etype = self.clean_name(e.entityType, f"type of {name!r}", warnings)
            obs = [self.clean(o, f"observation of {name!r}", warnings) for o in e.observations]
            wanted[name] = (etype, list(dict.fromkeys(obs)))

        def plan():
            existing = set(self.entity_rows(bucket, list(wanted)))
            new = {n: v for n, v in wanted.items() if n not in existing}
            now = self.clock()
            # a name created again continues its revisions; what it is given now is added at
            # its first one (orset: newer than any read of the entity it had before)
            starts = first_revisions(self.reader, bucket, list(new))
            records = []
            for name, (etype, obs) in new.items():
                for text in obs:
                    records.append(
                        self._observation(who, sc, name, etype, text, now, origins.get(name))
                    )
                    records[-1].metadata["addedAt"] = starts[name]
            return existing, new, now, records, starts

        ahead = self.embed_ahead(plan()[3])  # the slow part, before the lock
        with self.lock:
            existing, new, now, done = orset.retrying(
                lambda: self._create_planned(who, bucket, plan, ahead, origins)
            )
        return CreateEntitiesResult(
            created=[Entity(name=n, entityType=t, observations=o) for n, (t, o) in new.items()],
            skipped=[n for n in wanted if n in existing],
            warnings=warnings + done.warnings,
        )

    def _create_planned(self, who: Caller, bucket: str, plan, ahead, origins):
        """create_entities' write: plan from a fresh read (again: another writer may have been
        first), write if no name was taken or deleted since."""
        existing, new, now, records, starts = plan()

        def check(conn) -> None:  # another process may have created one of them meanwhile
            taken = self.entity_rows(bucket, list(new), conn)
            if taken:
                raise Conflict(
                    f"entity {next(iter(taken))!r} was just created by another writer; retry "
                    "(existing names are ignored)",
                    names=list(taken),
                )
            if first_revisions(conn, bucket, list(new)) != starts:  # created and deleted since
                raise orset.Moved

        def extra(conn) -> None:
            for name, (etype, _obs) in new.items():
                at = getattr(origins.get(name), "at", None) or now
                self.insert_entity(conn, bucket, who, name, etype, at, starts[name])

        done = self.engine.apply(
            add=records, check=check, extra=extra, vectors=self.ahead_for(ahead, records)
        )
        return existing, new, now, done

    def delete_entities(
        self, who: Caller, names: Sequence[str], scope: str | None = None
    ) -> DeleteResult:
        bucket = who.bucket(parse_scope(scope).value)
        check_batch(names, "names")
        with self.lock:
            rows = self.entity_rows(bucket, names)
            if not rows:
                return DeleteResult(deleted=0, message="no such entities")
            present = list(rows)
            found = self.observation_rows(bucket, present, damaged=True)
            ids = [rid for obs in found.values() for rid, _ in obs]
            ids += [r["record_id"] for r in self.lesson_rows(bucket, present).values()]

            def extra(conn) -> None:
                self.delete_entity_rows(conn, bucket, present)

            self.engine.apply(delete=ids, extra=extra)
        return DeleteResult(
            deleted=len(present),
            message=f"deleted {len(present)} entities with their relations and observations",
        )

    # ------------------------------------------------------------------ relations
    def create_relations(
        self, who: Caller, relations: Sequence[Relation | dict], scope: str | None = None
    ) -> CreateRelationsResult:
        bucket = who.bucket(parse_scope(scope).value)
        items = validated(Relation, relations, "relations")
        warnings: list[str] = []
        items = [
            Relation.model_validate({
                "from": self.clean_name(r.from_, "relation source", warnings),
                "to": self.clean_name(r.to, "relation target", warnings),
                "relationType": self.clean_name(r.relationType, "relation type", warnings),
            })
            for r in items
        ]  # fmt: skip
        unique = list({r.key(): r for r in reversed(items)}.values())[::-1]
        with self.lock, self.store.transaction() as conn:
            names = [n for r in unique for n in (r.from_, r.to)]
            missing = self._missing(bucket, names, conn)
            if missing:
                raise NotFound(
                    f"create_relations: no entity named {', '.join(map(repr, missing[:20]))} in the "
                    f"{bucket.split('/', 1)[0]} graph; create it with create_entities first "
                    "(nothing was written)",
                    missing=missing,
                )
            now = ts(self.clock())
            created = []
            for r in unique:
                cur = conn.execute(
                    "INSERT OR IGNORE INTO relations(bucket, from_name, to_name, relation_type, "
                    "created_by, created_at) VALUES (?,?,?,?,?,?)",
                    (bucket, r.from_, r.to, r.relationType, who.agent_id, now),
                )
                if cur.rowcount:
                    created.append(r)
        return CreateRelationsResult(
            created=created, skipped=len(items) - len(created), warnings=warnings
        )

    def delete_relations(
        self, who: Caller, relations: Sequence[Relation | dict], scope: str | None = None
    ) -> DeleteResult:
        bucket = who.bucket(parse_scope(scope).value)
        items = validated(Relation, relations, "relations")
        deleted = 0
        with self.lock, self.store.transaction() as conn:
            for r in items:
                deleted += conn.execute(
                    "DELETE FROM relations WHERE bucket=? AND from_name=? AND to_name=? "
                    "AND relation_type=?",
                    (bucket, r.from_, r.to, r.relationType),
                ).rowcount
                deleted += forget_pending(conn, bucket, (r.from_, r.to, r.relationType))
        return DeleteResult(deleted=deleted, message=f"deleted {deleted} relations")

    # ------------------------------------------------------------------ observations
    def add_observations(
        self, who: Caller, observations: Sequence[ObservationInput | dict], scope: str | None = None,
        *, origins: Mapping[str, Origin] | None = None,
    ) -> AddObservationsResult:  # fmt: skip
        """``origins``: as for :meth:`create_entities`, for the observations added."""
        origins = origins or {}
        sc = parse_scope(scope)
        bucket = who.bucket(sc.value)
        items = validated(ObservationInput, observations, "observation groups")
        warnings: list[str] = []
        wanted: dict[str, list[str]] = {}
        specs: dict[str, list] = {}
        for o in items:
            name = self.clean_name(o.entityName, "entity name", warnings)
            texts = [self.clean(c, f"observation of {name!r}", warnings) for c in o.contents]
            wanted.setdefault(name, []).extend(texts)
            if o.citations:
                specs.setdefault(name, []).extend(o.citations)
        # citations are resolved (files read) before the lock: explicit ones per entity, the
        # paths each observation mentions per observation
        cited = {n: self.citations(who, specs.get(n), []) for n in wanted}
        mentioned = {(n, t): self.citations(who, None, [t]) for n, ts in wanted.items() for t in ts}

        def plan():
            rows = self.entity_rows(bucket, list(wanted))
            missing = [n for n in wanted if n not in rows]
            if missing:
                raise NotFound(
                    f"add_observations: no entity named {', '.join(map(repr, missing[:20]))} in the "
                    f"{sc.value} graph; create it with create_entities first (nothing was written)",
                    missing=missing,
                )
            plain = [n for n in wanted if rows[n]["entity_type"] != "lesson"]
            have = {
                n: {o.content: o for o in obs}
                for n, obs in orset.observations(self.reader, bucket, plain).items()
            }
            now = self.clock()
            records: list[Record] = []
            results: list[AddedObservations] = []
            replace: list[Record] = []
            extras = []
            again: list[tuple[orset.Obs, int]] = []  # re-asserted: (observation, new revision)
            cites: list[tuple[object, str]] = []  # (pending citations, record id)
            for name, texts in wanted.items():
                rev = int(rows[name]["revision"] or 0) + 1
                if rows[name]["entity_type"] == "lesson":
                    rec, added, fn = self.lessons.edit_observations(who, bucket, name, add=texts)
                    if added:
                        replace.append(rec)
                        extras.append(fn)
                        cites += [(cited[name], rec.id)]
                        cites += [(mentioned[(name, t)], rec.id) for t in added]
                else:
                    seen = have.get(name, {})
                    added = [t for t in dict.fromkeys(texts) if t not in seen]
                    again += [(seen[t], rev) for t in dict.fromkeys(texts) if t in seen]
                    etype = rows[name]["entity_type"]
                    for t in added:
                        records.append(
                            self._observation(who, sc, name, etype, t, now, origins.get(name))
                        )
                        records[-1].metadata["addedAt"] = rev
                        cites += [
                            (cited[name], records[-1].id),
                            (mentioned[(name, t)], records[-1].id),
                        ]
                results.append(
                    AddedObservations(entityName=name, addedObservations=added, revision=rev)
                )
            return now, records, results, replace, extras, cites, again, orset.revisions(rows)

        first = plan()
        ahead = self.embed_ahead([*first[1], *first[3]])  # the slow part, before the lock
        with self.lock:
            return orset.retrying(lambda: self._add_planned(bucket, wanted, plan, ahead, warnings))

    def _add_planned(self, bucket, wanted, plan, ahead, warnings) -> AddObservationsResult:
        """add_observations' write: plan from a fresh read, write if no entity moved since."""
        now, records, results, replace, extras, cites, again, planned = plan()

        def extra(conn) -> None:
            orset.bump(conn, bucket, wanted, ts(now))
            orset.reassert(conn, again)
            for fn in extras:
                fn(conn)
            for pending, rec_id in cites:
                if pending:
                    pending.write(conn, [rec_id])

        def check(conn) -> None:  # another process may have deleted an entity meanwhile
            gone = self._missing(bucket, list(wanted), conn)
            if gone:
                raise NotFound(
                    f"add_observations: entity {gone[0]!r} was just deleted", missing=gone
                )
            orset.unmoved(bucket, planned)(conn)  # or changed it: plan again

        done = self.engine.apply(
            add=records,
            replace=replace,
            check=check,
            extra=extra,
            vectors=self.ahead_for(ahead, [*records, *replace]),
        )
        return AddObservationsResult(results=results, warnings=warnings + done.warnings)

    def delete_observations(
        self, who: Caller, deletions: Sequence[ObservationDeletion | dict], scope: str | None = None
    ) -> DeleteResult:
        bucket = who.bucket(parse_scope(scope).value)
        items = validated(ObservationDeletion, deletions, "deletion groups")

        def plan():
            rows = self.entity_rows(bucket, [d.entityName for d in items])
            plain = [n for n, r in rows.items() if r["entity_type"] != "lesson"]
            obs = orset.observations(self.reader, bucket, plain)
            ids: list[str] = []
            replace, extras, deleted, kept, touched = [], [], 0, [], []
            for d in items:
                row = rows.get(d.entityName)
                if row is None:
                    continue
                drop = set(d.observations)
                if row["entity_type"] == "lesson":
                    rec, removed, fn = self.lessons.edit_observations(
                        who, bucket, d.entityName, remove=drop
                    )
                    if removed:
                        replace.append(rec)
                        extras.append(fn)
                        deleted += len(removed)
                    continue
                gone, unseen = orset.split(
                    obs.get(d.entityName, []), drop, d.expectedRevision, set(ids)
                )
                ids += gone
                deleted += len(gone)
                kept += [ObservationDeletion(entityName=d.entityName, observations=unseen)] * bool(
                    unseen
                )
                touched += [d.entityName] * bool(gone)
            return ids, replace, extras, deleted, kept, touched, orset.revisions(rows)

        ahead = self.embed_ahead(plan()[1])  # edited lessons are embedded again: before the lock

        def write() -> DeleteResult:
            ids, replace, extras, deleted, kept, touched, planned = plan()  # from a fresh read
            if ids or replace:
                now = ts(self.clock())

                def extra(conn) -> None:
                    orset.bump(conn, bucket, touched, now)
                    for fn in extras:
                        fn(conn)

                self.engine.apply(
                    replace=replace,
                    delete=ids,
                    check=orset.unmoved(bucket, planned),
                    extra=extra,
                    vectors=self.ahead_for(ahead, replace),
                )
            message = f"deleted {deleted} observations"
            if kept:
                n = sum(len(k.observations) for k in kept)
                message += f"; kept {n} added since your expectedRevision (not seen by you)"
            return DeleteResult(deleted=deleted, message=message, kept=kept)

        with self.lock:
            return orset.retrying(write)

    # ------------------------------------------------------------------ reads
    def _entities(self, bucket: str, rows: Sequence) -> list[Entity]:
        obs = self.observations_of(bucket, rows)
        return [
            Entity(
                name=r["name"],
                entityType=r["entity_type"],
                observations=obs.get(r["name"], []),
                revision=int(r["revision"] or 0),
            )  # fmt: skip
            for r in rows
        ]

    def relations_among(
        self, bucket: str, names: Sequence[str], *, both: bool = True
    ) -> list[Relation]:
        """Relations whose source (and, with ``both``, target) is in ``names``."""
        names = list(dict.fromkeys(names))
        keep = set(names)
        out: list[Relation] = []
        for part in chunks(names):
            rows = self.reader.execute(
                "SELECT from_name, to_name, relation_type FROM relations WHERE bucket=? "
                f"AND from_name IN ({placeholders(len(part))}) ORDER BY id",
                [bucket, *part],
            ).fetchall()
            out += [
                Relation.model_validate({"from": f, "to": t, "relationType": rt})
                for f, t, rt in rows
                if not both or t in keep
            ]
        return out

    def read_graph(
        self,
        who: Caller,
        scope: str | None = None,
        cursor: str | None = None,
        limit: int = DEFAULT_PAGE,
    ) -> GraphPage:
        bucket = who.bucket(parse_scope(scope).value)
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInput(f"limit must be between 1 and {MAX_PAGE}, got {limit}")
        after = 0
        if cursor:
            try:
                after = int(cursor)
            except ValueError:
                raise InvalidInput(
                    f"invalid cursor {cursor!r}: pass the nextCursor of the previous page"
                ) from None
        rows = self.reader.execute(
            "SELECT * FROM entities WHERE bucket=? AND id>? ORDER BY id LIMIT ?",
            (bucket, after, limit + 1),
        ).fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        n_ent, n_rel = self.reader.execute(
            "SELECT (SELECT count(*) FROM entities WHERE bucket=?), "
            "(SELECT count(*) FROM relations WHERE bucket=?)",
            (bucket, bucket),
        ).fetchone()
        return GraphPage(
            entities=self._entities(bucket, rows),
            relations=self.relations_among(bucket, [r["name"] for r in rows], both=False),
            nextCursor=str(rows[-1]["id"]) if more else None,
            totalEntities=n_ent,
            totalRelations=n_rel,
        )

    def open_nodes(self, who: Caller, names: Sequence[str], scope: str | None = None) -> Graph:
        bucket = who.bucket(parse_scope(scope).value)
        check_batch(names, "names")
        found = self.entity_rows(bucket, names)
        rows = [found[n] for n in dict.fromkeys(names) if n in found]
        return Graph(
            entities=self._entities(bucket, rows),
            relations=self.relations_among(bucket, list(found)),
        )

    def all_entities(self, bucket: str) -> list[Entity]:
        """Every entity of a graph with its observations (export)."""
        rows = self.reader.execute(
            "SELECT * FROM entities WHERE bucket=? ORDER BY id", (bucket,)
        ).fetchall()
        return self._entities(bucket, rows)

    def all_relations(self, bucket: str) -> list[Relation]:
        rows = self.reader.execute(
            "SELECT from_name, to_name, relation_type FROM relations WHERE bucket=? ORDER BY id",
            (bucket,),
        ).fetchall()
        return [
            Relation.model_validate({"from": f, "to": t, "relationType": rt}) for f, t, rt in rows
        ]
