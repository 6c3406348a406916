"""What the read tools leave out: stored text the write policy flagged as possible instructions
to the model (``metadata.suspicious``), until the caller asks for it (``includeSuspicious``).

The hooks never inject a flagged record; the tools quote it only when asked, and mark it then.
Without ``includeSuspicious`` an item a tool lists (a recall item, a memory of
``recall-context``, a chunk, a record of the change stream, a proposal, a stale memory of
``verify-memories``) keeps what identifies it (id, kind, scope, category, author, dates,
numbers) and loses every stored string: its content, context, location, citations, provenance,
string metadata; it carries ``suspicious`` = :func:`brief` of the reason (the kinds of
instruction found, not the words that matched, which are the attack's own).
Graph reads and the lesson tools leave flagged items out whole (``graph.withheld``); this
module gives them :func:`read_flag`, the check of the names and types kept beside the records
(they have no flag of their own).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from graph import lesson_trust
from graph.withheld import record_flags
from retrieval.records import Record
from server.service.core.errors import InvalidInput
from server.service.core.models import CitedMemory, Memory, RecallItem
from server.service.trust.framing import SEPARATOR, field
from server.service.trust.injection_scan import injection
from server.service.trust.injection_scan.injection_model import FIELD_MIN_WORDS
from server.service.trust.policy import SUSPICIOUS, WritePolicy

NAME_CACHE = 8192  # names and types whose verdict is remembered
NAME_CHARS = 512  # the longest name remembered (graph.models.NAME_MAX)


def brief(reason: str | None) -> str | None:
    """The reason without the excerpt it quotes ("override, action: “ignore all …”" ->
    "override, action"), one line."""
    if not reason:
        return None
    head = str(reason).split("“", 1)[0].rstrip(" :")
    return field(head or "flagged")


@lru_cache(maxsize=NAME_CACHE)
def _cached(text: str) -> str | None:
    return injection.verdict(text).suspicious


def _rules(text: str) -> str | None:
    """The rules' verdict on a name; one of at most :data:`NAME_CHARS` characters (every name
    and type a tool writes) is remembered, a longer one (an old or imported store's) is not."""
    return _cached(text) if len(text) <= NAME_CHARS else injection.verdict(text).suspicious


def read_flag(policy: WritePolicy):
    """The check of a stored name or type when it is read (``graph.withheld.Flag``), as the
    write policy screens one: the injection rules, then, for a name of prose length
    (``FIELD_MIN_WORDS`` words), the policy's model; None when the injection scan is off.
    Verdicts are remembered per name (:data:`NAME_CACHE` of them)."""
    if policy.injection is None:
        return None

    @lru_cache(maxsize=NAME_CACHE)
    def prose(text: str) -> str | None:
        try:
            return policy.suspicious(fields=(text,))
        except InvalidInput as exc:  # PATTERN_INJECTION_POLICY=block refuses what it flags
            return str(exc.data.get("reason") or "flagged")

    def flag(text: str) -> str | None:
        found = _rules(text)
        if found or len(text) > NAME_CHARS or len(text.split()) < FIELD_MIN_WORDS:
            return found
        return prose(text)

    return flag


def _numbers(metadata: Mapping[str, Any]) -> dict[str, Any]:
    return {
        k: v
        for k, v in metadata.items()
        if isinstance(v, int | float | bool) and isinstance(k, str) and len(k) <= 40
    }


def withheld_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A flagged record's metadata as listed when it is left out: its numbers (priority, …)
    and the brief flag."""
    return {**_numbers(metadata), SUSPICIOUS: brief(metadata.get(SUSPICIOUS))}


def withheld_provenance(rec: Record) -> str:
    """A left-out record's provenance without any stored string: kind, scope, author, date,
    the brief flag."""
    when = (rec.updated_at or rec.created_at).date().isoformat()
    kind = getattr(rec.kind, "value", str(rec.kind))
    scope = getattr(rec.scope, "value", str(rec.scope))
    flag = f"SUSPICIOUS ({brief(rec.metadata.get(SUSPICIOUS))}): left out"
    return SEPARATOR.join((kind, scope, f"by {field(rec.agent_id)}", when, flag))


def flagged(rec: Record) -> str | None:
    reason = rec.metadata.get(SUSPICIOUS)
    return str(reason) if reason else None


def chunk_item(item: dict[str, Any], rec: Record, include: bool) -> dict[str, Any]:
    """A workspace chunk as ``recall-context`` lists it: left out (no path, no text) when
    flagged and not asked for, marked when asked for."""
    reason = flagged(rec)
    if reason is None:
        return item
    if include:
        return {**item, SUSPICIOUS: reason}
    keep = ("id", "score")
    return {**{k: item[k] for k in keep if k in item}, "content": "", SUSPICIOUS: brief(reason)}


def recall_item(rec: Record, score: float, explanation: dict[str, Any]) -> RecallItem:
    """A flagged item of ``recall`` left out of its text, as its ``items`` list it."""
    return RecallItem(
        id=rec.id, kind=rec.kind.value, scope=rec.scope.value, category=rec.category,
        score=round(score, 4), content="", explanation=explanation,
        provenance=withheld_provenance(rec), suspicious=brief(flagged(rec)), inText=False,
    )  # fmt: skip


def memory(m: CitedMemory, include: bool) -> CitedMemory:
    """A memory as ``recall-context`` lists it: a flagged one without its text, context,
    string metadata and citations, marked ``withheld``, unless ``include``."""
    reason = m.metadata.get(SUSPICIOUS)
    if not reason or include:
        return m
    return m.model_copy(update={"content": "", "context": "", "citations": [], "withheld": True,
                                "metadata": withheld_metadata(m.metadata)})  # fmt: skip


def record(m: Memory, include: bool) -> Memory:
    """A record as a list of records shows it (the change stream): a flagged one without its
    text, context and string metadata, unless ``include``; marked by ``metadata.suspicious``
    either way. A learned lesson's diff hunks only once earned (``graph.lesson_trust``)."""
    if m.kind == "lesson":
        m = m.model_copy(update={"metadata": dict(lesson_trust.shown_metadata(m.metadata))})
    reason = m.metadata.get(SUSPICIOUS)
    if not reason or include:
        return m
    return m.model_copy(
        update={"content": "", "context": "", "metadata": withheld_metadata(m.metadata)}
    )


def changes(res, include: bool):
    """A page of the change stream (``ChangesResult``), each record as :func:`record`."""
    listed = [
        c.model_copy(update={"record": record(c.record, include)}) if c.record else c
        for c in res.changes
    ]
    return res.model_copy(update={"changes": listed})


def proposal(p, include: bool):
    """A proposal of the review inbox (``Proposal``): a flagged one without its text unless
    ``include`` (a reviewer reads it with includeSuspicious before deciding)."""
    if include or not p.suspicious:
        return p
    return p.model_copy(update={"content": "", "suspicious": brief(p.suspicious)})


def proposals(page, include: bool):
    """A page of the review inbox (``ProposalPage``), each proposal as :func:`proposal`."""
    listed = [proposal(p, include) for p in page.proposals]
    return page.model_copy(update={"proposals": listed})


def stale_memories(svc, res, include: bool):
    """``verify-memories``' answer (``VerifyResult``): each memory marked ``suspicious`` when
    flagged, without its text unless ``include``."""
    flags = record_flags(svc.store.reader, [m.id for m in res.memories])
    if not flags:
        return res
    listed = []
    for m in res.memories:
        reason = flags.get(m.id)
        if reason is None:
            listed.append(m)
        elif include:
            listed.append(m.model_copy(update={"suspicious": reason}))
        else:
            listed.append(m.model_copy(update={"content": "", "suspicious": brief(reason)}))
    return res.model_copy(update={"memories": listed})


def reviewed(res):
    """``review-proposal``'s answer (``ReviewResult``): a flagged proposal without its text
    (list-proposals with includeSuspicious shows it)."""
    return res.model_copy(update={"proposal": proposal(res.proposal, False)})
