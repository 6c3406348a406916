"""Write-time candidates: the older records a new text may restate, shown to the agent that
wrote it, which decides (``supersede``, or nothing).

A write of ``remember``, ``update-memory`` or ``add_observations`` looks, once, at the records
of its own bucket (the same scope and project; an observation at its own entity's) nearest to
the new text by the vectors the write already made (no second embedding). Each of the
:data:`POOL` nearest is scored

    score = cosine + OVERLAP_WEIGHT * min(shared, OVERLAP_CAP)

where ``cosine`` is the two records' best pair of embedding windows and ``shared`` the
subject words they share: over every pair of a sentence of one and a sentence of the other,
the largest weight of the words both hold (each word weighed by its rarity in general English,
a name more: :mod:`.vocabulary`). A restated fact usually shares its subject's words in one
sentence ("I've had Luna for about 6 months" ... "I've had my cat, Luna, for about 9 months")
even when the rest of the two texts differ. The records scoring at least :data:`FLOOR` are
candidates, at most :data:`MAX_SHOWN`, best first. Not candidates: the record itself, records
written or changed within :data:`SITTING` before (the same sitting: the writer knows what it
just wrote), records already updated by another, records the write policy flagged, the same
text again, and pairs offered or decided before. The weights and the floor were chosen on
LongMemEval_S's knowledge-update questions (``benchmarks/update_candidates.py``).

The vector query waits at most :data:`DEADLINE_S`; a query that misses it shows no candidates
and is logged, never an error. The candidates a write showed are kept as ``candidate`` rows of
``record_links`` (:mod:`retrieval.timeline.links`): recall marks such a pair, the review inbox lists it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from ingest.sessions.exchanges import SENTENCE
from retrieval.records import Kind, Record, RecordFilter, ts
from retrieval.timeline import links
from retrieval.timings import timings
from server.service.prompting import vocabulary
from server.service.trust import framing
from server.service.trust.secret_scan.secrets import SecretPolicy, apply_policy

log = logging.getLogger("pattern_memory.candidates")

MAX_SHOWN = 3
POOL = 20  # nearest records scored
FLOOR = 1.0
OVERLAP_WEIGHT = 2.0 / 30  # per unit of shared word weight (a name weighs 12)
OVERLAP_CAP = 30.0
SITTING = timedelta(hours=1)
DEADLINE_S = 0.5  # the vector query's wait
EXCERPT_CHARS = 72
MAX_CHARS = 4000  # of a text read for its sentences
MAX_SENTENCES = 40
MAX_TERMS = 64  # per sentence
NOTE = (
    "These may state the same thing: if this replaces one, call supersede(old=<its id>, "
    "new={new}); if both stay true, do nothing."
)


@dataclass(frozen=True)
class Found:
    """A record near the new one, and why it ranks where it does."""

    record: Record
    cosine: float
    shared: float

    @property
    def score(self) -> float:
        return self.cosine + OVERLAP_WEIGHT * min(self.shared, OVERLAP_CAP)


def sentence_terms(text: str) -> list[dict[str, float]]:
    """The weighed subject words of each sentence of ``text`` (its first :data:`MAX_CHARS`
    characters, at most :data:`MAX_SENTENCES` sentences)."""
    out = []
    for s in SENTENCE.split(text[:MAX_CHARS]):
        weights = vocabulary.Terms.of(s, max_terms=MAX_TERMS).weights
        if weights:
            out.append(weights)
            if len(out) == MAX_SENTENCES:
                break
    return out


def shared_weight(a: list[dict[str, float]], b: list[dict[str, float]]) -> float:
    """The largest weight of the words a sentence of ``a`` and a sentence of ``b`` share."""
    best = 0.0
    for wa in a:
        for wb in b:
            both = wa.keys() & wb.keys()
            if both:
                best = max(best, sum(min(wa[s], wb[s]) for s in both))
    return best


def _words(text: str) -> list[str]:
    return text.lower().split()


def pool(engine, rec: Record, vectors: np.ndarray | None, now: datetime) -> list[Found] | None:
    """The :data:`POOL` records of ``rec``'s bucket nearest to it that may be candidates (see
    the module), scored, best first; None when the vector index missed its deadline."""
    if rec.kind not in (Kind.memory, Kind.observation) or framing.suspicious(rec):
        return []
    if vectors is None or not len(vectors) or not engine.ranker.vector_ready():
        return []
    cutoff = ts(now - SITTING)  # records changed after it are of this sitting: never candidates
    settled = "SELECT {} FROM records WHERE bucket = ? AND kind = ? AND updated_at <= ?"
    reader = engine.store.reader
    probe = (rec.bucket, str(rec.kind), cutoff)
    if reader.execute(settled.format("1") + " LIMIT 1", probe).fetchone() is None:
        return []  # nothing older than this sitting in the bucket: no query
    f = RecordFilter(buckets=[rec.bucket], kinds=[rec.kind], now=now)
    mats = np.asarray(vectors, dtype=np.float32)
    mean = mats.mean(axis=0)
    mean /= max(float(np.linalg.norm(mean)), 1e-12)
    with engine.vector_query_deadline(DEADLINE_S):
        near = engine.ranker.vector_candidates(mean, f, 4 * POOL, [rec.bucket])
    if near is None:
        return None
    with timings.stage("links"):
        ids = [rid for rid, _ in near if rid != rec.id]
        marks = ",".join("?" * len(ids))
        query = settled.format("id") + f" AND id IN ({marks})"
        older = {r[0] for r in reader.execute(query, (*probe, *ids))}
        ids = [rid for rid in ids if rid in older]  # read only what may be a candidate
        stored = engine.store.embeddings(ids, engine.embedder.model_id)
        cos = {rid: float(np.max(m @ mats.T)) for rid, m in stored.items()}
        nearest = sorted(cos, key=lambda r: -cos[r])
        records = engine.store.get(nearest)  # marks the ones already updated
        same = _words(rec.content)
        mine = None
        out: list[Found] = []
        for rid in nearest:
            old = records.get(rid)
            if old is None or not _eligible(engine, rec, old, now, same):
                continue
            mine = mine if mine is not None else sentence_terms(rec.content)
            out.append(Found(old, cos[rid], shared_weight(mine, sentence_terms(old.content))))
            if len(out) == POOL:
                break
    return sorted(out, key=lambda c: -c.score)


def _eligible(engine, rec: Record, old: Record, now: datetime, same: list[str]) -> bool:
    if old.kind is Kind.observation and old.entity_name != rec.entity_name:
        return False
    if old.updated_by is not None or framing.suspicious(old):
        return False
    if (old.updated_at or old.created_at) > now - SITTING:
        return False
    if _words(old.content) == same:
        return False
    return not links.related(engine.store.reader, old.id, rec.id)


def find(engine, rec: Record, vectors: np.ndarray | None, now: datetime) -> list[Found]:
    """The candidates of a write: at most :data:`MAX_SHOWN` of :func:`pool` scoring at least
    :data:`FLOOR`. A vector query that missed its deadline is logged and shows none."""
    try:
        found = pool(engine, rec, vectors, now)
    except Exception:  # one bad record or a failing index never fails the write
        log.exception("candidates of %s: not shown (the search failed)", rec.id)
        return []
    if found is None:
        log.warning(
            "candidates of %s: the vector index did not answer within %.1f s; none shown",
            rec.id, DEADLINE_S,
        )  # fmt: skip
        return []
    return [c for c in found if c.score >= FLOOR][:MAX_SHOWN]


def head_of(text: str, n: int) -> str:
    """The first ``n`` characters of ``text`` without the word a cut there splits: a secret cut
    short is one the redactor no longer recognises, and its start would be shown."""
    if len(text) <= n or text[n].isspace():
        return text[:n]
    end = n
    while end > 0 and not text[end - 1].isspace():
        end -= 1
    return text[:end]


def excerpt(rec: Record, chars: int = EXCERPT_CHARS) -> str:
    """One line of ``rec``'s text: secrets redacted whatever the store's policy, control
    characters and the field separator escaped, at most ``chars`` characters."""
    head = " ".join(head_of(rec.content, 4 * chars + 200).split())
    head = apply_policy(head, SecretPolicy.redact)[0]
    return framing.field(head, chars)


def listed(found: list[Found]) -> list[str]:
    """The candidates as the write's result lists them: ``id · date · excerpt``."""
    return [
        f"{framing.field(c.record.id)} · "
        f"{(c.record.updated_at or c.record.created_at).date().isoformat()} · {excerpt(c.record)}"
        for c in found
    ]


def note(found: list[Found], new: str = "<this memoryId>") -> str | None:
    """The one sentence that tells the agent what to do with them (None when there are none)."""
    return NOTE.format(new=new) if found else None


def writer(rec: Record, who, found: list[Found]):
    """The transaction step that keeps the pairs shown (None when none were)."""
    if not found:
        return None

    def write(conn) -> None:
        for c in found:  # a record deleted since it was found is left out
            if conn.execute("SELECT 1 FROM records WHERE id=?", (c.record.id,)).fetchone():
                links.write(conn, c.record.id, rec.id, rec.bucket, links.CANDIDATE,
                            who.agent_id, similarity=round(c.score, 4))  # fmt: skip

    return write


__all__ = ["FLOOR", "MAX_SHOWN", "Found", "excerpt", "find", "head_of", "listed", "note", "pool",
           "sentence_terms", "shared_weight", "writer"]  # fmt: skip
