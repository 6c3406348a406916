"""Lessons: error patterns with their fix, verification steps and a success rate that ranks them.

Storage, in one transaction: an entity row (type ``lesson``, so lessons are graph nodes that
relations can point at), a ``lessons`` row (every structured field), and one embedded
``lesson`` record: content = the lesson's text (see :func:`lesson_text`), context = its
application frames (``at Class.method, …``: what the embedder should see of a long trace),
and its FTS5 ``terms`` column also gets the stack-trace fingerprints of ``graph.traces``
(exception classes, frame+line, application frames, assertion differences).

Ranking (``find_similar_errors``, ``get_lesson_recommendations``):

1. hybrid retrieval over the lesson records of the graph: bm25 over the error type, message,
   context, stack trace, observations and verification commands, with the query's own
   fingerprints added to the query (assertion-difference words count twice; the term cap is
   raised to ``LESSON_MAX_TERMS``: a trace has hundreds of tokens), fused with the cosine
   similarity of the embeddings into a relevance in [0, 1] — by :data:`LESSON_FUSION`
   (vector weight 0.1) for errors, by the engine's fusion settings for a plain-language
   context;
2. ``find_similar_errors`` only: trace affinity. The candidates' fused relevance is blended
   with how close their code is to the query's (``graph.traces.trace_profile``): the package
   affinity (longest common package prefix, 0–1, each segment weighted by how rare its prefix
   is among the candidates, ``traces.prefix_idf``: sharing ``org.apache.commons`` with every
   other candidate counts ~0, sharing ``org.apache.commons.codec`` much) and the Jaccard
   overlap of the code units (classes / modules of the application frames and of the test
   named in ``context``, a test mapped to the unit it tests),
   ``(fused + PACKAGE_WEIGHT × pkg + UNIT_WEIGHT × units) /
   (1 + PACKAGE_WEIGHT + UNIT_WEIGHT)``, still in [0, 1] (``FRAMELESS_PACKAGE_WEIGHT`` instead
   of ``PACKAGE_WEIGHT`` when the query's trace has no application frame: then the failing
   test in its context is all that says where it failed). When the query's ``context`` names a
   qualified class (the failing test, ``pkg.FooTest::testBar``), a lesson recorded for that
   same class gets ``TEST_CLASS_WEIGHT / n`` more (``n``: how many candidates share it, so a
   test class with one lesson says much and one with twenty says little; the weight is then
   added to the divisor too). When the query's test is named after an issue number
   (``testIssue772``, ``test_bug_1234``), a lesson whose test names the same number gains
   ``ISSUE_WEIGHT`` (added to the divisor too): two tests written for one issue are about
   one bug, whatever their classes;
3. success rate: ``score = relevance × (1 − β + β × successRate)`` with β = 0.3, so a lesson
   whose fix never worked keeps 70 % of its relevance and a fix that always works keeps all
   of it. Between two equally relevant lessons the one that works more often ranks first; a
   much more relevant lesson is not buried by a popular one.

``update_lesson_success`` keeps the rate as the running mean of the outcomes:
``rate' = (rate × frequency + success) / (frequency + 1)``, ``frequency' = frequency + 1``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import lru_cache

from retrieval.analyzer import query_terms
from retrieval.errors import Conflict, InvalidInput, NotFound
from retrieval.hybrid import FusionConfig, HybridRanker
from retrieval.lexical import LexicalIndex
from retrieval.records import Kind, Record, RecordFilter, Scope

from . import traces
from .common import Caller, check_batch, parse_scope, parse_ts, ts
from .entities import GraphService
from .lesson_models import (
    CreateLessonResult,
    ErrorQuery,
    Lesson,
    LessonInput,
    LessonMatch,
    LessonSearchResult,
    LessonSuccessResult,
)

SUCCESS_WEIGHT = 0.3  # β in score = relevance × (1 − β + β × successRate)
LESSON_MAX_TERMS = 512  # a stack trace easily has a few hundred distinct tokens
# find_similar_errors: stack traces are read far better by bm25 + fingerprints than by a
# sentence embedder (benchmarks/relevance.py errors), so the vector side weighs 0.1, not 0.5.
# A trace is asked whole with its fingerprints (LessonLexical.terms), never as a long prompt's
# views (retrieval/longquery.py): measured on Defects4J, recall@10 0.9006 whole, 0.8739 with
# the long-query views.
LESSON_FUSION = FusionConfig(
    method="convex", alpha=0.1, norm="minmax", depth=100, long_queries=False
)
DEFAULT_LIMIT = 10
ERRORS = "error similarity"
# find_similar_errors reranks the hybrid candidates by trace affinity (graph.traces):
#   relevance = (fused + PACKAGE_WEIGHT × package affinity + UNIT_WEIGHT × unit Jaccard)
#               / (1 + PACKAGE_WEIGHT + UNIT_WEIGHT)
# measured on Defects4J same-bug (docs/benchmarks.md "Errors (Defects4J)"); the package
# affinity's segments weigh by their prefix's IDF among the candidates (0.2 unweighted ->
# 0.3 weighted: recall@10 0.8943 -> 0.8968).
PACKAGE_WEIGHT = 0.3
UNIT_WEIGHT = 0.1
# A query trace without any application frame (runner frames only, e.g. JUnit's "Expected
# exception: …", or no frame at all) matches lessons by runner frames and message words, which
# say nothing about where it failed; its only location is the failing test in its context, so
# its package affinity weighs FRAMELESS_PACKAGE_WEIGHT instead (Defects4J recall@10
# 0.8994 -> 0.9006, recall@5 / nDCG@10 / MRR@10 up too; >= 0.9006 for 0.45-1.5).
FRAMELESS_PACKAGE_WEIGHT = 0.6
# A query whose context names its failing test class: lessons of the same class gain
# TEST_CLASS_WEIGHT / (candidates of that class) (Defects4J with the test as context:
# recall@10 0.8904 -> 0.8930, flat for 0.05-0.5).
TEST_CLASS_WEIGHT = 0.1
# A query whose failing test is named after an issue number (``testIssue772``): lessons whose
# test names the same number gain ISSUE_WEIGHT (Defects4J recall@10 0.8968 -> 0.8981, flat
# for 0.02-0.2).
ISSUE_WEIGHT = 0.1
# ... and lessons whose test names share its test's rarer words (class and method, camelCase
# parts, weighed by their IDF among the candidates: traces.test_words, weighted_overlap) gain
# TEST_WORDS_WEIGHT × the shared share (recall@10 0.8981 -> 0.8994, flat for 0.02-0.1).
TEST_WORDS_WEIGHT = 0.05
MAX_LIMIT = 50


class LessonLexical(LexicalIndex):
    """bm25 over lesson records with the query's stack-trace fingerprints added."""

    def terms(self, query: str, conn=None) -> list[str]:  # noqa: ARG002 - same signature
        """The query's words (up to ``max_terms``) + its fingerprint tokens, the assertion
        differences counted DIFF_WEIGHT times. (Every ranking path of LexicalIndex, the FTS5
        MATCH, the in-memory postings and score_ids, reads its terms from here.)"""
        prints = traces.fingerprint_terms(query)
        extra = [t for t in prints if t.startswith(traces.DIFF_PREFIXES)]
        extra *= traces.DIFF_WEIGHT - 1
        return query_terms(query, self.max_terms) + prints + extra


