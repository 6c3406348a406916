"""Time in a query: the windows its time expressions mean, read relative to when it is asked.

    read(query, now) -> QueryTime   # windows, events ("before the migration"), asks_when

A small grammar of English time expressions, chosen over ``dateparser`` and ``parsedatetime``
by measurement (``benchmarks/time_phrases.py``, docs/time.md). What it reads:

- relative: ``today``, ``yesterday``, ``this morning``, ``N days / weeks / months / years
  ago`` (N in digits or words, ``a few``, ``a couple of``), ``last / this / past week, month,
  year, weekend, quarter, sprint``, ``the past N days``, ``last Tuesday``, ``on Friday``;
- absolute: ``2023-05-01``, ``5 May 2023``, ``May 5th``, ``in March``, ``early June``,
  ``March 2023``, ``in 2022``, seasons (``during the summer``) and holidays (``Valentine's
  day``, ``Christmas``, ``Thanksgiving``, Easter and the days around it);
- open windows: a relation word before any of those (``since March``, ``before 2023``);
- events: ``before / after / since`` anything else (``before the migration``): returned for the
  caller to find (:mod:`retrieval.timeline.timeprior` searches the event and uses its date).

A date without a year, a month, a weekday or a holiday means the latest one not after ``now``.
Future expressions (``tomorrow``, ``next week``) give no window: records are written in the
past; so is a present period in a text about what is to come ("what should I cook this
weekend?"). A plural weekday (``on Tuesdays``) is a habit, not a date. ``asks_when``: the
question asks for a date ("when did …", "how many days ago …").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

DAY = timedelta(days=1)
SPRINT_DAYS = 14  # "this sprint": the last two weeks
MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december"]  # fmt: skip
_ABBR = {"jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9,
         "sept": 9, "oct": 10, "nov": 11, "dec": 12}  # fmt: skip
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
           "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
           "a couple of": 2, "a couple": 2, "couple of": 2, "a few": 3, "few": 3,
           "several": 4}  # fmt: skip
UNITS = {"day": 1.0, "week": 7.0, "month": 30.44, "year": 365.25}
SEASONS = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}  # first month

# relation word -> side of the window (until: up to its end; before: up to its start)
RELATIONS = {"before": "before", "prior to": "before", "until": "before", "till": "before",
             "after": "after", "since": "after", "following": "after"}  # fmt: skip
_REL = "|".join(sorted(RELATIONS, key=len, reverse=True))
_MONTH = "|".join(MONTHS)
_MON = "|".join([*MONTHS, *_ABBR])
_NUM = r"\d+|" + "|".join(sorted((re.escape(k) for k in NUMBERS), key=len, reverse=True))
_ORD = r"(\d{1,2})(?:st|nd|rd|th)?"
_PREP = r"(?:in|during|on|of|from|through|throughout|around|by|last|this)"


@dataclass(frozen=True)
class Window:
    """``[start, end)`` in UTC; ``None`` is open (since ever / up to any time)."""

    start: datetime | None
    end: datetime | None
    phrase: str


@dataclass(frozen=True)
class Event:
    """``before the migration``: records from before (or after) the date of the event."""

    relation: str  # "before" | "after"
    text: str  # the words naming the event
    phrase: str


@dataclass
class QueryTime:
    windows: list[Window] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    asks_when: bool = False

    def __bool__(self) -> bool:
        return bool(self.windows or self.events or self.asks_when)


# ---------------------------------------------------------------------------- calendar
def _day(dt: datetime) -> datetime:
    return datetime(dt.year, dt.month, dt.day, tzinfo=UTC)


def _month_start(year: int, month: int) -> datetime:
    return datetime(year + (month - 1) // 12, (month - 1) % 12 + 1, 1, tzinfo=UTC)


def _latest(year: int | None, month: int, day: int | None, now: datetime) -> datetime | None:
    """That date (a day, or a month's start) in ``year``, else the latest not after ``now``."""
    try:
        if year is not None:
            return datetime(year, month, day or 1, tzinfo=UTC)
        this = datetime(now.year, month, day or 1, tzinfo=UTC)
        return this if this <= now else datetime(now.year - 1, month, day or 1, tzinfo=UTC)
    except (ValueError, OverflowError):  # 31 February, the year 0 ("May 0000"), 10000
        return None


def _easter(year: int) -> datetime:
    """Gregorian Easter Sunday (the anonymous Gregorian algorithm)."""
    a, b, c = year % 19, year // 100, year % 100
    d, e = divmod(b, 4)
    g = (b - (b + 8) // 25 + 1) // 3
    h = (19 * a + b - d - g + 15) % 30
    i, k = divmod(c, 4)
    leap = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 22 * leap) // 451
    month, day = divmod(h + leap - 7 * m + 114, 31)
    return datetime(year, month, day + 1, tzinfo=UTC)


def _fixed(month: int, day: int) -> Callable[[int], datetime]:
    return lambda y: datetime(y, month, day, tzinfo=UTC)


def _thanksgiving(year: int) -> datetime:  # the fourth Thursday of November
    first = datetime(year, 11, 1, tzinfo=UTC)
    return first + timedelta(days=(3 - first.weekday()) % 7 + 21)


HOLIDAYS: dict[str, Callable[[int], datetime]] = {
    r"valentine'?s(?: day)?": _fixed(2, 14),
    r"christmas eve": _fixed(12, 24),
    r"christmas(?: day)?": _fixed(12, 25),
    r"new year'?s eve": _fixed(12, 31),
    r"new year'?s(?: day)?": _fixed(1, 1),
    r"halloween": _fixed(10, 31),
    r"independence day|(?:the )?(?:fourth|4th) of july": _fixed(7, 4),
    r"thanksgiving(?: day)?": _thanksgiving,
    r"easter(?: sunday)?": _easter,
    r"good friday": lambda y: _easter(y) - 2 * DAY,
    r"maundy thursday": lambda y: _easter(y) - 3 * DAY,
    r"palm sunday": lambda y: _easter(y) - 7 * DAY,
}
_HOLIDAY = "|".join(f"(?:{p})" for p in HOLIDAYS)

Span = tuple[datetime | None, datetime | None]


def _period(today: datetime, now: datetime, which: str, unit: str) -> Span:
    """this / last / past week, weekend, month, quarter, year, sprint."""
    back = which in ("last", "previous")
    if which == "past":  # rolling: the last seven days, thirty days, ...
        if unit == "weekend":
            back = True
        elif unit == "sprint":
            return now - SPRINT_DAYS * DAY, now
        else:
            return now - {"week": 7, "month": 30, "quarter": 91, "year": 365}[unit] * DAY, now
    if unit == "week":
        start = today - timedelta(days=today.weekday()) - (7 * DAY if back else timedelta())
        return start, start + 7 * DAY
    if unit == "weekend":
        sat = today - timedelta(days=(today.weekday() - 5) % 7)
        if back and sat + 2 * DAY > today:
            sat -= 7 * DAY
        return sat, sat + 2 * DAY
    if unit in ("month", "quarter"):
        n = 1 if unit == "month" else 3
        first = today.month - (today.month - 1) % n - (n if back else 0)
        start = _month_start(today.year, first)
        return start, _month_start(start.year, start.month + n)
    if unit == "year":
        y = today.year - back
        return datetime(y, 1, 1, tzinfo=UTC), datetime(y + 1, 1, 1, tzinfo=UTC)
    end = now - SPRINT_DAYS * DAY if back else now  # sprint
    return end - SPRINT_DAYS * DAY, end


def _season(now: datetime, name: str, which: str | None) -> Span | None:
    start = _latest(None, SEASONS[name], 1, now)
    if start is None:  # before the year 1
        return None
    if which in ("last", "previous") and _month_start(start.year, start.month + 3) > now:
        start = start.replace(year=start.year - 1)
    return start, _month_start(start.year, start.month + 3)


def _month(now: datetime, part: str | None, month: int, year: int | None) -> Span | None:
    start = _latest(year, month, None, now)
    if start is None:  # a year off the calendar ("May 0000", a template's placeholder)
        return None
    end = _month_start(start.year, start.month + 1)
    if part in ("early", "beginning of", "start of"):
        end = start + 10 * DAY
    elif part in ("mid", "middle of"):
        start, end = start + 10 * DAY, start + 20 * DAY
    elif part in ("late", "end of"):
        start = start + 20 * DAY
    elif part and part.endswith("week of"):
        n = ["first", "second", "third", "fourth", "last"].index(part.split()[0])
        start = start + 7 * min(n, 3) * DAY
        end = start + 7 * DAY if n < 3 else end
    return start, end


def _ago(now: datetime, n: float, unit: str, fuzzy: bool) -> Span:
    center = now - n * UNITS[unit] * DAY
    if unit == "day":
        return _day(center), _day(center) + DAY
    half = UNITS[unit] / 2 * DAY * (1.5 if fuzzy else 1.0)
    return center - half, center + half


def _weekday(today: datetime, which: str | None, name: str) -> Span:
    back = (today.weekday() - WEEKDAYS.index(name)) % 7
    day = today - timedelta(days=back or 7)  # today's own weekday: a week ago
    return day, day + DAY


def _holiday(now: datetime, phrase: str) -> Span | None:
    for pattern, at in HOLIDAYS.items():
        if re.fullmatch(pattern, phrase):
            day = at(now.year) if at(now.year) <= now else at(now.year - 1)
            return day, day + DAY
    return None


def _number(word: str) -> float:
    word = word.strip()
    return float(word) if word.isdigit() else float(NUMBERS.get(word, 1))


def _month_no(name: str) -> int:
    name = name.rstrip(".")
    return MONTHS.index(name) + 1 if name in MONTHS else _ABBR[name]


def _int(s: str | None) -> int | None:
    return int(s) if s else None


def _day_span(day: datetime | None) -> Span | None:
    return None if day is None else (day, day + DAY)


# ---------------------------------------------------------------------------- the grammar
Rule = tuple[re.Pattern, Callable[[re.Match, datetime, datetime], Span | None]]
RULES: list[Rule] = [
    (re.compile(r"\b(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})\b"),
     lambda m, now, t: _day_span(_latest(int(m[1]), int(m[2]), int(m[3]), now))),
    (re.compile(rf"\b{_ORD}(?: of)? ({_MON})\.?(?:,? (\d{{4}}))?\b"),
     lambda m, now, t: _day_span(_latest(_int(m[3]), _month_no(m[2]), int(m[1]), now))),
    (re.compile(rf"\b({_MON})\.? {_ORD}(?!\d|:| ?(?:am|pm|%|hours?|minutes?|times?)\b)"
                rf"(?:,? (\d{{4}}))?\b"),
     lambda m, now, t: _day_span(_latest(_int(m[3]), _month_no(m[1]), int(m[2]), now))),
    (re.compile(rf"\b(?:(early|mid|late|beginning of|start of|middle of|end of|(?:first|"
                rf"second|third|fourth|last) week of)[- ]|"
                rf"(?:{_REL}|{_PREP}) (?:the )?)({_MONTH})(?:,? (\d{{4}}))?\b"
                rf"|\b({_MONTH}),? (\d{{4}})\b"),
     lambda m, now, t: _month(now, m[1], _month_no(m[2] or m[4]), _int(m[3] or m[5]))),
    (re.compile(rf"\b(?:{_REL}|{_PREP}|the year) ((?:19|20)\d{{2}})\b(?![-/.]\d)"),
     lambda m, now, t: (datetime(int(m[1]), 1, 1, tzinfo=UTC),
                        datetime(int(m[1]) + 1, 1, 1, tzinfo=UTC))),
    (re.compile(rf"\b({_HOLIDAY})\b"), lambda m, now, t: _holiday(now, m[1])),
    (re.compile(r"\b(the day before yesterday|yesterday|today|tonight|this (?:morning|"
                r"afternoon|evening))\b"),
     lambda m, now, t: {"yesterday": (t - DAY, t), "the day before yesterday": (
         t - 2 * DAY, t - DAY)}.get(m[1], (t, t + DAY))),
    (re.compile(rf"\b({_NUM}) (day|week|month|year)s? ago\b"),
     lambda m, now, t: _ago(now, _number(m[1]), m[2], m[1] in ("a few", "few", "several"))),
    (re.compile(rf"\b(?:in |over |during |for )?the (?:past|last) ({_NUM}) "
                r"(day|week|month|year)s\b"),
     lambda m, now, t: (now - _number(m[1]) * UNITS[m[2]] * DAY, now)),
    (re.compile(r"\bthe (?:past|last) (week|weekend|month|year|quarter|sprint)\b"),
     lambda m, now, t: _period(t, now, "past", m[1])),
    (re.compile(r"\b(last|this|past|previous) (week|weekend|month|year|quarter|sprint)\b"
                r"(?! (?:before|after)\b)"),
     lambda m, now, t: _period(t, now, m[1], m[2])),
    (re.compile(rf"\b(?:(?:last|this past|on|past) ({'|'.join(WEEKDAYS)})\b(?!s\b|'s)|"
                rf"({'|'.join(WEEKDAYS)})(?=\s*(?:[.,;:!?]|$)))"),
     lambda m, now, t: _weekday(t, None, m[1] or m[2])),
    (re.compile(r"\b(?:(last|this|this past|the past|during the|in the|over the|of the|"
                r"that) )(spring|summer|fall|autumn|winter)\b"),
     lambda m, now, t: _season(now, m[2], m[1])),
]  # fmt: skip

_EVENT_STOP = frozenset(
    "and or but when while did do does was were is are have has had which what who how if "
    "then so that because".split()
)
_NOT_EVENT = frozenset("that this then it now today ever so long all how".split()) | _EVENT_STOP
# a present period ("this weekend", "today") in a text about what is to come ("what should I
# cook this weekend?", "I'm going to call them today") names the plan's time, not a past one
_PRESENT_PERIOD = re.compile(r"^(?:today|tonight|this (?!past\b)\w+)")
_FUTURE = re.compile(
    r"\b(?:should|shall|will|going to|gonna|plan(?:ning)? to|would like to|want to|wanna)\b"
    r"|\w'll\b"
)
ASKS_WHEN = re.compile(
    r"^\W*(?:when\b|(?:what|which) (?:date|year|month)\b|on what (?:date|day)\b)|"
    r"\bhow (?:long|many (?:days|weeks|months|years)) ago\b|\bhow long ago\b"
)


MAX_CHARS = 4000  # of a text read: its time phrases are in its first lines (a longer query
# reads no windows: retrieval/ranking/longquery.py); with it, a text costs a few ms at most
LOOKBACK = 24  # characters before a match that "the week before" or "since the" may take
_REL_AT = re.compile(rf"({_REL}) ")
_REL_BEFORE = re.compile(rf"\b({_REL})(?: the)? $")
_UNIT_BEFORE = re.compile(r"\bthe (day|week|month|year) $")
_EVENT_WORD = re.compile(r"[\w'#$.-]+|[^\w\s]")


def read(text: str, now: datetime) -> QueryTime:
    """The time expressions of ``text`` (its first :data:`MAX_CHARS` characters) as windows
    relative to ``now`` (see the module). A date off the calendar (the year 0, 31 February,
    beyond the year 9999) is no window."""
    now = now if now.tzinfo else now.replace(tzinfo=UTC)
    low = text[:MAX_CHARS].lower().replace("’", "'")
    today = _day(now)
    taken = _Taken(len(low))
    future = _FUTURE.search(low) is not None
    out = QueryTime()

    for pattern, meaning in RULES:
        for m in pattern.finditer(low):
            if not taken.free(*m.span()):
                continue
            try:
                span = meaning(m, now, today)
            except (OverflowError, ValueError):  # "a million years ago": off the calendar
                continue
            if span is None or (span[0] is not None and span[0] > now):
                continue  # unreadable, or in the future
            start, end = span
            if future and _PRESENT_PERIOD.match(m.group(0)):
                continue
            s = m.start()
            rel = _REL_AT.match(low, s) or _REL_BEFORE.search(low, max(0, s - LOOKBACK), s)
            if rel is not None:  # since March: from March on; before 2023: up to 2023
                s = min(s, rel.start())
                start, end = _beside(rel.group(1), start, end)
                unit = _UNIT_BEFORE.search(low, max(0, s - LOOKBACK), s)
                if unit is not None:  # the week before 16 November: seven days
                    s = unit.start()
                    size = UNITS[unit.group(1)] * DAY
                    start, end = (end - size, end) if start is None else (start, start + size)
            taken.add(s, m.end())
            out.windows.append(Window(start, end, low[s : m.end()].strip()))
    _between(low, out)
    out.events = _events(low, taken)
    out.asks_when = bool(ASKS_WHEN.search(low))
    return out


def _between(low: str, out: QueryTime) -> None:
    """``between <a> and <b>``: the one window from a's start to b's end."""
    ws = out.windows
    for i, (a, b) in enumerate(zip(ws, ws[1:], strict=False)):
        if a.start and b.end and a.start < b.end and f"between {a.phrase} and {b.phrase}" in low:
            merged = Window(a.start, b.end, f"between {a.phrase} and {b.phrase}")
            out.windows = [*ws[:i], merged, *ws[i + 2 :]]
            return


def _beside(relation: str, start: datetime | None, end: datetime | None) -> Span:
    """The open window on one side of ``[start, end)``: before March is before March 1,
    until March up to its end; after March from its end, since March from its start."""
    if RELATIONS[relation] == "before":
        return None, end if relation in ("until", "till") else start
    return start if relation == "since" else end, None


class _Taken:
    """The characters of a text that a phrase already took."""

    def __init__(self, size: int) -> None:
        self.mask = bytearray(size)

    def free(self, start: int, end: int) -> bool:
        return self.mask.find(1, start, end) < 0

    def add(self, start: int, end: int) -> None:
        self.mask[start:end] = b"\x01" * (end - start)


def _events(low: str, taken: _Taken) -> list[Event]:
    """``before / after / since <words>``: up to six words, to a punctuation mark or a word
    that starts another clause ("when", "did", ...)."""
    out = []
    for m in re.finditer(rf"\b({_REL})\s+", low):
        if not taken.free(*m.span()):
            continue
        words: list[str] = []
        end = m.end()
        for w in _EVENT_WORD.finditer(low, m.end()):
            word = w.group(0)
            if not re.match(r"[\w'#$]", word) or word in _EVENT_STOP:
                break
            words.append(word.strip(".'"))
            end = w.end()
            if len(words) == 6 or word.endswith("."):
                break
        if not words or words[0] in _NOT_EVENT or not any(len(w) > 2 for w in words):
            continue
        if not taken.free(m.start(), end):
            continue
        taken.add(m.start(), end)
        out.append(Event(RELATIONS[m.group(1)], " ".join(words), low[m.start() : end]))
    return out


__all__ = ["Event", "QueryTime", "Window", "read"]
