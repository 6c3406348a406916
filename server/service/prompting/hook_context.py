"""What a client hook injects without being asked, and when it stays silent.

Three selections, each packed into a token budget and quoted as data with provenance:

- :func:`briefing` (session start): the agent's core memories, its open tasks, the team's recent
  decisions and the project's most useful lessons (``failure_lessons.useful_lessons``).
- :func:`select_for_prompt` (each prompt): hybrid recall for the prompt, keeping only items whose
  relevance (the prompt gate, :mod:`.gate`) clears a threshold; a short prompt that refers back
  ("yes, do that") is searched together with the transcript's last turn. Nothing above the
  threshold: nothing is injected, which is the right answer for most prompts. Of two records
  that may state the same thing (:mod:`.conflicts`), the newer is injected first and each
  says so.
- ``failure_lessons.lessons_for_failure`` (a failed command): the lessons whose relevance to
  the error (:func:`lesson_scores`) clears a threshold, with their fix, success rate and
  verification steps.

A per-session :class:`~.ledger.Ledger` (a row of the store's ``meta`` table) keeps every injected id, so
nothing is injected twice in one session; turns of the session itself are left out (the client
still holds them) until the session is compacted. Records flagged ``suspicious`` (the write-time
injection scan) are never injected. ``benchmarks/relevance.py locomo --via-sessions`` and
``benchmarks/hook_noise.py`` call :func:`select_for_prompt` itself: the benchmarks measure the
hook's own code.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import timedelta

from pydantic import BaseModel, Field

from graph import lesson_trust
from retrieval.fulltext.analyzer import query_terms
from retrieval.ranking.guard import guarded
from retrieval.records import Hit, Kind, Record, RecordFilter
from server.service.core.identity import Identity
from server.service.memories import conflicts
from server.service.memories.memory import MemoryService
from server.service.prompting import gate
from server.service.prompting.ledger import Ledger
from server.service.recalling import excerpts
from server.service.trust import framing

CHARS_PER_TOKEN = 4
# A record longer than this is quoted by its excerpt for the prompt (server/service/recalling/excerpts.py),
# of at most this many tokens: the prompt budget (600) holds four such items with their source
# lines.
EXCERPT_TOKENS = 133

# Relevance threshold of prompt recall: the gate's probability (server/service/prompting/gate.py), one
# threshold for every store size (chosen in benchmarks/lab/gate_fit.py; docs/benchmarks.md, "The
# prompt gate").
DEFAULT_THRESHOLD = gate.THRESHOLD
# Lessons for a failed command: relevance = cosine + LEX_WEIGHT * lexical coverage (see
# :func:`lesson_relevance`), threshold from Defects4J (docs/benchmarks.md, "The lesson
# threshold": the same bug's lesson kept for 81 % of failing traces, another project's lessons
# silent for 97 %).
DEFAULT_LESSON_THRESHOLD = 0.85
ERROR_QUERY_WORDS = 48  # the head of an error is its query (never a "long query")
MAX_PROMPT_CHARS = 65_536  # of a prompt searched (as much as the hook client sends)

_REFERS = re.compile(
    r"\b(yes|yeah|yep|ok|okay|sure|do (it|that|this|so)|go (ahead|on)|that|this|it|those|these|"
    r"same|again|continue|proceed|instead|above|previous|last one|no|nope)\b",
    re.IGNORECASE,
)


class HookConfig(BaseModel):
    """Budgets and thresholds (the client may set them: ``PATTERN_HOOK_*``, docs/configuration.md)."""

    briefing_tokens: int = Field(600, ge=0, le=20_000)
    prompt_tokens: int = Field(600, ge=0, le=20_000)
    threshold: float = Field(DEFAULT_THRESHOLD, ge=0.0, le=2.0)
    lesson_threshold: float = Field(DEFAULT_LESSON_THRESHOLD, ge=0.0, le=2.0)
    max_items: int = Field(6, ge=1, le=50)


@dataclass
class Picked:
    record: Record
    relevance: float
    hit: Hit | None = None
    text: str | None = None  # the excerpt quoted instead of a long record's content


@dataclass
class Decision:
    """One candidate of a prompt and what the hook did with it."""

    record: Record
    relevance: float
    judged: gate.Judged
    reason: str | None = None  # why it was dropped (None: injected)

    @property
    def verdict(self) -> str:
        return self.reason or "injected"

    @verdict.setter
    def verdict(self, value: str) -> None:
        self.reason = value


@dataclass
class Selection:
    picked: list[Picked] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    text: str = ""
    candidates: int = 0
    query: str = ""

    @property
    def ids(self) -> list[str]:
        return [p.record.id for p in self.picked]


# ---------------------------------------------------------------------------- framing
# Everything the hooks inject is quoted by server/service/trust/framing.py, as recall's text is: one
# header line, then per item its provenance and its text with every line prefixed by "> ".
FRAME_HEADER = framing.HEADER


def injectable(rec: Record) -> bool:
    """Never inject what the write-time scan flagged."""
    return not framing.suspicious(rec)


def entry(rec: Record, text: str | None = None, cites=None) -> framing.Entry:
    """``rec`` to quote, showing ``text`` (a lesson's fix and steps) instead of its content;
    ``cites``: its checked citations (a stale one is noted in the provenance line)."""
    if text is None:
        return framing.entry_of(rec, cites)
    return guarded("framing", lambda: framing.Entry(framing.provenance(rec, cites), text.strip(),
                                                    framing.suspicious(rec)),
                   default=framing.unquotable(rec), record=rec.id)  # fmt: skip


def _pack(items: list[tuple[Record, str | None]], tokens: int, title: str | None = None,
          cites: dict | None = None, marks: dict | None = None):  # fmt: skip
    """(how many of ``items`` were quoted, the framed text) within ``tokens``; ``marks``: the
    records that may state the same thing as another one quoted (:mod:`.conflicts`)."""
    cites, marks = cites or {}, marks or {}
    entries = [conflicts.entry(rec, cites.get(rec.id), marks.get(rec.id), text)
               if rec.id in marks else entry(rec, text, cites.get(rec.id))
               for rec, text in items]  # fmt: skip
    packed = framing.pack(entries, tokens * CHARS_PER_TOKEN, title=title)
    return sum(state != "withheld" for _, state in packed.states), packed.text


def checked(svc: MemoryService, who: Identity, records: list[Record]) -> dict:
    """The citations of ``records`` checked against the caller's files now (see recall):
    record id -> states; empty when the service has no citations."""
    if svc.citations is None or not records:
        return {}
    return guarded("citations' check", svc.citations.states, who, [r.id for r in records],
                   default={})  # fmt: skip


def stale_factor(svc: MemoryService, states) -> float:
    if not states or svc.citations is None:
        return 1.0
    return guarded("citations' factor", svc.citations.factor, states, default=1.0)


# ---------------------------------------------------------------------------- relevance
# Lessons for a failed command (lesson_relevance): cosine + LEX_WEIGHT * lexical coverage;
# lexical only (model not ready): LEXICAL_ONLY_SCALE * coverage. The prompt's relevance is the
# gate's (server/service/prompting/gate.py).
LEX_WEIGHT = 0.4
LEXICAL_ONLY_SCALE = 1.1


def coverage_mass(svc: MemoryService, query: str) -> float:
    """The bm25 a record would get by holding every query term the store knows once: the sum
    of their IDF as FTS5 computes it (log((N - df + 0.5) / (df + 0.5)), at least 1e-6)."""
    lex = svc.engine.lexical
    terms = lex.terms(query)
    dfs = lex.doc_freqs(terms)
    # the count is cached for a while and the frequencies are not: a store that grew since
    # may count a term in more records than it holds
    n = max(1, lex.doc_count(), *dfs.values())
    return sum(max(1e-6, math.log((n - df + 0.5) / (df + 0.5))) for df in dfs.values() if df > 0)


def lesson_relevance(hit: Hit, mass: float) -> float:
    """Relevance of a lesson to an error: cosine + LEX_WEIGHT * coverage, coverage = the
    lesson's bm25 over :func:`coverage_mass` (at most 1). Error texts are long and share
    boilerplate (runner frames, ``at java.lang…``): a saturated bm25 would call every trace of
    the same language relevant, while the share of the error's IDF a lesson holds does not
    (measured on Defects4J, docs/benchmarks.md "Hooks")."""
    e = hit.explanation
    cover = min(1.0, (e.lexical_score or 0.0) / mass) if mass > 0 else 0.0
    if e.vector_similarity is not None:
        return float(e.vector_similarity) + LEX_WEIGHT * cover
    return LEXICAL_ONLY_SCALE * cover


def refers_back(prompt: str) -> bool:
    """A short prompt that leans on what was just said ("yes, do that", "same for the other")."""
    words = prompt.split()
    if len(words) > 12:
        return False
    return len(query_terms(prompt)) <= 2 or (len(words) <= 8 and bool(_REFERS.search(prompt)))


# ---------------------------------------------------------------------------- selections
def select_for_prompt(
    svc: MemoryService,
    who: Identity,
    prompt: str,
    *,
    config: HookConfig | None = None,
    ledger: Ledger | None = None,
    session: str | None = None,
    last_turn: str | None = None,
    k: int = 30,
    pending: bool = True,
) -> Selection:
    """The items a prompt gets: relevant enough (the gate, :mod:`.gate`), not injected before,
    not this session's own. ``Selection.decisions`` says for every candidate why it was kept or
    dropped (``pattern-memory hook-preview``). A learned lesson says how far it is trusted
    (:func:`learned_text`); ``pending=False`` (``PATTERN_AUTO_LESSONS=review``) leaves out one
    nobody accepted."""
    config = config or HookConfig()
    query = prompt.strip()[:MAX_PROMPT_CHARS]
    if last_turn and refers_back(query):
        query = f"{last_turn.strip()}\n{query}"
    sel = Selection(query=query)
    if not query or config.prompt_tokens <= 0:
        return sel
    f = RecordFilter(buckets=who.visible_buckets(), now=svc.clock())
    hits = svc.engine.search(query, f, k=k)
    sel.candidates = len(hits)
    seen = ledger.seen if ledger else set()
    compacted = ledger.compacted if ledger else 0
    cites = checked(svc, who, [h.record for h in hits])
    judge = gate.PromptGate(query)
    chosen: list[Picked] = []
    for h in hits:
        rec = h.record
        judged = judge.judge(rec, h.explanation.vector_similarity)
        rel = judged.relevance * stale_factor(svc, cites.get(rec.id))  # cited code changed
        why = _dropped(rec, rel, config, seen, session, compacted, len(chosen))
        if (
            why is None
            and not pending
            and rec.kind is Kind.lesson
            and lesson_trust.pending(rec.metadata)
        ):
            why = "dropped: a learned lesson nobody accepted yet (PATTERN_AUTO_LESSONS=review)"
        sel.decisions.append(Decision(rec, rel, judged, why))
        if why is None:
            chosen.append(Picked(rec, rel, h))
    pairs = guarded("pairs that may state the same thing", conflicts.marks, svc,
                    [p.record for p in chosen], default={})  # fmt: skip
    if pairs:  # the newer of two records that may state the same thing first
        at = {p.record.id: p for p in chosen}
        chosen = [at[r.id] for r in conflicts.newer_first([p.record for p in chosen], pairs)]
    texts = excerpt_texts(svc, query, [p.record for p in chosen], config.prompt_tokens)
    for p, t in zip(chosen, texts, strict=True):
        p.text = learned_text(p.record, t)
    n, text = _pack([(p.record, p.text) for p in chosen], config.prompt_tokens, cites=cites,
                    marks=pairs)  # fmt: skip
    sel.picked = chosen[:n]
    sel.text = text if n else ""
    left = {p.record.id for p in chosen[n:]}
    for d in sel.decisions:
        if d.record.id in left:
            d.verdict = "dropped: over the token budget"
    return sel


def _dropped(rec: Record, rel: float, config: HookConfig, seen: set, session: str | None,
             compacted: int, kept: int) -> str | None:  # fmt: skip
    """Why a candidate is not injected (None: it is, budget permitting)."""
    if rec.id in seen:
        return "dropped: injected earlier in this session"
    if not injectable(rec):
        return "dropped: flagged suspicious when it was written"
    if session and rec.kind is Kind.turn and _same_session(rec, session, compacted):
        return "dropped: part of this session (the client still holds it)"
    if rel < config.threshold:
        return f"dropped: relevance below the threshold {config.threshold:g}"
    if kept >= config.max_items:
        return f"dropped: {config.max_items} items already kept"
    return None


def learned_text(rec: Record, text: str | None) -> str | None:
    """What the prompt hook quotes of ``rec`` (``text``, else its content), a learned lesson's
    opening with how far it is trusted ("learned once, not reviewed": ``graph.lesson_trust``)."""
    if rec.kind is not Kind.lesson or (note := lesson_trust.note(rec.metadata)) is None:
        return text
    return f"{note}\n{text if text is not None else framing.body(rec.content, 'lesson')}"


def excerpt_texts(
    svc: MemoryService, query: str, records: list[Record], prompt_tokens: int
) -> list[str | None]:
    """Per record, what the prompt hook quotes instead of its content: the excerpt for
    ``query`` of a record longer than ``EXCERPT_TOKENS`` (or the whole budget, when smaller)
    (None: the content)."""
    room = min(prompt_tokens, EXCERPT_TOKENS) * CHARS_PER_TOKEN
    engine = svc.engine
    if not any(len(r.content) > room for r in records) or not engine.ranker.vector_ready():
        return [None] * len(records)
    qvec = guarded("excerpt: the query's vector", engine.embedder.embed_query, query,
                   default=None)  # the search just embedded it: a cache hit  # fmt: skip
    terms = guarded("excerpt: the query's terms", lambda: frozenset(query_terms(query, 64)),
                    default=frozenset())  # fmt: skip
    out: list[str | None] = []
    for rec in records:
        text = excerpts.excerpt(engine, rec, qvec, room, terms)
        out.append(None if text is None else framing.body(text, rec.kind.value))
    return out


def _same_session(rec: Record, session: str, compacted: int) -> bool:
    """``rec`` is a part of the prompting session (or of its sidechains) that the client still
    holds: a record covers turns ``turn`` to ``last_turn`` of its session, and leaves the
    client's context only when all of them came before the compaction (``compacted`` turns)."""
    m = rec.metadata
    mine = m.get("session") == session or m.get("parentSession") == session
    if not mine:
        return False
    last = m.get("last_turn", m.get("turn"))
    return not (isinstance(last, int) and last < compacted and m.get("session") == session)


def briefing(
    svc: MemoryService, who: Identity, *, config: HookConfig | None = None,
    ledger: Ledger | None = None, lessons: list | None = None,
) -> Selection:  # fmt: skip
    """Core memories, open tasks, recent team decisions, the most useful lessons: newest first
    within each, in that order, until the budget is spent."""
    config = config or HookConfig()
    now = svc.clock()
    seen = ledger.seen if ledger else set()

    def listed(buckets, categories, limit, kinds=(Kind.memory,)):
        f = RecordFilter(buckets=buckets, kinds=list(kinds), categories=categories, now=now)
        recs = svc.store.list(f, order="r.priority ASC, r.updated_at DESC", limit=limit)
        return [r for r in recs if r.id not in seen and injectable(r)]

    own = [who.bucket("personal")]
    private = [who.bucket("private"), who.bucket("personal")]
    sections: list[tuple[Record, str | None]] = []
    for rec in listed(own, ["core"], 20):
        sections.append((rec, None))
    for rec in listed(private, ["tasks"], 10):
        sections.append((rec, None))
    recent = now - timedelta(days=30)
    for rec in listed([who.bucket("team")], ["decisions"], 10):
        if rec.updated_at >= recent:
            sections.append((rec, None))
    for rec, text in lessons or []:
        if rec.id not in seen and injectable(rec):
            sections.append((rec, text))
    n, text = _pack(sections, config.briefing_tokens, "Session briefing: core memories, open "
                    "tasks, recent team decisions, useful lessons.",
                    checked(svc, who, [rec for rec, _ in sections]))  # fmt: skip
    sel = Selection(candidates=len(sections))
    sel.picked = [Picked(rec, 1.0) for rec, _ in sections[:n]]
    sel.text = text if n else ""
    return sel


def lesson_scores(svc: MemoryService, f: RecordFilter, error: str, k: int = 10) -> dict:
    """{lesson record id: :func:`lesson_relevance`} of the ``k`` lessons (under ``f``) nearest
    to the head of an error text (a text of at most :data:`ERROR_QUERY_WORDS` words is asked
    as it is)."""
    words = error.split()
    head = error if len(words) <= ERROR_QUERY_WORDS else " ".join(words[:ERROR_QUERY_WORDS])
    mass = guarded("lesson relevance: the error's terms", coverage_mass, svc, head, default=0.0)
    return {h.record.id: guarded("lesson relevance", lesson_relevance, h, mass, default=0.0,
                                 record=h.record.id)
            for h in svc.engine.search(head, f, k=k)}  # fmt: skip