def error_text(type_: str, message: str, context: str, stack_trace: str | None) -> str:
    """An error as one text, the same way for a lesson and for a query (so they look alike)."""
    head = f"{type_}: {message}" if type_ and message else (type_ or message or "")
    parts = [
        head.strip(),
        f"Context: {context}" if context and context.strip() else "",
        stack_trace or "",
    ]
    return "\n".join(p for p in parts if p)


def lesson_text(lesson: LessonInput) -> str:
    """The searchable text of a lesson: error, where, trace, notes, fix."""
    ep = lesson.errorPattern
    parts = [error_text(ep.type, ep.message, ep.context, ep.stackTrace)]
    parts += [f"- {o}" for o in lesson.observations]
    steps = [s.command for s in lesson.verificationSteps]
    if steps:
        parts.append("Verify: " + "; ".join(steps))
    return "\n".join(p for p in parts if p)


def lesson_terms(lesson: LessonInput) -> str:
    ep = lesson.errorPattern
    return " ".join(traces.fingerprint_terms(f"{ep.type}: {ep.message}", ep.stackTrace or ""))


@lru_cache(maxsize=4096)
def _lesson_profile(trace: str, context: str) -> traces.TraceProfile:
    return traces.trace_profile(trace, context)


def row_profile(row) -> traces.TraceProfile:
    return _lesson_profile(f"{row['message']}\n{row['stack_trace'] or ''}", row["context"] or "")


