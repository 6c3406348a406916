"""The warnings of writes no person asked for, kept for the review inbox.

A lesson learned from a session, an exchange indexed from a transcript, the progress and state
rows of the readers: nobody reads the result of such a write, so what the write policy said
about it (a secret redacted, a text refused or flagged as instructions to the model, the diff
of a secret-bearing file left out) is kept here and listed in the dashboard's review inbox
until a person dismisses it (``docs/security.md``, "What the memory writes on its own").

- :func:`watched` wraps one automatic write: inside it the store's secret policy is at least
  ``redact`` (:func:`.trust.policy.unattended`) and every screen's warnings are collected; on
  leaving, they are filed, with the reason when the write was refused. Nested blocks share the
  outer one, which files.
- A row (``write_warnings``, schema v13): the project, the writer and the scope of what it
  wrote (a private write's warnings are listed to its agent only), the source (``learned
  lesson``, ``session exchange``, ``episode progress``), the subject (the lesson's name, the
  session), the warning, how often it came and when (first, last).
- A warning names the secret's kind, never its value: the scanner's preview (its first
  characters) is cut out, and every stored string passes the redactor.
- Bounded: one row per distinct warning (a digest of writer, scope, source, subject and text;
  the same warning again counts up), the newest :data:`MAX_PER_PROJECT` of a project kept.

Filing never fails the write it reports on: a store error is logged.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime

from pydantic import BaseModel

from retrieval.errors import PatternError
from retrieval.storage.store import parse_ts, ts
from server.service.core.errors import NotFound
from server.service.core.identity import Identity
from server.service.memories.memory import MemoryService
from server.service.trust.policy import Unattended, unattended
from server.service.trust.secret_scan import secrets

log = logging.getLogger("pattern_memory.warnings")

MAX_PER_PROJECT = 500
MAX_PER_WRITE = 50  # warnings kept of one write (the rest are counted in one more)
TEXT_CHARS = 600
SUBJECT_CHARS = 300
# the scanner's masked preview, "(ghp_…)": at most four characters of the secret, then "…"
PREVIEW = re.compile(r" ?\([^()\n]{0,4}…\)")


class WriteWarning(BaseModel):
    """One warning as the inbox lists it."""

    id: str
    source: str
    subject: str
    warning: str
    count: int
    scope: str
    agent: str
    firstAt: datetime
    at: datetime


@dataclass
class Watch:
    """An automatic write being screened: its source, what it concerns (set once known) and
    the warnings so far (the policy's, and the notes of the code that writes)."""

    state: Unattended
    subject: str = ""
    notes: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        if text and text not in self.notes:
            self.notes.append(text)

    @property
    def warnings(self) -> list[str]:
        return list(dict.fromkeys([*self.state.warnings, *self.notes]))


_WATCH: ContextVar[Watch | None] = ContextVar("pattern_watch", default=None)


@contextmanager
def watched(svc: MemoryService, who: Identity, source: str, subject: str = "",
            scope: str = "private") -> Iterator[Watch]:  # fmt: skip
    """One write no person asked for (module docstring). ``scope``: of what it writes
    (``team`` lists its warnings to the whole project)."""
    outer = _WATCH.get()
    if outer is not None:
        yield outer
        return
    with unattended(source) as state:
        watch = Watch(state, subject)
        token = _WATCH.set(watch)
        try:
            yield watch
        except PatternError as exc:
            watch.note(f"not stored: {exc.message}")
            raise
        finally:
            _WATCH.reset(token)
            file(svc, who, source, watch.subject, watch.warnings, scope)


def note(text: str) -> None:
    """Add ``text`` to the warnings of the automatic write in progress, if any (a part it left
    out, and why)."""
    watch = _WATCH.get()
    if watch is not None:
        watch.note(text)


def clean(text: str, limit: int) -> str:
    """``text`` as it may be kept: without the scanner's previews, secrets redacted, one line,
    at most ``limit`` characters."""
    text = PREVIEW.sub("", " ".join(str(text).split()))
    return secrets.apply_policy(text, secrets.SecretPolicy.redact)[0][:limit]


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:24]


