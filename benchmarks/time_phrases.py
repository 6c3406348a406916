"""Which time parser reads the dev sets' temporal questions right, and at what cost.

    python benchmarks/time_phrases.py ../shared/data [--json OUT] [--repeat 20]

The questions: LongMemEval_S temporal-reasoning (68, "now" = the question's date) and LoCoMo
dev category 2 (156, "now" = the conversation's last session date). What each question's time
expressions mean is written by hand in ``benchmarks/data/time_phrases.json`` (every question not
listed there holds none). Parsers, each where importable:

- ``grammar``: ``retrieval.timeline.timeexpr.read`` (windows, open windows, events);
- ``dateparser``: ``dateparser.search.search_dates`` with the question's date as
  ``RELATIVE_BASE`` and ``PREFER_DATES_FROM=past`` (dates as points);
- ``parsedatetime``: ``Calendar.nlp`` with the question's date as ``sourceTime`` (points).

A question is read right when every window of the table is found (a window's centre, or a
point, inside the true window, and no wider than four times it; an open window open on the
same side, its edge within a day) and nothing else is. ``silent`` counts the questions without
any expression that got nothing. Events (``before the migration``) only the grammar reads; they
are counted apart. Cost: each parser over every question, ``--repeat`` times; the import's time
and memory in a fresh interpreter.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.harness.data import locomo_date, locomo_sessions, session_date  # noqa: E402
from benchmarks.harness.report import write_json  # noqa: E402
from retrieval.timeline import timeexpr  # noqa: E402

GOLD = ROOT / "benchmarks" / "data" / "time_phrases.json"
Found = list[tuple[datetime | None, datetime | None]]


def questions(data: Path) -> list[dict]:
    """(set, id, question, now) of every temporal question of both sets."""
    out = []
    for line in open(data / "longmemeval_s" / "questions.jsonl", encoding="utf-8"):
        q = json.loads(line)
        if q["question_type"] == "temporal-reasoning" and not q["question_id"].endswith("_abs"):
            out.append({"set": "longmemeval", "id": q["question_id"], "question": q["question"],
                        "now": session_date(q["question_date"])})  # fmt: skip
    for conv in json.loads((data / "locomo" / "locomo_dev.json").read_text(encoding="utf-8")):
        sessions = locomo_sessions(conv["conversation"])
        now = locomo_date(sessions[-1][1]) if sessions else None
        for i, qa in enumerate(conv.get("qa", [])):
            if qa.get("category") == 2 and now is not None:
                out.append({"set": "locomo", "id": f"{conv['sample_id']}#{i}",
                            "question": qa["question"], "now": now})  # fmt: skip
    return out


def grammar(text: str, now: datetime) -> tuple[Found, list[str]]:
    got = timeexpr.read(text, now)
    return [(w.start, w.end) for w in got.windows], [e.relation for e in got.events]


def dateparser_points(text: str, now: datetime) -> tuple[Found, list[str]]:
    from dateparser.search import search_dates

    found = search_dates(text, languages=["en"], settings={
        "RELATIVE_BASE": now.replace(tzinfo=None), "PREFER_DATES_FROM": "past",
        "RETURN_AS_TIMEZONE_AWARE": False}) or []  # fmt: skip
    return [(d.replace(tzinfo=UTC), None) for _, d in found], []


def parsedatetime_points(text: str, now: datetime) -> tuple[Found, list[str]]:
    import parsedatetime

    cal = parsedatetime.Calendar(version=parsedatetime.VERSION_CONTEXT_STYLE)
    found = cal.nlp(text, sourceTime=now.replace(tzinfo=None)) or ()
    return [(d.replace(tzinfo=UTC), None) for d, *_ in found], []


PARSERS = {"grammar": grammar, "dateparser": dateparser_points,
           "parsedatetime": parsedatetime_points}  # fmt: skip
IMPORTS = {"grammar": "retrieval.timeline.timeexpr", "dateparser": "dateparser.search",
           "parsedatetime": "parsedatetime"}  # fmt: skip


def _day(s: str | None) -> datetime | None:
    return None if s is None else datetime.fromisoformat(s).replace(tzinfo=UTC)


def matches(found: tuple, true: list) -> bool:
    start, end = found
    ts, te = _day(true[0]), _day(true[1])
    if ts is None or te is None:  # an open window: open on the same side, edge within a day
        edge, got = (te, end) if ts is None else (ts, start)
        other = start if ts is None else end
        return other is None and got is not None and abs(got - edge) <= timedelta(days=1)
    if start is None:
        return False
    if end is None:  # a point
        return ts <= start < te
    center = start + (end - start) / 2
    return ts <= center <= te and (end - start) <= 4 * (te - ts)


def judge(found: Found, true: list) -> bool:
    """Every true window found by one of ``found``, and nothing else found."""
    if len(found) != len(true):
        return False
    return all(any(matches(f, t) for f in found) for t in true)


def cost(name: str, qs: list[dict], repeat: int) -> dict:
    fn = PARSERS[name]
    times = []
    for _ in range(repeat):
        for q in qs:
            t0 = time.perf_counter()
            fn(q["question"], q["now"])
            times.append(1000 * (time.perf_counter() - t0))
    times.sort()
    code = (
        "import resource, time\n"
        "def rss():\n"
        "    return int(open('/proc/self/statm').read().split()[1]) * resource.getpagesize()\n"
        f"r, t = rss(), time.perf_counter()\nimport {IMPORTS[name]}\n"
        "print(time.perf_counter() - t, (rss() - r) / 2**20)"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         check=True).stdout.split()  # fmt: skip
    return {"p50_ms": round(statistics.median(times), 3),
            "p95_ms": round(times[int(0.95 * (len(times) - 1))], 3),
            "import_s": round(float(run[0]), 3), "import_rss_mb": round(float(run[1]), 1)}  # fmt: skip


def evaluate(name: str, qs: list[dict], gold: dict) -> dict:
    fn = PARSERS[name]
    res = {"with_time": 0, "read_right": 0, "without_time": 0, "silent": 0, "events": 0,
           "events_found": 0, "wrong": []}  # fmt: skip
    for q in qs:
        true = gold[q["set"]].get(q["id"], {})
        found, events = fn(q["question"], q["now"])
        windows = true.get("windows", [])
        if windows:
            res["with_time"] += 1
            ok = judge(found, windows)
            res["read_right"] += ok
        else:
            res["without_time"] += 1
            ok = not found
            res["silent"] += ok
        if true.get("events"):
            res["events"] += 1
            res["events_found"] += sorted(events) == sorted(true["events"])
        if not ok:
            res["wrong"].append({"id": q["id"], "question": q["question"],
                                 "found": [[str(s) if s else None, str(e) if e else None]
                                           for s, e in found]})  # fmt: skip
    res["accuracy"] = round((res["read_right"] + res["silent"]) / max(1, len(qs)), 4)
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data", help="the data folder (../shared/data)")
    p.add_argument("--json", metavar="OUT")
    p.add_argument("--repeat", type=int, default=20, help="passes over the questions for cost")
    args = p.parse_args(argv)
    gold = json.loads(GOLD.read_text(encoding="utf-8"))
    qs = questions(Path(args.data))
    print(f"{len(qs)} temporal questions "
          f"({sum(q['set'] == 'longmemeval' for q in qs)} LongMemEval, "
          f"{sum(q['set'] == 'locomo' for q in qs)} LoCoMo)")  # fmt: skip
    results = {}
    for name in PARSERS:
        try:
            __import__(IMPORTS[name])
        except ImportError:
            print(f"{name}: not installed, skipped")
            continue
        res = evaluate(name, qs, gold)
        res.update(cost(name, qs, args.repeat))
        results[name] = res
        print(f"{name:<14} accuracy {res['accuracy']:.3f}  windows read right "
              f"{res['read_right']}/{res['with_time']}  silent {res['silent']}/"
              f"{res['without_time']}  events {res['events_found']}/{res['events']}  "
              f"p50 {res['p50_ms']:.3f} ms  p95 {res['p95_ms']:.3f} ms  import "
              f"{res['import_s']:.3f} s  +{res['import_rss_mb']} MB")  # fmt: skip
    if args.json:
        write_json(args.json, results)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