def trace_affinity(query: traces.TraceProfile, row, weight=None) -> tuple[float, float]:
    """(package affinity, code-unit Jaccard) of a query and a lesson row (see graph.traces);
    ``weight``: the package prefixes' weights (``traces.prefix_idf`` over the candidates)."""
    own = row_profile(row)
    return (
        traces.package_affinity(query.packages, own.packages, weight),
        traces.jaccard(query.units, own.units),
    )


def same_test_class(query: traces.TraceProfile, row) -> bool:
    """Whether the lesson's context names one of the classes the query's context names."""
    if not query.classes:
        return False
    return bool(query.classes & row_profile(row).classes)


def success_factor(rate: float) -> float:
    return 1.0 - SUCCESS_WEIGHT + SUCCESS_WEIGHT * rate


class LessonService:
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
    ) -> list[CreateLessonResult]:  # fmt: skip
        """Create several lessons in one transaction (all or nothing); ``citations[i]`` are
        lesson i's explicit citations."""
        sc = parse_scope(scope)
        bucket = who.bucket(sc.value)
        check_batch(lessons, "lessons")
        g = self.graph
        now = self.graph.clock()
        items, results, names = [], [], set()
        for i, raw in enumerate(lessons):
            lesson = self._validate(raw)
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
        extra = {
            "lesson": {k: v for k, v in (lesson.model_extra or {}).items() if k != "scope"},
            "errorPattern": ep.model_extra or {},
            "metadata": md.model_extra or {},
        }
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
                "UPDATE lessons SET frequency=?, success_rate=?, observations=?, updated_at=? "
                "WHERE bucket=? AND name=?",
                (md.frequency, md.successRate, json.dumps(lesson.observations, ensure_ascii=False),
                 ts(now), bucket, lesson.name),
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

    def _rank(
        self,
        who: Caller,
        text: str,
        scope: str | None,
        limit: int,
        label: str,
        mode: str = "hybrid",
        profile: traces.TraceProfile | None = None,
    ) -> LessonSearchResult:
        """``profile``: the query's trace profile; when given (find_similar_errors, hybrid
        mode), each candidate's fused relevance is blended with its trace affinity and, when
        the query's context names a test class, with whether the lesson shares it."""
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
        sc = parse_scope(scope)
        bucket = who.bucket(sc.value)
        ranker = self.ranker if label == ERRORS else self.context_ranker
        ranker.vectors, ranker.embedder = self.engine.vectors, self.engine.embedder
        f = RecordFilter(buckets=[bucket], kinds=[Kind.lesson])
        depth = max(limit, ranker.config.depth)
        scored = ranker.search(text, f, depth, mode=mode, buckets=[bucket])
        if not scored:
            return LessonSearchResult(lessons=[], ranking=label)
        by_rec = {
            r["record_id"]: r
            for r in self.graph.reader.execute(
                "SELECT * FROM lessons WHERE bucket=? AND record_id IN "
                f"({','.join('?' * len(scored))})",
                [bucket, *[s.record_id for s in scored]],
            ).fetchall()
        }
        cite = self.graph.cite
        cited = cite.states(who, list(by_rec)) if cite is not None else {}
        q_frames = set(traces.app_frames(text, 50)) | set(traces.exception_types(text))
        same_class: set[str] = set()
        idf = word_idf = None
        if profile is not None:  # package prefixes weigh by how rare they are among candidates
            idf = traces.prefix_idf(row_profile(r).packages for r in by_rec.values())
            word_idf = traces.idf(row_profile(r).test_words for r in by_rec.values())
        if profile is not None and profile.classes:
            same_class = {r for r, row in by_rec.items() if same_test_class(profile, row)}
        out = []
        for s in scored:
            row = by_rec.get(s.record_id)
            if row is None:
                continue
            lesson = self.from_row(row, sc.value)
            own = traces.app_frames(row["stack_trace"] or "", 50) + traces.exception_types(
                f"{row['error_type']}: {row['message']}\n{row['stack_trace'] or ''}"
            )
            relevance = s.score
            if profile is not None:
                pkg, unit = trace_affinity(profile, row, idf)
                pkg_weight = FRAMELESS_PACKAGE_WEIGHT if profile.frameless else PACKAGE_WEIGHT
                weight = 1.0 + pkg_weight + UNIT_WEIGHT
                relevance += pkg_weight * pkg + UNIT_WEIGHT * unit
                if profile.classes:  # the query names its test class
                    weight += TEST_CLASS_WEIGHT
                    if s.record_id in same_class:
                        relevance += TEST_CLASS_WEIGHT / len(same_class)
                if profile.issues:  # its test is named after an issue
                    weight += ISSUE_WEIGHT
                    if profile.issues & row_profile(row).issues:
                        relevance += ISSUE_WEIGHT
                if profile.test_words:  # the words of its test's name
                    weight += TEST_WORDS_WEIGHT
                    relevance += TEST_WORDS_WEIGHT * traces.weighted_overlap(
                        profile.test_words, row_profile(row).test_words, word_idf
                    )
                relevance /= weight
            score = relevance * success_factor(lesson.metadata.successRate)
            states = cited.get(s.record_id, [])
            if states:  # the code it cites changed or is gone: verify before trusting it
                score *= cite.factor(states)
            out.append(
                LessonMatch(
                    **lesson.model_dump(),
                    relevance=round(relevance, 4),
                    score=round(score, 4),
                    matchedFrames=[x for x in dict.fromkeys(own) if x in q_frames][:10],
                    citations=states,
                )  # fmt: skip
            )
        out.sort(key=lambda m: (-m.score, -m.relevance, m.name))
        mode = scored[0].explanation.mode
        return LessonSearchResult(
            lessons=out[:limit],
            ranking=f"{label} ({mode}); score = relevance × (0.7 + 0.3 × successRate)",
        )

    def find_similar_errors(
        self, who: Caller, pattern: ErrorQuery | dict, scope: str | None = None,
        limit: int = DEFAULT_LIMIT, *, mode: str = "hybrid",
    ) -> LessonSearchResult:  # fmt: skip
        """``mode`` (hybrid | lexical | vector) is for benchmarks; tools always use hybrid."""
        p = pattern if isinstance(pattern, ErrorQuery) else ErrorQuery.model_validate(pattern)
        text = error_text(p.type.strip(), p.message.strip(), p.context, p.stackTrace)
        if not text.strip():
            raise InvalidInput(
                "errorPattern needs at least one of type, message, context, stackTrace"
            )
        profile = None
        if mode == "hybrid":
            profile = traces.trace_profile(f"{p.message}\n{p.stackTrace or ''}", p.context)
        return self._rank(who, text, scope, limit, ERRORS, mode, profile)

    def get_lesson_recommendations(
        self, who: Caller, context: str, scope: str | None = None, limit: int = DEFAULT_LIMIT
    ) -> LessonSearchResult:
        if not isinstance(context, str) or not context.strip():
            raise InvalidInput("context must be a non-empty string")
        return self._rank(who, context, scope, limit, "relevance to the context")
