"""Records that may state the same thing, as readers see them: recall marks such a pair, the
prompt hook injects its newer record first, the review inbox lists it for a person to decide.

A pair is two records a write showed as candidates of each other (:mod:`.candidates`) that
nobody decided yet: not linked either way (:mod:`.supersede`), not dismissed. Recall's text
then says, in each one's provenance line, "may state the same thing as <id>; the newer is from
<date>", so the reading agent weighs the two instead of taking the first; the hook puts the
newer one first. In the review inbox a person links the pair (the newer replaces the older) or
dismisses it (both stay true); either way it is not offered again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field

from retrieval.records import Record
from retrieval.timeline import links
from server.service.core.errors import InvalidInput, NotFound
from server.service.core.identity import Identity
from server.service.trust import framing
from server.service.updating import candidates, supersede

INBOX_LIMIT = 20
DECISIONS = ("link", "dismiss")


@dataclass(frozen=True)
class Mark:
    """What a record of a pair says about the other one."""

    other: str
    newer: bool  # this record is the newer of the two
    newer_date: str  # the newer one's date (ISO)

    @property
    def note(self) -> str:
        if self.newer:
            return f"may state the same thing as {framing.field(self.other)}, which is older"
        return (
            f"may state the same thing as {framing.field(self.other)}; the newer is from "
            f"{self.newer_date}"
        )


def _date(rec: Record) -> str:
    return (rec.updated_at or rec.created_at).date().isoformat()


def _newer(a: Record, b: Record) -> bool:
    """``a`` was written after ``b``."""
    return (a.updated_at or a.created_at) > (b.updated_at or b.created_at)


def marks(svc, records: Sequence[Record]) -> dict[str, Mark]:
    """For the records of ``records`` that form undecided pairs among themselves (neither one
    flagged by the write policy): what each says about the other (a record in several pairs
    names the first)."""
    shown = {r.id: r for r in records if not framing.suspicious(r)}
    out: dict[str, Mark] = {}
    for p in links.pairs(svc.store.reader, list(shown)):
        old, new = shown[p.older], shown[p.newer]
        if _newer(old, new):
            old, new = new, old
        when = _date(new)
        out.setdefault(new.id, Mark(old.id, True, when))
        out.setdefault(old.id, Mark(new.id, False, when))
    return out


def entry(rec: Record, citations=None, mark: Mark | None = None, text: str | None = None):
    """``rec`` to quote (:class:`framing.Entry`), its provenance line carrying the pair's note."""
    line = framing.provenance(rec, citations)
    if mark is not None:
        line += f"{framing.SEPARATOR}{mark.note}"
    body = text.strip() if text is not None else framing.body(rec.content, rec.kind.value)
    return framing.Entry(line, body, framing.suspicious(rec))


def newer_first(records: list[Record], found: dict[str, Mark]) -> list[Record]:
    """``records`` with the newer record of each pair moved just before its older one (when it
    came after it)."""
    out = list(records)
    for rec in records:
        mark = found.get(rec.id)
        if mark is None or not mark.newer:
            continue
        ids = [r.id for r in out]
        if mark.other in ids and ids.index(mark.other) < ids.index(rec.id):
            out.remove(rec)
            out.insert(ids.index(mark.other), rec)
    return out


class PairView(BaseModel):
    """An undecided pair as the review inbox shows it."""

    older: str
    newer: str
    olderDate: str
    newerDate: str
    olderText: str = Field(description="A one-line excerpt (secrets redacted).")
    newerText: str
    scope: str
    shownTo: str = Field(description="The agent whose write showed the pair.")


def pending(svc, who: Identity, limit: int = INBOX_LIMIT) -> list[PairView]:
    """The newest undecided pairs among the records ``who`` sees (both records present, not
    expired, neither flagged)."""
    found = links.pending(svc.store.reader, who.visible_buckets(), limit * 3)
    recs = svc.store.get([x for p in found for x in (p.older, p.newer)])
    now = svc.clock()
    out: list[PairView] = []
    for p in found:
        old, new = recs.get(p.older), recs.get(p.newer)
        if old is None or new is None:
            continue
        if any(r.expires_at is not None and r.expires_at <= now for r in (old, new)):
            continue
        if framing.suspicious(old) or framing.suspicious(new):
            continue
        if _newer(old, new):
            old, new = new, old
        out.append(PairView(
            older=old.id, newer=new.id, olderDate=_date(old), newerDate=_date(new),
            olderText=candidates.excerpt(old, 200), newerText=candidates.excerpt(new, 200),
            scope=new.scope.value, shownTo=p.by,
        ))  # fmt: skip
        if len(out) == limit:
            break
    return out


def decide(svc, who: Identity, older: str, newer: str, action: str):
    """A person's decision on a pair: ``link`` (``newer`` replaces ``older``) or ``dismiss``
    (both stay true)."""
    if action not in DECISIONS:
        raise InvalidInput(f"unknown decision {action!r}: use link or dismiss", action=action)
    if action == "link":
        return supersede.link(svc, who, older, newer)
    for rid in (older, newer):
        svc.get_visible(who, rid)
    with svc.store.transaction() as conn:
        done = links.dismiss(conn, older, newer, who.agent_id) or links.dismiss(
            conn, newer, older, who.agent_id
        )
    if not done:
        raise NotFound(
            f"no open pair of {older} and {newer} (decided already?)", older=older, newer=newer
        )
    return True


__all__ = ["Mark", "PairView", "decide", "entry", "marks", "newer_first", "pending"]
