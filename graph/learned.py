"""Lessons learned from episodes: written through the normal lesson path, one per error
signature, and kept under review.

A learned lesson is an ordinary lesson (``create_lesson``'s fields, the write policy on every
string) with a ``learned`` block among its extra keys:

    learned: {source: "episode", review: "pending" | "accepted", signature: {type, message,
              test, digest}, session, transcript, repository: {root, branch}, failedAt,
              passedAt, failedCommand, passedCommand, fix: {explanation, files, hunks},
              occurrences, seen: [{session, at}], episodes: [ids], alternatives: [fix…]}

The signature's digest names the lesson in ``lesson_signatures`` (schema v12). Learning an
episode whose digest is already there adds an *occurrence* to that lesson instead of a second
lesson: when the episode's fix changed the same files, it is one more success of the lesson's
fix (``frequency`` + 1, the rate's running mean as ``update_lesson_success`` keeps it);
otherwise the fix is kept as an *alternative* (at most :data:`MAX_ALTERNATIVES`, each with
its own count) and the counters stay as they are. The same episode learned twice (a transcript
read again) changes nothing.

People decide (:meth:`LearnedLessons.review`, :meth:`LearnedLessons.merge`): *accept* marks
the lesson reviewed; *reject* deletes it and leaves its signatures ``rejected`` with the
reason, so the same error is not learned again; *merge* moves a lesson into another one (its
fix becomes an alternative there, its occurrences and counts are added, its signatures point
there) and deletes it; all in one transaction each.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from retrieval.errors import Conflict, InvalidInput, NotFound
from retrieval.storage.store import ts

from .common import Caller, parse_scope
from .lesson_models import Lesson, LessonInput
from .lessons import LessonService

MAX_ALTERNATIVES = 5
MAX_SEEN = 10
MAX_EPISODES = 50

Action = Literal["created", "occurrence", "alternative", "duplicate", "rejected"]


class LearnResult(BaseModel):
    name: str
    action: Action
    warnings: list[str] = Field(default_factory=list)


def learned_of(lesson: LessonInput) -> dict | None:
    extra = lesson.model_extra or {}
    block = extra.get("learned")
    return block if isinstance(block, dict) else None


def _same_fix(a: dict, b: dict) -> bool:
    return bool(a.get("files")) and set(a.get("files") or []) == set(b.get("files") or [])


class LearnedLessons:
    """Learned lessons of a lesson service (its graph's lock serialises every change)."""

    def __init__(self, lessons: LessonService) -> None:
        self.lessons = lessons
        self.graph = lessons.graph

    # ------------------------------------------------------------------ reads
    def signature(self, bucket: str, digest: str, conn=None):
        conn = conn or self.graph.reader
        return conn.execute(
            "SELECT name, status, reason FROM lesson_signatures WHERE bucket=? AND signature=?",
            (bucket, digest),
        ).fetchone()

    def pending(self, who: Caller, scope: str | None = None, limit: int = 50) -> list[Lesson]:
        """The learned lessons of a graph nobody reviewed yet, newest first."""
        sc = parse_scope(scope).value
        rows = self.graph.reader.execute(
            "SELECT * FROM lessons WHERE bucket=? AND extra LIKE '%\"learned\"%' "
            "ORDER BY id DESC", (who.bucket(sc),),
        ).fetchall()  # fmt: skip
        out = []
        for r in rows:
            lesson = self.lessons.from_row(r, sc)
            block = learned_of(lesson)
            if block and block.get("review") == "pending":
                out.append(lesson)
            if len(out) >= limit:
                break
        return out

    # ------------------------------------------------------------------ learning
    def learn(self, who: Caller, lesson: LessonInput | dict, scope: str | None = None,
              citations: Sequence | None = None) -> LearnResult:  # fmt: skip
        """Store a lesson learned from an episode, or add the episode to the lesson its
        signature names (module docstring). ``lesson.learned`` must hold ``signature.digest``
        and ``episodes`` (the episode's id). Every string of an occurrence's block passes the
        write policy before it joins the lesson (``GraphCore.clean_tree``)."""
        new = self.lessons._validate(lesson)
        block = learned_of(new)
        digest = ((block or {}).get("signature") or {}).get("digest")
        if not block or not digest:
            raise InvalidInput("a learned lesson needs learned.signature.digest")
        sc = parse_scope(scope)
        bucket = who.bucket(sc.value)
        with self.graph.lock:
            row = self.signature(bucket, digest)
            if row is not None and row["status"] == "rejected":
                return LearnResult(name=row["name"], action="rejected")
            if row is not None and self.graph.lesson_rows(bucket, [row["name"]]):
                # the block is stored as a part of another lesson (its occurrences, an
                # alternative fix): through the write policy first, as every lesson field
                warnings: list[str] = []
                block = self.graph.clean_tree(block, f"lesson {row['name']!r} learned", warnings)
                done = self._occurrence(who, bucket, row["name"], block)
                done.warnings = warnings
                return done
            name = self._free_name(bucket, new.name)
            new.name = name

            def claim(conn) -> None:
                taken = self.signature(bucket, digest, conn)
                if taken is not None and taken["name"] != name:
                    raise Conflict(f"signature {digest} was learned meanwhile", name=name)
                conn.execute(
                    "INSERT OR REPLACE INTO lesson_signatures(bucket, signature, name, status, "
                    "updated_at) VALUES (?,?,?,'active',?)",
                    (bucket, digest, name, ts(self.graph.clock())),
                )

            done = self.lessons.create_lessons(who, [new], sc.value, citations=[citations],
                                               also=claim)[0]  # fmt: skip
            return LearnResult(name=done.lesson.name, action="created", warnings=done.warnings)

    def _free_name(self, bucket: str, name: str) -> str:
        for n in range(1, 100):
            candidate = name if n == 1 else f"{name}-{n}"
            if not self.graph.entity_rows(bucket, [candidate]):
                return candidate
        raise Conflict(f"no free lesson name near {name!r}", name=name)

    def _occurrence(self, who: Caller, bucket: str, name: str, new: dict) -> LearnResult:
        svc = self.lessons
        row = svc._row(bucket, name)
        lesson = svc.from_row(row, bucket.split("/", 1)[0])
        block = dict(learned_of(lesson) or {"source": "manual", "review": "accepted"})
        episode = (new.get("episodes") or [""])[0]
        if episode and episode in (block.get("episodes") or []):
            return LearnResult(name=name, action="duplicate")
        block["episodes"] = [*(block.get("episodes") or []), episode][-MAX_EPISODES:]
        block["occurrences"] = int(block.get("occurrences") or 1) + 1
        seen = {"session": new.get("session"), "at": new.get("passedAt")}
        block["seen"] = [*(block.get("seen") or []), seen][-MAX_SEEN:]
        fix = new.get("fix") or {}
        action: Action = "occurrence"
        md = lesson.metadata
        if _same_fix(fix, block.get("fix") or {}):
            md.successRate = (md.successRate * md.frequency + 1.0) / (md.frequency + 1)
            md.frequency += 1
        else:
            action = "alternative"
            alts = list(block.get("alternatives") or [])
            known = next((a for a in alts if _same_fix(a, fix)), None)
            if known is not None:
                known["count"] = int(known.get("count") or 1) + 1
            else:
                alts.append({**fix, "session": new.get("session"), "at": new.get("passedAt"),
                             "count": 1})  # fmt: skip
            block["alternatives"] = alts[-MAX_ALTERNATIVES:]
        self._store(who, bucket, row, lesson, block)
        return LearnResult(name=name, action=action)

    def _store(self, who: Caller, bucket: str, row, lesson: Lesson, block: dict,
               *, extra_steps=(), delete: Sequence[str] = (), same_text: bool = True) -> None:  # fmt: skip
        """Rewrite ``lesson`` with its ``learned`` block (one transaction, with
        ``extra_steps(conn)`` and the records ``delete``)."""
        svc = self.lessons
        lesson.__pydantic_extra__["learned"] = block
        now = self.graph.clock()
        lesson.metadata.updatedAt = now
        rec, extra, vectors = svc._rewrite(who, bucket, row, lesson, now, same_text=same_text)

        def steps(conn) -> None:
            extra(conn)
            for step in extra_steps:
                step(conn)

        svc.engine.apply(replace=[rec], delete=list(delete), extra=steps, vectors=vectors)

    # ------------------------------------------------------------------ review
    def review(self, who: Caller, name: str, decision: str, *, reason: str | None = None,
               observations: list[str] | None = None, reviewer: str | None = None,
               scope: str | None = None) -> str:  # fmt: skip
        """``accept`` (optionally with edited ``observations``: the fix as the team should
        read it) or ``reject`` (with a ``reason``) a learned lesson. Returns what was done."""
        if decision not in ("accept", "reject"):
            raise InvalidInput(f"decision must be accept or reject, got {decision!r}")
        bucket = who.bucket(parse_scope(scope).value)
        with self.graph.lock:
            row = self.lessons._row(bucket, name)
            lesson = self.lessons.from_row(row, bucket.split("/", 1)[0])
            block = learned_of(lesson)
            if block is None:
                raise InvalidInput(f"lesson {name!r} was not learned from an episode", name=name)
            stamp = {"reviewedBy": reviewer or who.agent_id, "reviewedAt": ts(self.graph.clock())}
            if decision == "reject":
                self._reject(bucket, name, row, (reason or "").strip() or "rejected")
                return "rejected"
            edited = observations is not None and observations != lesson.observations
            if edited:
                warnings: list[str] = []
                lesson.observations = [self.graph.clean(o, f"lesson {name!r} observation",
                                                        warnings) for o in observations if o.strip()]  # fmt: skip
            self._store(who, bucket, row, lesson, {**block, "review": "accepted", **stamp},
                        same_text=not edited)  # fmt: skip
            return "accepted"

    def _reject(self, bucket: str, name: str, row, reason: str) -> None:
        reason, _ = self.graph.screen(reason) if self.graph.screen else (reason, [])
        now = ts(self.graph.clock())

        def steps(conn) -> None:
            self.graph.delete_entity_rows(conn, bucket, [name])
            conn.execute(
                "UPDATE lesson_signatures SET status='rejected', reason=?, updated_at=? "
                "WHERE bucket=? AND name=?", (reason[:2000], now, bucket, name),
            )  # fmt: skip

        self.graph.engine.apply(delete=[row["record_id"]], extra=steps)

    def merge(self, who: Caller, source: str, target: str, scope: str | None = None) -> str:
        """Move the learned lesson ``source`` into ``target`` (module docstring)."""
        if source == target:
            raise InvalidInput("a lesson cannot be merged into itself", name=source)
        bucket = who.bucket(parse_scope(scope).value)
        svc = self.lessons
        with self.graph.lock:
            rows = self.graph.lesson_rows(bucket, [source, target])
            for n in (source, target):
                if n not in rows:
                    raise NotFound(f"no lesson named {n!r}", name=n)
            sc = bucket.split("/", 1)[0]
            src, dst = svc.from_row(rows[source], sc), svc.from_row(rows[target], sc)
            taken = learned_of(src) or {}
            block = dict(learned_of(dst) or {"source": "manual", "review": "accepted"})
            alts = list(block.get("alternatives") or [])
            if taken.get("fix"):
                alts.append({**taken["fix"], "session": taken.get("session"),
                             "at": taken.get("passedAt"), "count": int(taken.get("occurrences") or 1)})  # fmt: skip
            alts += list(taken.get("alternatives") or [])
            block["alternatives"] = alts[-MAX_ALTERNATIVES:]
            block["occurrences"] = int(block.get("occurrences") or 1) + int(
                taken.get("occurrences") or 1
            )
            block["episodes"] = [*(block.get("episodes") or []), *(taken.get("episodes") or [])][
                -MAX_EPISODES:
            ]
            a, b = dst.metadata, src.metadata
            total = a.frequency + b.frequency
            if total:
                a.successRate = (a.successRate * a.frequency + b.successRate * b.frequency) / total
            a.frequency = total
            now = ts(self.graph.clock())

            def move(conn) -> None:
                self.graph.delete_entity_rows(conn, bucket, [source])
                conn.execute("UPDATE lesson_signatures SET name=?, updated_at=? WHERE bucket=? "
                             "AND name=?", (target, now, bucket, source))  # fmt: skip

            self._store(who, bucket, rows[target], dst, block, extra_steps=[move],
                        delete=[rows[source]["record_id"]])  # fmt: skip
        return f"merged {source} into {target}"
