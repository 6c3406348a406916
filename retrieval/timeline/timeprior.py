"""The time prior of a ranking: what a query says about time weighs the records from then.

    TimePrior(store, lexical, config).weigh(query, f, ids, fused) -> (scores, boosts)

Applied by the hybrid ranker (:mod:`retrieval.ranking.hybrid`) to its fused candidates, before they are
cut to ``k``, so every caller of ``Engine.search`` (recall, the hooks, the benchmarks) has it.
It is a prior, not a filter: a record outside the window keeps its relevance and can still
rank first.

- **Windows** (:func:`retrieval.timeline.timeexpr.read`, read relative to ``f.now``, the time the query
  is asked, else now): a record whose own date (``created_at``: a memory's creation, a session
  exchange's timestamp, an ingested chunk's ingestion) lies in the window gains
  ``window_weight``; outside, the gain falls linearly to 0 over half the window's width (at
  least a day): "two weeks ago" is not a day exact. With several windows the best counts.
- **The times a record speaks of**: a record's own text may date what it tells ("I went to
  the UK last Friday", "we shipped it yesterday"); read relative to the record's date
  (:func:`stated_times`, the first :data:`STATED_TOP` candidates), each of those times counts
  as the record's date too, for windows and events alike.
- **Events** ("before the migration"): the event's words are searched (lexical, same filter);
  the best record's date is the event's, and the records on that side of it (its own day
  included) gain ``event_weight``. At most :data:`MAX_EVENTS` per query. Neither windows nor
  events are read from a long query (a pasted report's "yesterday" and "after upgrading …"
  are its story's time, not a question's).
- **A feature that fails** (a text the grammar cannot read, a date the store cannot parse) is
  dropped for that record, or for the query when it is the query's own reading, and the
  ranking goes on without it (:mod:`retrieval.ranking.guard`).
- **Questions that ask when** ("when did …", "how many days ago …"): the answer is a record
  that states a time, so records whose text mentions one (a date, "yesterday", "last week",
  a weekday, "next month") gain ``when_weight``.
- **Questions about the current state** ("how many bikes do I own?", "what was my previous
  status?": :func:`retrieval.timeline.tense.asks_current`): among the first ``recent_depth`` candidates,
  those within ``recent_margin`` of the best gain up to ``recent_weight`` (both shares of the
  best score) by how new they are (:func:`recent_gain`): of two statements of about the same
  relevance, the newer is more likely the current one. A question about a past event ("what
  did … paint?") is left alone. Dates less than :data:`RECENT_SPAN` apart count as nearly one
  time (a memory written a minute after another is not the newer version of it). A record
  dated more than :data:`AHEAD_S` after the question (a wrong clock, a placeholder date) has no
  date for the prior.

Weights are in units of the fused score (in [0, 1]); chosen on the dev sets
(docs/benchmarks.md, "Time and updates").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from retrieval.ranking import longquery
from retrieval.ranking.guard import guarded
from retrieval.records import RecordFilter, utcnow
from retrieval.storage.store import SQLiteStore, parse_ts
from retrieval.timeline import tense, timeexpr

# a text that mentions a time (past or future): what a "when" question's answer holds
MENTIONS_TIME = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|recently|lately|(?:last|next|this|past) (?:week|"
    r"weekend|month|year|night|summer|winter|spring|fall|sprint)|ago|(?:mon|tues|wednes|thurs|"
    r"fri|satur|sun)day|" + "|".join(timeexpr.MONTHS) + r"|(?:19|20)\d\d|\d{1,2}[/-]\d{1,2}|"
    r"\d{1,2}(?:st|nd|rd|th)|(?:for|in) (?:\d+|a|an|a few|a couple of|several|two|three|four|"
    r"five|six|seven|eight|nine|ten) (?:day|week|month|year)s?)\b",
    re.IGNORECASE,
)
MIN_SOFT = timedelta(days=1)
# events searched per query (one lexical search each); a long text (a pasted report) names
# "after …" and "since …" in passing, not as a question's time: its events are not searched
MAX_EVENTS = 2
OPEN_SOFT = timedelta(days=7)  # how far an open window's edge fades
STATED_TOP = 50  # candidates whose text is read for the times it speaks of
STATED_CHARS = 2000  # of each text
MENTION_CHARS = 32 * 1024  # of a text searched for a mention of a time (a memory's limit)
STATED_MAX = timedelta(days=31)  # a wider window ("last year") dates nothing precisely
RECENT_SPAN = 86400.0  # seconds: the spread of dates that earns the full recency gain
AHEAD_S = 86400.0  # a record dated later than this after the question has no date for it


@dataclass
class TimeWeights:
    window_weight: float = 0.0
    event_weight: float = 0.0
    when_weight: float = 0.0
    recent_weight: float = 0.0
    recent_depth: int = 20
    recent_margin: float = 0.3
    stated: bool = False  # the times a record's text speaks of count as its dates

    def any(self) -> bool:
        return bool(self.window_weight or self.event_weight or self.when_weight
                    or self.recent_weight)  # fmt: skip


def membership(t: np.ndarray, window: timeexpr.Window) -> np.ndarray:
    """1 inside ``[start, end)``, falling linearly to 0 over the soft margin outside
    (``t``: POSIX seconds)."""
    start = -np.inf if window.start is None else window.start.timestamp()
    end = np.inf if window.end is None else window.end.timestamp()
    if window.start is None or window.end is None:
        soft = OPEN_SOFT.total_seconds()
    else:
        soft = max(MIN_SOFT, (window.end - window.start) / 2).total_seconds()
    dist = np.maximum(start - t, 0.0) + np.maximum(t - end, 0.0)
    return np.clip(1.0 - dist / soft, 0.0, 1.0)


def recent_gain(
    scores: np.ndarray, t: np.ndarray, depth: int, margin: float, weight: float
) -> np.ndarray:
    """The recency gain of each candidate: among the first ``depth`` by ``scores`` whose score
    is within ``margin`` of the best (a share of the best score, so that any ranker's scale
    works: a hybrid score is about 1 at the top, a bm25 score of a tiny store about 0), ``best
    * weight * (t - t_min) / max(t_max - t_min, RECENT_SPAN)`` (their dates ``t``, POSIX
    seconds, min-max scaled, dates less than a day apart gaining that share of the full gain; a
    candidate without a date gains nothing); 0 elsewhere and when they all share one time."""
    gain = np.zeros(len(scores))
    if not len(scores) or weight <= 0:
        return gain
    top = np.argsort(-scores, kind="stable")[:depth]
    best = float(scores[top[0]])
    if not best > 0:
        return gain
    near = top[(scores[top] >= best * (1.0 - margin)) & ~np.isnan(t[top])]
    if len(near) < 2:
        return gain
    lo, hi = float(np.min(t[near])), float(np.max(t[near]))
    if hi <= lo:
        return gain
    gain[near] = best * weight * (t[near] - lo) / max(hi - lo, RECENT_SPAN)
    return gain


def recency_depth(w: TimeWeights, question: str) -> int:
    """How many of a question's first candidates the recency reads: ``recent_depth`` for a
    question about the current state (:func:`retrieval.timeline.tense.asks_current`), else 0."""
    return w.recent_depth if w.recent_weight and tense.asks_current(question) else 0


def stated_times(text: str, written: datetime) -> list[float]:
    """The times ``text`` speaks of ("last Friday", "yesterday", "on 5 May"), read relative to
    ``written`` (when the record was written): the middle of each window of at most
    :data:`STATED_MAX`, POSIX seconds."""
    out = []
    for win in timeexpr.read(text[:STATED_CHARS], written).windows:
        if win.start is not None and win.end is not None and win.end - win.start <= STATED_MAX:
            out.append((win.start.timestamp() + win.end.timestamp()) / 2)
    return out


def states_time(record: str, text: str) -> bool:
    """Whether a record's text (its first :data:`MENTION_CHARS`) mentions a time
    (:data:`MENTIONS_TIME`; False when it cannot be read)."""
    return guarded(
        "time prior: whether a record states a time",
        lambda: MENTIONS_TIME.search(text, 0, MENTION_CHARS) is not None,
        default=False,
        record=record,
    )


def stated_matrix(times: list[list[float]]) -> np.ndarray:
    """Candidates' stated times as one array (candidates x most times), NaN-padded."""
    width = max((len(x) for x in times), default=0)
    out = np.full((len(times), max(width, 1)), np.nan)
    for i, x in enumerate(times):
        out[i, : len(x)] = x
    return out


