"""Facts that changed: a record that replaces an older one *updates* it (both kept, linked;
:mod:`retrieval.timeline.links`). Recall then ranks the newer first and marks the older "updated by …".

A link is made only when someone says so, never guessed:

- ``remember`` / ``update-memory`` with ``supersedes`` (ids of older memories the caller can
  see, in the same scope as the new one: a link never points outside the records its readers
  see): :func:`stated` and :func:`writer`, inside the write's transaction;
- the ``supersede`` tool, the review inbox and the client's model when the server may ask it
  (``PATTERN_UPDATE_JUDGE=sampling``): :func:`link`, for two records that exist.

A write shows the older records that may state the same thing (:mod:`.candidates`); deciding
is the agent's. Undoing a link (the dashboard) keeps its row, marked undone.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from retrieval.records import Kind, Record, Scope
from retrieval.timeline import links
from server.service.core.errors import AccessDenied, InvalidInput, NotFound
from server.service.core.identity import Identity
from server.service.core.models import Superseded
from server.service.trust import framing

MAX_SUPERSEDES = 10
LINKABLE = (Kind.memory, Kind.observation)


class SupersedeResult(BaseModel):
    """What ``supersede`` did."""

    older: str = Field(description="The record that is no longer current.")
    newer: str = Field(description="The record that replaces it.")
    how: Literal["stated", "judged"]
    at: datetime = Field(description="When the link was made.")
    created: bool = Field(
        description="False when this link was already there (nothing was written)."
    )
    message: str


def _same_bucket(rec: Record, old: Record) -> None:
    if old.bucket != rec.bucket:
        raise InvalidInput(
            f"{old.id} is not in the same scope as {rec.id} ({old.scope.value}, not "
            f"{rec.scope.value}): a record supersedes only records its readers see",
            memoryId=old.id, scope=old.scope.value,
        )  # fmt: skip


def stated(svc, who: Identity, rec: Record, ids: list[str] | None) -> list[str]:
    """The memories ``rec`` says it supersedes, checked: visible to the caller, memories, in
    ``rec``'s bucket, not ``rec`` itself."""
    if not ids:
        return []
    ids = list(dict.fromkeys(ids))
    if len(ids) > MAX_SUPERSEDES:
        raise InvalidInput(f"supersedes names at most {MAX_SUPERSEDES} memories", got=len(ids))
    out = []
    for rid in ids:
        if rid == rec.id:
            raise InvalidInput("a memory cannot supersede itself", memoryId=rid)
        old = svc.get_visible(who, rid)
        if old.kind is not Kind.memory:
            raise InvalidInput(f"{rid} is a {old.kind.value}, not a memory", memoryId=rid)
        _same_bucket(rec, old)
        out.append(rid)
    return out


def writer(rec: Record, who: Identity, stated_ids: list[str]):
    """The transaction step that writes ``rec``'s stated links (None when there are none). A
    named memory that ``rec`` already updates (an update naming it again) is left as it is."""
    if not stated_ids:
        return None

    def write(conn) -> None:
        for rid in stated_ids:
            if links.active(conn, rid, rec.id) is None:
                _still_there(conn, rid)
                if links.reaches(conn, rec.id, rid):
                    raise _cycle(rid, rec.id)
                links.write(conn, rid, rec.id, rec.bucket, "stated", who.agent_id)

    return write


def reported(stated_ids: list[str]) -> list[Superseded]:
    """The links of a write, as its result lists them."""
    return [Superseded(memoryId=rid, how="stated") for rid in stated_ids]


def _cycle(older: str, newer: str) -> InvalidInput:
    return InvalidInput(
        f"{older} already updates {newer} (directly or through other records): linking "
        f"{newer} as its newer version would make a cycle; undo that link first",
        older=older, newer=newer,
    )  # fmt: skip


