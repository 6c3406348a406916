"""Facts that changed: a memory that restates an older one's subject with a new value *updates*
it (both kept, linked; :mod:`retrieval.links`).

Two ways a link is made, both inside the write's transaction:

- **stated**: ``remember`` / ``update-memory`` with ``supersedes`` (ids of older memories the
  caller can see, in the same scope as the new one: a link never points outside the records
  its readers see);
- **detected** (``remember``): the new memory's nearest older memories of the same bucket by
  meaning; the best one that is still current is linked when
  1. its cosine to the new memory is at least :data:`DETECT_MIN_COS`,
  2. the two name the same subject: among their first words they share an entity or
     identifier (a capitalised name, a code identifier, a path, a flag) and lead with the same
     one, or neither names any there; a first-person text's subject is its author, so two
     agents' "I prefer …" are two subjects,
  3. and they say different things (their content words differ: a restatement is not an
     update).
  The threshold and the subject rule are measured on true update pairs and on 200 unrelated
  pairs of high similarity from the dev data (``benchmarks/update_links.py``).

Undoing a link (the dashboard) keeps its row, marked undone, so the pair is not detected again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from retrieval import links, timeexpr
from retrieval.analyzer import STOPWORDS
from retrieval.records import Kind, Record, RecordFilter

from .errors import InvalidInput, NotFound
from .identity import Identity
from .models import Superseded

DETECT_MIN_COS = 0.70
SUBJECT_WORDS = 4
DETECT_CANDIDATES = 5
MAX_SUPERSEDES = 10

_WORD = re.compile(r"[^\W_]+(?:'[a-z]+)?", re.UNICODE)
_CAPITAL = re.compile(r"(?<![\w.'-])([A-Z][\w'-]*)")
_IDENT = re.compile(
    r"`[^`\n]+`|\b[A-Za-z_]\w*(?:[._/]\w+)+\b|\b[a-z]+[A-Z]\w*\b|(?<!\w)--?[a-z][\w-]+"
)
_I = re.compile(r"i(?:'\w+)?")  # "I", "I'm", "I've": the author, not a name
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|me|mine|myself)\b")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;\n]\s*|\"\s*)$")
# capitalised sentence openers that name nothing
_OPENERS = frozenset(
    """we our us the a an this that these those it its they their there here then now today
    yesterday always never please note use don't do does did also our let's when if after
    before since until currently recently new old""".split()
)


_TIME_WORDS = frozenset(
    [*timeexpr.MONTHS, *timeexpr.WEEKDAYS, "today", "tomorrow", "yesterday", "tonight"]
)


@dataclass(frozen=True)
class Detected:
    older: str
    similarity: float


def names(text: str) -> list[str]:
    """The entities and identifiers ``text`` names, lower-cased, in order (a capitalised word
    that opens a sentence counts unless it is a common opener; dates are values, not names)."""
    found = [(m.start(), m.group(0).strip("`").lower()) for m in _IDENT.finditer(text)]
    for m in _CAPITAL.finditer(text):
        word = m.group(1).removesuffix("'s").rstrip("'")
        low = word.lower()
        if low in STOPWORDS or len(word) < 2 or low.rstrip("s") in _TIME_WORDS or _I.fullmatch(low):
            continue
        if low in _OPENERS and _SENTENCE_START.search(text[: m.start()]):
            continue
        found.append((m.start(), low))
    return list(dict.fromkeys(w for _, w in sorted(found)))


def subject(text: str, author: str) -> set[str]:
    """What ``text`` is about: the names among its first :data:`SUBJECT_WORDS` words (where a
    statement names what it is about; a name further on is more often its value: "the docs
    site is built with MkDocs"), and ``@author`` for a first-person text (its subject is its
    author: two agents' "I prefer …" are two subjects)."""
    head = " ".join(text.split()[:SUBJECT_WORDS])
    out = set(names(head))
    if _FIRST_PERSON.search(text):
        out.add(f"@{author}")
    return out


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def same_subject(new: Record, old: Record) -> bool:
    """They share a name (or neither names anything), and they lead with the same one: "Atlas
    uses PostgreSQL" and "Zephyr uses PostgreSQL" are about two projects."""
    a, b = subject(new.content, new.agent_id), subject(old.content, old.agent_id)
    if a and b and not a & b or bool(a) != bool(b):
        return False
    lead_a = names(" ".join(new.content.split()[:SUBJECT_WORDS]))[:1]
    lead_b = names(" ".join(old.content.split()[:SUBJECT_WORDS]))[:1]
    return not (lead_a and lead_b and lead_a != lead_b)


def updates(new: Record, old: Record, similarity: float, min_cos: float = DETECT_MIN_COS) -> bool:
    """The detection rule (see the module): close, the same subject, a different value."""
    return (
        similarity >= min_cos
        and same_subject(new, old)
        and words(new.content) != words(old.content)
    )


def detect(engine, rec: Record, vectors: np.ndarray | None, now) -> Detected | None:
    """The older memory of ``rec``'s bucket that ``rec`` updates, if any (see the module)."""
    if rec.kind is not Kind.memory or vectors is None or not len(vectors):
        return None
    f = RecordFilter(buckets=[rec.bucket], kinds=[Kind.memory], now=now)
    near = engine.nearest(vectors, f, DETECT_CANDIDATES + 1)
    ids = [r for r, _ in near if r != rec.id]
    if not ids:
        return None
    found = engine.store.get(ids)  # marks the ones already updated
    for rid, cos in near:
        old = found.get(rid)
        if old is None or old.updated_by is not None or old.created_at > rec.created_at:
            continue
        if updates(rec, old, cos):
            return Detected(rid, round(cos, 4))
    return None


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
        if old.kind is not Kind.memory or old.bucket != rec.bucket:
            raise InvalidInput(
                f"memory {rid} is not a memory of the same scope ({rec.scope.value}) as the new "
                "one: a memory supersedes only memories its readers see",
                memoryId=rid, scope=old.scope.value,
            )  # fmt: skip
        out.append(rid)
    return out


def writer(rec: Record, who: Identity, stated_ids: list[str], found: Detected | None):
    """The transaction step that writes ``rec``'s links (None when there are none)."""
    if not stated_ids and found is None:
        return None

    def write(conn) -> None:
        for rid in stated_ids:
            links.write(conn, rid, rec.id, rec.bucket, "stated", who.agent_id)
        if found is not None and found.older not in stated_ids:
            links.write(conn, found.older, rec.id, rec.bucket, "detected", who.agent_id,
                        similarity=found.similarity)  # fmt: skip

    return write


def reported(stated_ids: list[str], found: Detected | None) -> list[Superseded]:
    """The links of a write, as its result lists them."""
    out = [Superseded(memoryId=rid, how="stated") for rid in stated_ids]
    if found is not None and found.older not in stated_ids:
        out.append(Superseded(memoryId=found.older, how="detected", similarity=found.similarity))
    return out


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


__all__ = ["DETECT_MIN_COS", "Detected", "chain", "detect", "reported", "stated", "subject",
           "undo", "updates", "writer"]  # fmt: skip
