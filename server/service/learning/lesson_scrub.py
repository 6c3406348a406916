"""Learned lessons stored before a write no person asked for kept secrets out, scrubbed once.

A lesson learned from a session (``auto_lessons``) now keeps the name of a secret-bearing file
(``.env``, a key, ``credentials`` …) and of a file whose diff holds a secret, never the diff
(``fix.withheld``), and every string of it is screened at least as ``redact``. A store written
before kept such diffs in ``lessons.extra`` (``learned.fix.hunks``,
``learned.alternatives[*].hunks``) and in the lesson record's metadata (``details``), and kept
a secret of a command or of the agent's words as it was under ``warn``.

:func:`scrub_learned_lessons` runs when a runtime opens a store, until it has run to the end
once (then a ``meta`` row, :data:`KEY`, says so and it costs one read). For every lesson with a
``learned`` block it applies today's rule to what is stored:

* every fix (``learned.fix`` and each alternative, wherever a ``hunks`` list is): the hunks of
  the files ``trust.secret_files.withheld_files`` withholds are dropped, their names kept in
  ``files`` and added to ``withheld``; a hunk that is not ``{path, diff}`` text is dropped too;
* every string of the lesson's row and record (keys too) loses each base64 run that decodes to
  a secret and each secret the scanner finds (``[REDACTED:kind]``).

A lesson with nothing to change is left as it is (so a second run, or a run after one
interrupted half-way, rewrites nothing twice). One lesson is one transaction, run with SQLite's
``secure_delete`` so the pages the old text leaves are zeroed, not only freed. When only the
metadata changed, the record's text and vector stay as they are (its revision goes up and the
change is logged); when its text changed, it is rewritten through the normal update path
(``Engine.apply``: screened, re-embedded, re-indexed), with the lesson's trace fingerprints
added back to its search terms; the full-text index is then merged once
(``SQLiteStore.purge_text_index``), since FTS5 keeps a replaced text's tokens until then. A text
today's write policy refuses (it only lost secrets, but may read as an instruction under
``block``) is written through the store all the same. A lesson whose record cannot be read as
one still loses what is dropped from its row and metadata (logged). A lesson written meanwhile
is planned again (three times, then left to the next start, which also runs while :data:`KEY` is
not set); any other failure stops the run, logged, without stopping the runtime, and the next
start goes on from where it stopped.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from graph.traces import fingerprint_terms
from retrieval.errors import Conflict, PatternError
from server.service.graphs.graph_services import GraphServices
from server.service.memories.memory import MemoryService
from server.service.trust.policy import unattended
from server.service.trust.secret_scan import secrets
from server.service.trust.secret_scan.secret_files import withheld_files, without_encoded

log = logging.getLogger("pattern_memory.lessons")

KEY = "scrub.learned-lessons"
VERSION = "1"
TEXT_COLUMNS = ("message", "context", "stack_trace")
JSON_COLUMNS = ("observations", "verification_steps", "environment", "extra")


@dataclass
class Scrubbed:
    """What one run did."""

    lessons: int = 0  # lessons rewritten
    hunks: int = 0  # diff hunks dropped
    redacted: int = 0  # secrets redacted from strings
    reembedded: int = 0  # lessons whose text changed (rewritten through Engine.apply)
    busy: list[str] = field(default_factory=list)  # changing meanwhile: left for now


# ---------------------------------------------------------------------------- the rule
def _fix(fix: dict, out: Scrubbed) -> dict:
    """``fix`` without the hunks the rule withholds (their names added to ``withheld``)."""
    hunks = fix.get("hunks")
    if not isinstance(hunks, list):
        return fix
    good = [h for h in hunks if isinstance(h, dict) and isinstance(h.get("path"), str)
            and isinstance(h.get("diff"), str)]  # fmt: skip
    bad = withheld_files((i, h["path"], h["diff"]) for i, h in enumerate(good))
    kept = [h for h in good if h["path"] not in bad]
    if len(kept) == len(hunks):
        return fix
    out.hunks += len(hunks) - len(kept)
    named = {h.get("path") for h in hunks if isinstance(h, dict)} - {h["path"] for h in kept}
    before = fix.get("withheld")
    withheld = {w for w in before if isinstance(w, str)} if isinstance(before, list) else set()
    withheld |= {p for p in named if isinstance(p, str)}
    new = {**fix, "hunks": kept}
    if withheld:
        new["withheld"] = sorted(withheld)
    return new


def _text(text: str, out: Scrubbed) -> str:
    text, encoded = without_encoded(text)
    text, found = secrets.apply_policy(text, secrets.SecretPolicy.redact)
    out.redacted += encoded + len(found)
    return text


def scrubbed(value: Any, out: Scrubbed) -> Any:
    """``value`` (JSON-like) under the rule (module docstring); the same object when nothing
    in it changes."""
    if isinstance(value, str):
        return _text(value, out)
    if isinstance(value, dict):
        if "hunks" in value:
            value = _fix(value, out)
        new: dict = {}
        for k, v in value.items():
            key = base = _text(k, out) if isinstance(k, str) else k
            n = 1
            while key in new:  # two keys redacted alike: both values kept
                n += 1
                key = f"{base} ({n})"
            new[key] = scrubbed(v, out)
        return value if new == value else new
    if isinstance(value, list):
        new_list = [scrubbed(v, out) for v in value]
        return value if new_list == value else new_list
    return value


def _json(raw: object, out: Scrubbed) -> object:
    """A JSON column under the rule (a column that is not JSON: as text), or ``raw`` as it is
    when nothing changes."""
    if not isinstance(raw, str):
        return raw
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return _text(raw, out)
    try:
        new = scrubbed(doc, out)
    except RecursionError:  # nested deeper than the walk goes: read as text
        return _text(raw, out)
    return raw if new == doc else json.dumps(new, ensure_ascii=False, default=str)


# ---------------------------------------------------------------------------- one lesson
@dataclass
class _Plan:
    """What one lesson's row and record become (only the columns that change)."""

    lesson_id: int
    record_id: str
    lesson: dict[str, object]
    record: dict[str, object]
    seen: tuple  # what SEEN read when it was planned
    secure: int = 0  # the connection's secure_delete before the write