def _still_there(conn, *ids: str) -> None:
    """Inside the link's transaction: each of ``ids`` was not deleted since it was checked (a
    link to a record that is gone would mark the other one updated by nothing)."""
    for rid in ids:
        if conn.execute("SELECT 1 FROM records WHERE id=?", (rid,)).fetchone() is None:
            raise NotFound(f"{rid} was deleted meanwhile; nothing was linked", memoryId=rid)


def check_pair(svc, who: Identity, older: str, newer: str) -> tuple[Record, Record]:
    """The two records of a link the caller may make: both visible, different, memories or
    observations of one scope; the newer not flagged by the write policy; in the public scope
    only the newer one's author says what it replaces."""
    if older == newer:
        raise InvalidInput("a record cannot supersede itself", older=older, newer=newer)
    old, new = svc.get_visible(who, older), svc.get_visible(who, newer)
    for r in (old, new):
        if r.kind not in LINKABLE:
            raise InvalidInput(
                f"{r.id} is a {r.kind.value}: only memories and observations supersede each "
                "other", memoryId=r.id, kind=r.kind.value,
            )  # fmt: skip
    if old.kind is not new.kind:
        raise InvalidInput(
            f"{older} is a {old.kind.value} and {newer} a {new.kind.value}: a record "
            "supersedes only a record of its own kind", older=older, newer=newer,
        )  # fmt: skip
    _same_bucket(new, old)
    if reason := framing.suspicious(new):
        raise InvalidInput(
            f"{newer} was flagged when it was written ({reason}): it cannot replace another "
            "record; review it first", newer=newer,
        )  # fmt: skip
    if new.scope is Scope.public and new.agent_id != who.agent_id:
        raise AccessDenied(
            f"{newer} is a public record of {new.agent_id}: only its author says what it "
            "replaces", newer=newer, owner=new.agent_id,
        )  # fmt: skip
    return old, new


def link(
    svc, who: Identity, older: str, newer: str, how: Literal["stated", "judged"] = "stated"
) -> SupersedeResult:
    """Make ``newer`` the current version of ``older`` (:func:`check_pair`); a link that is
    already there is kept as it is. The cycle check runs inside the write transaction, so two
    opposite calls cannot both succeed."""
    old, new = check_pair(svc, who, older, newer)
    now = svc.clock()
    with svc.store.transaction() as conn:
        at = links.active(conn, older, newer)
        created = at is None
        if created:
            _still_there(conn, older, newer)
            if links.reaches(conn, newer, older):
                raise _cycle(older, newer)
            links.write(conn, older, newer, new.bucket, how, who.agent_id, at=now)
            at = now
    return SupersedeResult(
        older=older, newer=newer, how=how, at=at, created=created,
        message=f'{newer} is now the current one: recall puts it first and marks {older} '
        f'"updated by {newer} on {at.date().isoformat()}" (a person can undo it in the '
        "dashboard)",
    )  # fmt: skip


def undo(svc, who: Identity, older: str, newer: str) -> bool:
    """Undo the link ``newer`` updates ``older`` (both must be visible to the caller)."""
    for rid in (older, newer):
        svc.get_visible(who, rid)
    with svc.store.transaction() as conn:
        done = links.undo(conn, older, newer, who.agent_id)
    if not done:
        raise NotFound(f"no link: {newer} does not update {older}", older=older, newer=newer)
    return True


def chain(svc, who: Identity, memory_id: str) -> list[links.Link]:
    """The links around a memory the caller can see (those between records it sees)."""
    svc.get_visible(who, memory_id)
    found = links.chain(svc.store.reader, memory_id)
    ids = {x for lk in found for x in (lk.older, lk.newer)}
    visible = {r.id for r in svc.store.get(list(ids)).values() if svc.visible(who, r)}
    return [lk for lk in found if lk.older in visible and lk.newer in visible]


__all__ = ["SupersedeResult", "chain", "check_pair", "link", "reported", "stated", "undo",
           "writer"]  # fmt: skip
