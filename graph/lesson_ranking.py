"""How lessons are ranked (``find_similar_errors``, ``get_lesson_recommendations``):

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

What is returned: a lesson whose record the write policy flagged (``metadata.suspicious``: an
instruction to the model in any of its fields) is left out, and counted in ``withheld``, unless
``include_suspicious``; then it carries ``suspicious`` (the reason). Every lesson says how often
its fix worked as counts, and a learned lesson shows its diff hunks only once it has earned
them (:mod:`graph.lesson_trust`).

:class:`LessonRanking` is the part of :class:`~graph.lessons.LessonService` that ranks; it uses
the service's ``graph``, ``engine``, rankers and ``from_row``.
"""

from __future__ import annotations

import logging
from functools import lru_cache

from retrieval.errors import InvalidInput
from retrieval.fulltext.analyzer import query_terms
from retrieval.fulltext.lexical import LexicalIndex
from retrieval.ranking.hybrid import FusionConfig
from retrieval.records import Kind, RecordFilter

from . import lesson_trust, traces
from .common import Caller, parse_scope
from .lesson_models import ErrorQuery, LessonMatch, LessonSearchResult
from .withheld import record_flags, withheld_note

log = logging.getLogger(__name__)
SUCCESS_WEIGHT = 0.3  # β in score = relevance × (1 − β + β × successRate)
LESSON_MAX_TERMS = 512  # a stack trace easily has a few hundred distinct tokens
# find_similar_errors: stack traces are read far better by bm25 + fingerprints than by a
# sentence embedder (benchmarks/relevance.py errors), so the vector side weighs 0.1, not 0.5.
# A trace is asked whole with its fingerprints (LessonLexical.terms), never as a long prompt's
# views (retrieval/ranking/longquery.py): measured on Defects4J, recall@10 0.9006 whole, 0.8739 with
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


@lru_cache(maxsize=4096)
def _lesson_profile(trace: str, context: str) -> traces.TraceProfile:
    return traces.trace_profile(trace, context)


@lru_cache(maxsize=4096)
def lesson_frames(error_type: str, message: str, stack_trace: str) -> list[str]:
    """A lesson's application frames and exception types (parsed once per lesson text: a
    lesson learned from a session holds its whole trace)."""
    return traces.app_frames(stack_trace, 50) + traces.exception_types(
        f"{error_type}: {message}\n{stack_trace}"
    )


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


class LessonRanking:
    """Ranking of a lesson service's lessons."""

    def _rank(
        self,
        who: Caller,
        text: str,
        scope: str | None,
        limit: int,
        label: str,
        mode: str = "hybrid",
        profile: traces.TraceProfile | None = None,
        include_suspicious: bool = False,
    ) -> LessonSearchResult:
        """``profile``: the query's trace profile; when given (find_similar_errors, hybrid
        mode), each candidate's fused relevance is blended with its trace affinity and, when
        the query's context names a test class, with whether the lesson shares it. Flagged
        lessons are left out (counted) unless ``include_suspicious`` (module docstring)."""
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
            score = relevance * success_factor(float(row["success_rate"]))
            states = cited.get(s.record_id, [])
            if states:  # the code it cites changed or is gone: verify before trusting it
                score *= cite.factor(states)
            out.append((round(score, 4), round(relevance, 4), row["name"], row, states))
        out.sort(key=lambda m: (-m[0], -m[1], m[2]))
        flags = record_flags(self.graph.reader, [row["record_id"] for *_, row, _ in out])
        matches, withheld = [], 0
        for score, relevance, _name, row, states in out:  # only those returned are read
            if len(matches) >= limit:
                break
            reason = flags.get(row["record_id"])
            if reason and not include_suspicious:
                withheld += 1
                continue
            try:
                match = self._match(row, sc.value, relevance, score, q_frames, states, reason)
            except (ValueError, TypeError, KeyError) as exc:  # one bad row never fails a query
                log.warning("lesson %r left out: %s", row["name"], type(exc).__name__)
                continue
            matches.append(match)
        mode = scored[0].explanation.mode
        return LessonSearchResult(
            lessons=matches,
            ranking=f"{label} ({mode}); score = relevance × (0.7 + 0.3 × successRate)",
            withheld=withheld,
            note=withheld_note(withheld, "lesson"),
        )

    def _match(self, row, scope: str, relevance: float, score: float, q_frames: set,
               states: list, reason: str | None) -> LessonMatch:  # fmt: skip
        """One returned lesson: its fields, its outcomes as counts, a learned lesson's diff
        only once earned (``graph.lesson_trust``), its flag."""
        lesson = self.from_row(row, scope)
        fields = lesson.model_dump()
        shown = lesson_trust.shown_block(lesson)
        if shown is not None:
            fields["learned"] = shown
        own = lesson_frames(row["error_type"], row["message"], row["stack_trace"] or "")
        md = lesson.metadata
        return LessonMatch(
            **fields, relevance=relevance, score=score,
            matchedFrames=[x for x in dict.fromkeys(own) if x in q_frames][:10],
            citations=states, uses=lesson_trust.uses(md.successRate, md.frequency),
            trust=lesson_trust.note(lesson), suspicious=reason,
        )  # fmt: skip

    def find_similar_errors(
        self, who: Caller, pattern: ErrorQuery | dict, scope: str | None = None,
        limit: int = DEFAULT_LIMIT, *, mode: str = "hybrid", include_suspicious: bool = False,
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
        return self._rank(who, text, scope, limit, ERRORS, mode, profile, include_suspicious)

    def get_lesson_recommendations(
        self, who: Caller, context: str, scope: str | None = None, limit: int = DEFAULT_LIMIT,
        *, include_suspicious: bool = False,
    ) -> LessonSearchResult:  # fmt: skip
        if not isinstance(context, str) or not context.strip():
            raise InvalidInput("context must be a non-empty string")
        return self._rank(who, context, scope, limit, "relevance to the context",
                          include_suspicious=include_suspicious)  # fmt: skip