def _plan(conn: sqlite3.Connection, lesson_id: int, out: Scrubbed) -> _Plan | None:
    row = conn.execute("SELECT * FROM lessons WHERE id=?", (lesson_id,)).fetchone()
    if row is None:
        return None
    rec = conn.execute(
        "SELECT content, context, metadata, content_hash FROM records WHERE id=?",
        (row["record_id"],),
    ).fetchone()
    lesson = {c: _text(row[c], out) if isinstance(row[c], str) else row[c] for c in TEXT_COLUMNS}
    lesson |= {c: _json(row[c], out) for c in JSON_COLUMNS}
    lesson = {c: v for c, v in lesson.items() if v != row[c]}
    record: dict[str, object] = {}
    if rec is not None:
        record = {"metadata": _json(rec["metadata"], out)}
        record |= {c: _text(rec[c], out) for c in ("content", "context") if isinstance(rec[c], str)}
        record = {c: v for c, v in record.items() if v != rec[c]}
    if not lesson and not record:
        return None
    seen = tuple(conn.execute(SEEN, (lesson_id,)).fetchone())
    return _Plan(lesson_id, row["record_id"], lesson, record, seen)


SEEN = (
    "SELECT l.updated_at, l.frequency, l.observations, l.extra, r.revision FROM lessons l "
    "LEFT JOIN records r ON r.id = l.record_id WHERE l.id=?"
)


def _unchanged(conn: sqlite3.Connection, plan: _Plan) -> None:
    """Inside the write: the lesson is as it was planned from (else :class:`Conflict`), and
    the pages this transaction frees are zeroed (SQLite's ``secure_delete``, until
    :func:`_done`)."""
    if isinstance(conn, sqlite3.Connection):
        plan.secure = int(conn.execute("PRAGMA secure_delete").fetchone()[0])
        conn.execute("PRAGMA secure_delete = ON")
    now = conn.execute(SEEN, (plan.lesson_id,)).fetchone()
    if now is None or tuple(now) != plan.seen:
        raise Conflict("the lesson changed while it was scrubbed")


def _done(conn: sqlite3.Connection, plan: _Plan) -> None:
    if isinstance(conn, sqlite3.Connection):
        conn.execute(f"PRAGMA secure_delete = {plan.secure}")  # as the connection had it


def _write_lesson(conn: sqlite3.Connection, plan: _Plan) -> None:
    if plan.lesson:
        sets = ", ".join(f"{c}=?" for c in plan.lesson)
        conn.execute(
            f"UPDATE lessons SET {sets} WHERE id=?", (*plan.lesson.values(), plan.lesson_id)
        )


def _metadata_only(svc: MemoryService, plan: _Plan) -> None:
    """The lesson's row and its record's metadata, in one transaction (text and vector kept)."""
    store = svc.store
    with store.transaction() as conn:
        _unchanged(conn, plan)
        _write_lesson(conn, plan)
        if "metadata" in plan.record:
            conn.execute(
                "UPDATE records SET metadata=?, revision=revision+1 WHERE id=?",
                (plan.record["metadata"], plan.record_id),
            )
            row = conn.execute(
                "SELECT kind, bucket, revision FROM records WHERE id=?", (plan.record_id,)
            ).fetchone()
            store.log_change(conn, plan.record_id, "update", *map(str, row[:2]), row[2])
        _done(conn, plan)