def file(svc: MemoryService, who: Identity, source: str, subject: str, texts: Iterable[str],
         scope: str = "private") -> int:  # fmt: skip
    """Keep the warnings ``texts`` of an automatic write; how many rows were written."""
    texts = [t for t in dict.fromkeys(clean(t, TEXT_CHARS) for t in texts) if t]
    if not texts:
        return 0
    if len(texts) > MAX_PER_WRITE:
        more = len(texts) - MAX_PER_WRITE + 1
        texts = [*texts[: MAX_PER_WRITE - 1], f"and {more} more warnings of the same write"]
    subject = clean(subject, SUBJECT_CHARS)
    project, agent = who.project_id, who.agent_id
    scope = "team" if scope == "team" else "private"
    now = ts(svc.clock())
    try:
        with svc.store.transaction() as conn:
            for text in texts:
                digest = _digest(agent, scope, source, subject, text)
                row = conn.execute(
                    "SELECT count, first_at FROM write_warnings WHERE project_id=? AND digest=?",
                    (project, digest),
                ).fetchone()
                count, first = (row[0] + 1, row[1]) if row else (1, now)
                conn.execute(
                    "INSERT OR REPLACE INTO write_warnings(project_id, digest, agent_id, scope, "
                    "source, subject, warning, count, first_at, at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (project, digest, agent, scope, source, subject, text, count, first, now),
                )  # fmt: skip
            _bound(conn, project)
    except Exception as exc:  # the write it reports on stands; the warnings go to the log
        why = exc.message if isinstance(exc, PatternError) else f"{type(exc).__name__}: {exc}"
        log.warning("warnings of %s %r not kept (%s): %s", source, subject, why, texts)
        return 0
    return len(texts)


def _bound(conn, project: str) -> None:
    (n,) = conn.execute("SELECT count(*) FROM write_warnings WHERE project_id=?",
                        (project,)).fetchone()  # fmt: skip
    if n <= MAX_PER_PROJECT:
        return
    old = conn.execute(
        "SELECT digest FROM write_warnings WHERE project_id=? ORDER BY at ASC, digest ASC "
        "LIMIT ?", (project, n - MAX_PER_PROJECT),
    ).fetchall()  # fmt: skip
    for (digest,) in old:
        conn.execute("DELETE FROM write_warnings WHERE project_id=? AND digest=?",
                     (project, digest))  # fmt: skip


_VISIBLE = "project_id=? AND (scope='team' OR agent_id=?)"


def listing(svc: MemoryService, who: Identity, limit: int = 100) -> list[WriteWarning]:
    """The warnings the caller may see (its project's team writes, its own private ones),
    newest first."""
    rows = svc.store.reader.execute(
        "SELECT digest, source, subject, warning, count, scope, agent_id, first_at, at "
        f"FROM write_warnings WHERE {_VISIBLE} ORDER BY at DESC, digest DESC LIMIT ?",
        (who.project_id, who.agent_id, limit),
    ).fetchall()
    return [
        WriteWarning(
            id=r[0],
            source=r[1],
            subject=r[2],
            warning=r[3],
            count=r[4],
            scope=r[5],
            agent=r[6],
            firstAt=parse_ts(r[7]),
            at=parse_ts(r[8]),
        )
        for r in rows
    ]


def count(svc: MemoryService, who: Identity) -> int:
    return svc.store.reader.execute(
        f"SELECT count(*) FROM write_warnings WHERE {_VISIBLE}", (who.project_id, who.agent_id)
    ).fetchone()[0]


def dismiss(svc: MemoryService, who: Identity, warning_id: str | None = None) -> int:
    """Remove the warning ``warning_id`` (None: every warning the caller sees); how many went.
    A warning the caller cannot see, or that is gone already, is ``NotFound``."""
    with svc.store.transaction() as conn:
        if warning_id is None:
            n = conn.execute(f"SELECT count(*) FROM write_warnings WHERE {_VISIBLE}",
                             (who.project_id, who.agent_id)).fetchone()[0]  # fmt: skip
            conn.execute(f"DELETE FROM write_warnings WHERE {_VISIBLE}",
                         (who.project_id, who.agent_id))  # fmt: skip
            return n
        found = conn.execute(
            f"SELECT digest FROM write_warnings WHERE {_VISIBLE} AND digest=?",
            (who.project_id, who.agent_id, warning_id),
        ).fetchone()
        if found is None:
            raise NotFound(f"no warning {warning_id!r} (dismissed already?)", id=warning_id)
        conn.execute("DELETE FROM write_warnings WHERE project_id=? AND digest=?",
                     (who.project_id, warning_id))  # fmt: skip
        return 1