def dated_membership(t: np.ndarray, stated: np.ndarray | None, window: timeexpr.Window):
    """:func:`membership` of each candidate's best date: its own (``t``) or a time its text
    speaks of (``stated``, candidates x times, NaN-padded)."""
    m = np.nan_to_num(membership(t, window))
    if stated is None or not stated.size:
        return m
    alt = np.nan_to_num(membership(stated, window)).max(axis=1)
    return np.maximum(m, alt)


def top_stated(fused: np.ndarray, read) -> np.ndarray:
    """:func:`stated_matrix` of the first :data:`STATED_TOP` candidates by ``fused`` (``read(i)``:
    candidate i's stated times); the others speak of no time."""
    times: list[list[float]] = [[] for _ in range(len(fused))]
    for i in np.argsort(-fused, kind="stable")[:STATED_TOP]:
        times[i] = read(int(i))
    return stated_matrix(times)


def gains(
    fused: np.ndarray,
    t: np.ndarray,
    w: TimeWeights,
    *,
    windows: list[timeexpr.Window],
    events: list[timeexpr.Window],
    mentions: np.ndarray | None,
    recent_depth: int,
    stated: np.ndarray | None,
) -> tuple[np.ndarray, list[dict[str, float]]]:
    """The prior's gain of each candidate, and its gains by name (the ranker's and the time
    lab's one computation): ``t`` the candidates' dates, ``stated`` the times their texts speak
    of (:func:`top_stated`), ``mentions`` whether each text states a time (for a question that
    asks when; None otherwise), ``recent_depth`` how many first candidates the recency reads
    (:func:`recency_depth`; 0: none)."""
    gain = np.zeros(len(fused))
    boosts: list[dict[str, float]] = [{} for _ in range(len(fused))]
    for name, group, weight in (("time", windows, w.window_weight),
                                ("event", events, w.event_weight)):  # fmt: skip
        if not group or not weight:
            continue
        m = np.max([dated_membership(t, stated, win) for win in group], axis=0) * weight
        gain += m
        for i in np.flatnonzero(m):
            boosts[i][name] = round(float(m[i]), 4)
    if mentions is not None and w.when_weight:
        for i in np.flatnonzero(mentions):
            gain[i] += w.when_weight
            boosts[i]["states_time"] = w.when_weight
    if recent_depth and w.recent_weight:
        recent = recent_gain(fused + gain, t, recent_depth, w.recent_margin, w.recent_weight)
        gain += recent
        for i in np.flatnonzero(recent):
            boosts[i]["recent"] = round(float(recent[i]), 4)
    return gain, boosts