def _retext(svc: MemoryService, graphs: GraphServices, plan: _Plan) -> bool:
    """The lesson with its record's text changed: through ``Engine.apply`` (screened,
    re-embedded, re-indexed), its trace fingerprints added back to its search terms. When
    today's write policy refuses the text (it only lost secrets, but it may read as an
    instruction under ``block``), the same rows through the store (re-indexed; its vector made
    again from the outbox). False (nothing written) when the record cannot be read as one."""
    old = svc.store.get([plan.record_id]).get(plan.record_id)
    if old is None:
        return False
    meta = plan.record.get("metadata")
    doc = json.loads(meta) if isinstance(meta, str) else old.metadata
    rec = old.model_copy(update={
        "content": plan.record.get("content", old.content),
        "context": plan.record.get("context", old.context),
        "metadata": doc if isinstance(doc, dict) else {},  # not an object: read as none
    })  # fmt: skip

    def extra(conn) -> None:
        _write_lesson(conn, plan)
        row = conn.execute(
            "SELECT error_type, message, stack_trace FROM lessons WHERE id=?", (plan.lesson_id,)
        ).fetchone()
        terms = fingerprint_terms(f"{row[0]}: {row[1]}", row[2] or "")
        graphs.lessons._add_terms(conn, rec.id, " ".join(terms))
        _done(conn, plan)

    with unattended("lesson scrub"), graphs.graph.lock:
        try:
            svc.engine.apply(replace=[rec], check=lambda c: _unchanged(c, plan), extra=extra)
        except PatternError as exc:
            if isinstance(exc, Conflict):
                raise
            log.warning("lesson %s: its scrubbed text is kept unscreened (%s)", plan.lesson_id,
                        exc.message)  # fmt: skip
            with svc.store.transaction() as conn:
                _unchanged(conn, plan)
                svc.store.replace(conn, rec)
                extra(conn)
    return True


def _scrub_one(svc: MemoryService, graphs: GraphServices, lesson_id: int, out: Scrubbed) -> None:
    for _attempt in range(3):  # a lesson written meanwhile is planned again
        probe = Scrubbed()
        plan = _plan(svc.store.reader, lesson_id, probe)
        if plan is None:
            return
        try:
            retexted = False
            if {"content", "context"} & plan.record.keys():
                retexted = _retext(svc, graphs, plan)
                if retexted:
                    out.reembedded += 1
                else:  # what is dropped still goes; the text of a row no reader reads stays
                    log.warning("lesson %s: its record cannot be read as one", lesson_id)
                    plan.record = {k: v for k, v in plan.record.items() if k == "metadata"}
            if not retexted:
                _metadata_only(svc, plan)
        except Conflict:
            continue
        out.lessons += 1
        out.hunks += probe.hunks
        out.redacted += probe.redacted
        return
    out.busy.append(str(lesson_id))


# ---------------------------------------------------------------------------- the run
def scrub_learned_lessons(svc: MemoryService, graphs: GraphServices) -> Scrubbed | None:
    """Scrub every learned lesson of the store once (module docstring); None when it ran to
    the end before."""
    store = svc.store
    if store.meta(KEY) == VERSION:
        return None
    out = Scrubbed()
    ids = [r[0] for r in store.reader.execute(
        "SELECT id FROM lessons WHERE extra LIKE '%\"learned\"%' ORDER BY id")]  # fmt: skip
    for lesson_id in ids:
        _scrub_one(svc, graphs, lesson_id, out)
    if out.reembedded:  # the old text's tokens stay in the index's older segments until merged
        store.purge_text_index()
    if not out.busy:  # else the next start tries those again
        with store.transaction() as conn:
            store.set_meta(conn, KEY, VERSION)
    if out.lessons or out.busy:
        log.warning(
            "learned lessons scrubbed: %d rewritten (%d diff hunks dropped, %d secrets "
            "redacted, %d re-embedded)%s", out.lessons, out.hunks, out.redacted, out.reembedded,
            f"; changing meanwhile, tried again at the next start: {', '.join(out.busy)}"
            if out.busy else "",
        )  # fmt: skip
    return out


def scrub_at_start(svc: MemoryService, graphs: GraphServices) -> Scrubbed | None:
    """:func:`scrub_learned_lessons`, never failing the start: an error is logged and the
    next start goes on from where this one stopped."""
    try:
        return scrub_learned_lessons(svc, graphs)
    except Exception as exc:  # noqa: BLE001 - a store that opens must serve
        log.warning("learned lessons not scrubbed yet: %s: %s", type(exc).__name__, exc)
        return None


__all__ = ["KEY", "Scrubbed", "scrub_at_start", "scrub_learned_lessons", "scrubbed"]
