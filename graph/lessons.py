"""Lessons: error patterns with their fix, verification steps and a success rate that ranks them.

Storage, in one transaction: an entity row (type ``lesson``, so lessons are graph nodes that
relations can point at), a ``lessons`` row (every structured field), and one embedded
``lesson`` record: content = the lesson's text (see :func:`lesson_text`), context = its
application frames (``at Class.method, …``: what the embedder should see of a long trace),
and its FTS5 ``terms`` column also gets the stack-trace fingerprints of ``graph.traces``
(exception classes, frame+line, application frames, assertion differences).

Ranking (``find_similar_errors``, ``get_lesson_recommendations``): :mod:`.lesson_ranking`.

``update_lesson_success`` keeps the rate as the running mean of the outcomes:
``rate' = (rate × frequency + success) / (frequency + 1)``, ``frequency' = frequency + 1``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from retrieval.errors import Conflict, InvalidInput, NotFound
from retrieval.ranking.hybrid import FusionConfig, HybridRanker
from retrieval.records import Kind, Record, Scope

from . import traces
from .common import Caller, check_batch, parse_scope, parse_ts, ts
from .entities import GraphService
from .lesson_models import (
    CreateLessonResult,
    Lesson,
    LessonInput,
    LessonSuccessResult,
    lesson_details,
    lesson_extra,
)
from .lesson_ranking import (
    LESSON_FUSION,
    LESSON_MAX_TERMS,
    LessonLexical,
    LessonRanking,
    error_text,
)


def lesson_text(lesson: LessonInput) -> str:
    """The searchable text of a lesson: error, where, trace, notes, fix."""
    ep = lesson.errorPattern
    parts = [error_text(ep.type, ep.message, ep.context, ep.stackTrace)]
    parts += [f"- {o}" for o in lesson.observations]
    steps = [s.command for s in lesson.verificationSteps]
    if steps:
        parts.append("Verify: " + "; ".join(steps))
    return "\n".join(p for p in parts if p)


def unreviewed(lesson: LessonInput) -> None:
    """A ``learned`` block written as a new lesson (``create_lesson``, an import) starts
    unreviewed, whatever it says: only a person's decision in the review inbox
    (``graph.learned``) accepts a learned lesson."""
    block = (lesson.model_extra or {}).get("learned")
    if isinstance(block, dict) and block.get("review") != "pending":
        kept = {k: v for k, v in block.items() if k not in ("reviewedBy", "reviewedAt")}
        lesson.model_extra["learned"] = {**kept, "review": "pending"}


def lesson_terms(lesson: LessonInput) -> str:
    ep = lesson.errorPattern
    return " ".join(traces.fingerprint_terms(f"{ep.type}: {ep.message}", ep.stackTrace or ""))


class LessonService(LessonRanking):
    def __init__(
        self,
        graph: GraphService,
        *,
        fusion: FusionConfig | None = None,
        max_terms: int = LESSON_MAX_TERMS,
    ) -> None:
        self.graph = graph
        graph.lessons = self
        self.lexical = LessonLexical(graph.store, max_terms=max_terms)
        self.ranker = HybridRanker(graph.store, self.lexical, None, None, fusion or LESSON_FUSION)
        # get_lesson_recommendations reads plain language: the engine's own fusion settings
        self.context_ranker = HybridRanker(
            graph.store, self.lexical, None, None, graph.engine.ranker.config
        )

    @property
    def engine(self):
        return self.graph.engine

    # ------------------------------------------------------------------ conversion
    @staticmethod
    def from_row(row, scope: str = "team") -> Lesson:
        extra = json.loads(row["extra"])
        meta = {
            "severity": row["severity"], "environment": json.loads(row["environment"]),
            "frequency": row["frequency"], "successRate": row["success_rate"],
            "createdAt": parse_ts(row["created_at"]), "updatedAt": parse_ts(row["updated_at"]),
            **extra.get("metadata", {}),
        }  # fmt: skip
        ep = {
            "type": row["error_type"], "message": row["message"], "context": row["context"],
            **({"stackTrace": row["stack_trace"]} if row["stack_trace"] is not None else {}),
            **extra.get("errorPattern", {}),
        }  # fmt: skip
        return Lesson.model_validate(
            {
                **extra.get("lesson", {}),
                "name": row["name"],
                "entityType": "lesson",
                "observations": json.loads(row["observations"]),
                "errorPattern": ep,
                "metadata": meta,
                "verificationSteps": json.loads(row["verification_steps"]),
                "scope": scope,
            }  # fmt: skip
        )

    def _record(
        self, who: Caller, scope: Scope, lesson: LessonInput, rec_id: str | None, now
    ) -> Record:
        kw = {"id": rec_id} if rec_id else {}
        ep = lesson.errorPattern
        return Record(
            **kw, kind=Kind.lesson, project_id=who.project_id, agent_id=who.agent_id, scope=scope,
            category="lesson", content=lesson_text(lesson),
            context=traces.summarize_trace(ep.stackTrace or ""),
            entity_name=lesson.name, created_at=lesson.metadata.createdAt or now, updated_at=now,
            metadata={
                "successRate": lesson.metadata.successRate, "frequency": lesson.metadata.frequency,
                "severity": lesson.metadata.severity, "errorType": ep.type,
                **({"details": details} if (details := lesson_details(lesson)) else {}),
            },
        )  # fmt: skip

    @staticmethod
    def _add_terms(conn, rec_id: str, terms: str) -> None:
        if terms:
            conn.execute(
                "UPDATE records_fts SET terms = terms || ' ' || ? "
                "WHERE rowid = (SELECT rowid FROM records WHERE id = ?)",
                (terms, rec_id),
            )

    def _validate(self, lesson: LessonInput | dict) -> LessonInput:
        from pydantic import ValidationError

        if isinstance(lesson, LessonInput):
            return lesson
        try:
            return LessonInput.model_validate(lesson)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:10]
            )
            name = lesson.get("name") if isinstance(lesson, dict) else None
            raise InvalidInput(f"invalid lesson {name!r}: {problems}", name=name) from None

    def _clean_rest(self, lesson: LessonInput, warnings: list[str]) -> None:
        """The lesson's name, error type, environment and every extra key (of the lesson, its
        error pattern, metadata and verification steps) through the write policy, as its texts."""
        g = self.graph
        lesson.name = g.clean_name(lesson.name, "lesson name", warnings)
        what = f"lesson {lesson.name!r}"
        ep, md = lesson.errorPattern, lesson.metadata
        ep.type = g.clean_name(ep.type, f"{what} errorPattern.type", warnings)
        md.environment = g.clean_tree(md.environment, f"{what} environment", warnings)
        for model in (lesson, ep, md, *lesson.verificationSteps):
            extra = model.model_extra
            if extra:
                cleaned = g.clean_tree(dict(extra), f"{what} {type(model).__name__}", warnings)
                extra.clear()
                extra.update(cleaned)

    # ------------------------------------------------------------------ writes
    def create_lesson(
        self,
        who: Caller,
        lesson: LessonInput | dict,
        scope: str | None = None,
        *,
        keep_timestamps: bool = False,
        citations: Sequence | None = None,
    ) -> CreateLessonResult:
        """``citations``: the code the fix relies on ([{path, startLine?, endLine?}]); the
        files its observations and error context mention are cited too."""
        return self.create_lessons(
            who, [lesson], scope, keep_timestamps=keep_timestamps, citations=[citations]
        )[0]

    def create_lessons(
        self, who: Caller, lessons: Sequence[LessonInput | dict], scope: str | None = None,
        *, keep_timestamps: bool = False, citations: Sequence[Sequence | None] | None = None,
        also: Callable[[Any], None] | None = None,
    ) -> list[CreateLessonResult]:  # fmt: skip
        """Create several lessons in one transaction (all or nothing); ``citations[i]`` are
        lesson i's explicit citations; ``also(conn)`` runs last in the same transaction (it may
        raise to abort it)."""
        sc = parse_scope(scope)
        bucket = who.bucket(sc.value)
        check_batch(lessons, "lessons")
        g = self.graph
        now = self.graph.clock()
        items, results, names = [], [], set()
        for i, raw in enumerate(lessons):
            lesson = self._validate(raw)
            unreviewed(lesson)
            warnings: list[str] = []
            ep = lesson.errorPattern
            ep.message = g.clean(
                ep.message, f"lesson {lesson.name!r} errorPattern.message", warnings
            )
            if ep.stackTrace:
                ep.stackTrace = g.clean(
                    ep.stackTrace, f"lesson {lesson.name!r} stackTrace", warnings
                )
            if ep.context.strip():
                ep.context = g.clean(ep.context, f"lesson {lesson.name!r} context", warnings)
            lesson.observations = [
                g.clean(o, f"lesson {lesson.name!r} observation", warnings)
                for o in lesson.observations
            ]
            for step in lesson.verificationSteps:  # kept in the lessons table as given
                what = f"lesson {lesson.name!r} verification step"
                step.command, step.expectedOutput = (
                    g.clean(t, what, warnings) if t.strip() else t
                    for t in (step.command, step.expectedOutput)
                )
                step.successIndicators = [
                    g.clean(i, what, warnings) if i.strip() else i for i in step.successIndicators
                ]
            self._clean_rest(lesson, warnings)
            if lesson.name in names:
                raise Conflict(f"lesson {lesson.name!r} appears twice", name=lesson.name)
            names.add(lesson.name)
            if not keep_timestamps or lesson.metadata.createdAt is None:
                lesson.metadata.createdAt = now
            if not keep_timestamps or lesson.metadata.updatedAt is None:
                lesson.metadata.updatedAt = now
            rec = self._record(who, sc, lesson, None, now)
            cites = g.citations(
                who, citations[i] if citations and i < len(citations) else None,
                [*lesson.observations, ep.context],
            )  # fmt: skip
            items.append((lesson, rec, cites))
            results.append(
                CreateLessonResult(
                    lesson=Lesson(**lesson.model_dump(), scope=sc.value),
                    warnings=warnings,
                    citations=cites.states() if cites else [],
                )  # fmt: skip
            )

        def check(conn) -> None:
            taken = g.entity_rows(bucket, list(names), conn)
            if taken:
                name, row = next(iter(taken.items()))
                what = (
                    "lesson" if row["entity_type"] == "lesson" else f"{row['entity_type']} entity"
                )
                raise Conflict(
                    f"a {what} named {name!r} already exists in the {sc.value} graph; "
                    "choose another name (update_lesson_success records outcomes)",
                    name=name,
                )

        def extra(conn) -> None:
            for lesson, rec, cites in items:
                g.insert_entity(conn, bucket, who, lesson.name, "lesson", now)
                self._insert_row(conn, bucket, who, lesson, rec.id)
                self._add_terms(conn, rec.id, lesson_terms(lesson))
                if cites:
                    cites.write(conn, [rec.id])
            if also is not None:
                also(conn)

        records = [r for _, r, _ in items]
        vectors = self.engine.embed(records)  # the slow part, before the lock
        with g.lock:
            done = self.engine.apply(add=records, check=check, extra=extra, vectors=vectors)
        for result in results:
            result.warnings += done.warnings
        return results

    @staticmethod
    def _insert_row(conn, bucket: str, who: Caller, lesson: LessonInput, rec_id: str) -> None:
        ep, md = lesson.errorPattern, lesson.metadata
        extra = lesson_extra(lesson)
        conn.execute(
            "INSERT INTO lessons(bucket, name, error_type, message, context, stack_trace, severity, "
            "environment, frequency, success_rate, observations, verification_steps, extra, "
            "record_id, created_by, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                bucket, lesson.name, ep.type, ep.message, ep.context, ep.stackTrace, md.severity,
                json.dumps(md.environment, ensure_ascii=False), md.frequency, md.successRate,
                json.dumps(lesson.observations, ensure_ascii=False),
                json.dumps([s.model_dump() for s in lesson.verificationSteps], ensure_ascii=False),
                json.dumps(extra, ensure_ascii=False, default=str), rec_id, who.agent_id,
                ts(md.createdAt), ts(md.updatedAt),
            ),
        )  # fmt: skip

    def _row(self, bucket: str, name: str):
        row = self.graph.lesson_rows(bucket, [name]).get(name)
        if row is None:
            raise NotFound(
                f"no lesson named {name!r} in the {bucket.split('/', 1)[0]} graph", name=name
            )
        return row

    def _rewrite(
        self, who: Caller, bucket: str, row, lesson: Lesson, now: datetime, *, same_text: bool
    ):
        """(replacement record, extra(conn)) that store ``lesson`` over ``row``."""
        rec = self._record(who, Scope(lesson.scope), lesson, row["record_id"], now)
        old = self.engine.store.get([row["record_id"]]).get(row["record_id"])
        if old is not None:  # keep the creator and creation time of the record
            rec = rec.model_copy(update={"agent_id": old.agent_id, "project_id": old.project_id,
                                         "created_at": old.created_at, "revision": old.revision + 1})  # fmt: skip
        vectors = None
        if same_text and self.engine.embedder is not None:  # metadata only: no re-embedding
            vectors = self.engine.store.embeddings([rec.id], self.engine.embedder.model_id) or None
        md = lesson.metadata

        def extra(conn) -> None:
            conn.execute(
                "UPDATE lessons SET frequency=?, success_rate=?, observations=?, extra=?, "
                "updated_at=? WHERE bucket=? AND name=?",
                (md.frequency, md.successRate, json.dumps(lesson.observations, ensure_ascii=False),
                 json.dumps(lesson_extra(lesson), ensure_ascii=False, default=str), ts(now),
                 bucket, lesson.name),
            )  # fmt: skip
            self.graph.touch(conn, bucket, [lesson.name], now)
            self._add_terms(conn, rec.id, lesson_terms(lesson))

        return rec, extra, vectors

    def edit_observations(
        self,
        who: Caller,
        bucket: str,
        name: str,
        add: Iterable[str] = (),
        remove: Iterable[str] = (),
    ):
        """(new record, changed observations, extra) for add/delete_observations on a lesson."""
        row = self._row(bucket, name)
        lesson = self.from_row(row, bucket.split("/", 1)[0])
        drop = set(remove)
        kept = [o for o in lesson.observations if o not in drop]
        removed = [o for o in lesson.observations if o in drop]
        added = [o for o in dict.fromkeys(add) if o not in kept]
        lesson.observations = kept + added
        now = self.graph.clock()
        lesson.metadata.updatedAt = now
        rec, extra, _ = self._rewrite(who, bucket, row, lesson, now, same_text=False)
        return rec, (added or removed), extra

    def update_lesson_success(
        self, who: Caller, name: str, success: bool, scope: str | None = None
    ) -> LessonSuccessResult:
        sc = parse_scope(scope)
        bucket = who.bucket(sc.value)

        def plan():
            row = self._row(bucket, name)
            lesson = self.from_row(row, sc.value)
            md = lesson.metadata
            md.successRate = (md.successRate * md.frequency + (1.0 if success else 0.0)) / (
                md.frequency + 1
            )
            md.frequency += 1
            now = self.graph.clock()
            md.updatedAt = now
            rec, extra, vectors = self._rewrite(who, bucket, row, lesson, now, same_text=True)
            return md, now, rec, extra, vectors

        first = plan()  # same text: stored vectors, embedded (before the lock) only if missing
        ahead = {} if first[4] else self.graph.embed_ahead([first[2]])
        with self.graph.lock:
            md, now, rec, extra, vectors = plan()  # again: the counters must be current
            vectors = vectors or self.graph.ahead_for(ahead, [rec])
            self.engine.apply(replace=[rec], extra=extra, vectors=vectors)
        return LessonSuccessResult(
            name=name, successRate=round(md.successRate, 6), frequency=md.frequency, updatedAt=now
        )

    # ------------------------------------------------------------------ reads
    def get(self, who: Caller, name: str, scope: str | None = None) -> Lesson:
        sc = parse_scope(scope)
        return self.from_row(self._row(who.bucket(sc.value), name), sc.value)

    def all_lessons(self, bucket: str) -> list[Lesson]:
        rows = self.graph.reader.execute(
            "SELECT * FROM lessons WHERE bucket=? ORDER BY id", (bucket,)
        )
        return [self.from_row(r, bucket.split("/", 1)[0]) for r in rows.fetchall()]