class StatedCache:
    """:func:`stated_times` per (record id, content hash), kept for the ranker's life (reading a
    text costs about 0.4 ms; a query names a window again and again over the same records).
    Bounded: cleared when it holds :attr:`limit` texts."""

    def __init__(self, limit: int = 20_000) -> None:
        self.limit = limit
        self._times: dict[tuple[str, str], list[float]] = {}

    def get(self, key: tuple[str, str], text: str, written: datetime) -> list[float]:
        """The stated times of one record (none when its text cannot be read: kept so, the
        text is not read again)."""
        got = self._times.get(key)
        if got is None:
            if len(self._times) >= self.limit:
                self._times.clear()
            got = self._times[key] = guarded("time prior: the times a record states",
                                             stated_times, text, written, default=[],
                                             record=key[0])  # fmt: skip
        return got


class TimePrior:
    def __init__(
        self, store: SQLiteStore, lexical, weights: TimeWeights, stated: StatedCache | None = None
    ) -> None:
        self.store = store
        self.lexical = lexical
        self.weights = weights
        self.stated = stated or StatedCache()

    def dates(self, ids: list[str], content: bool) -> dict[str, tuple[datetime, str, str]]:
        """(created_at, content or '', content hash or '') per id."""
        out: dict[str, tuple[datetime, str, str]] = {}
        col = "content, content_hash" if content else "'', ''"
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            rows = self.store.reader.execute(
                f"SELECT id, created_at, {col} FROM records "
                f"WHERE id IN ({','.join('?' * len(part))})",
                part,
            ).fetchall()
            for r in rows:  # a date the store cannot parse: the record has none
                when = guarded("time prior: a record's date", parse_ts, r[1], default=None,
                               record=r[0])  # fmt: skip
                if when is not None:
                    out[r[0]] = (when, r[2] or "", r[3] or "")
        return out

    def event_windows(self, events: list[timeexpr.Event], f: RecordFilter) -> list[timeexpr.Window]:
        """Each event's side of its date: the best lexical match of its words is the event
        (an event that cannot be dated is left out)."""
        out = []
        for ev in events:
            win = guarded("time prior: an event's date", self._event_window, ev, f, default=None)
            if win is not None:
                out.append(win)
        return out

    def _event_window(self, ev: timeexpr.Event, f: RecordFilter) -> timeexpr.Window | None:
        top = self.lexical.search(ev.text, f, 1)
        if not top:
            return None
        when = self.dates([top[0][0]], False).get(top[0][0])
        if when is None:
            return None
        day = datetime(when[0].year, when[0].month, when[0].day, tzinfo=when[0].tzinfo)
        if ev.relation == "before":
            return timeexpr.Window(None, day + timedelta(days=1), ev.phrase)
        return timeexpr.Window(day, None, ev.phrase)

    def weigh(
        self, query: str, f: RecordFilter, ids: list[str], fused: np.ndarray
    ) -> tuple[np.ndarray, list[dict[str, float]]]:
        """``fused`` plus the prior's gains, and each candidate's gains by name; ``fused``
        unchanged when the prior fails for the query (:mod:`retrieval.ranking.guard`)."""
        if not ids or not self.weights.any():
            return fused, [{} for _ in ids]
        return guarded("time prior", self._weigh, query, f, ids, fused,
                       default=(fused, [{} for _ in ids]))  # fmt: skip

    def _weigh(self, query: str, f: RecordFilter, ids: list[str], fused: np.ndarray):
        w = self.weights
        asked = guarded("time prior: the query's time phrases", timeexpr.read, query,
                        f.now or utcnow(), default=timeexpr.QueryTime())  # fmt: skip
        long = longquery.is_long(query)  # a pasted report's "yesterday" is its story's time
        windows = asked.windows if w.window_weight and not long else []
        named = asked.events[:MAX_EVENTS] if not long else []
        events = self.event_windows(named, f) if w.event_weight and named else []
        when = asked.asks_when and w.when_weight > 0
        depth = 0 if long else recency_depth(w, query)
        if not (windows or events or when or depth):
            return fused, [{} for _ in ids]
        read_stated = w.stated and bool(windows or events)
        if windows or events or when:
            wanted = ids
        else:  # the recency alone reads the dates of its first candidates only
            wanted = [ids[i] for i in np.argsort(-fused, kind="stable")[:depth]]
        known = self.dates(wanted, content=when or read_stated)
        t = np.array([known[r][0].timestamp() if r in known else np.nan for r in ids])
        asked_at = (f.now or utcnow()).timestamp()
        t[t > asked_at + AHEAD_S] = np.nan  # a date the clock has not reached is no date

        def read(i: int) -> list[float]:
            r = ids[i]
            return self.stated.get((r, known[r][2]), known[r][1], known[r][0]) if r in known else []

        stated = top_stated(fused, read) if read_stated else None
        mentions = None
        if when:
            mentions = np.array([r in known and states_time(r, known[r][1]) for r in ids])
        gain, boosts = gains(fused, t, w, windows=windows, events=events, mentions=mentions,
                             recent_depth=depth, stated=stated)  # fmt: skip
        gain = np.where(np.isfinite(gain), gain, 0.0)  # a gain is a number or none
        return fused + gain, boosts


__all__ = ["MENTIONS_TIME", "StatedCache", "TimePrior", "TimeWeights", "dated_membership",
           "gains", "membership", "recency_depth", "recent_gain", "stated_matrix", "stated_times",
           "top_stated"]  # fmt: skip
