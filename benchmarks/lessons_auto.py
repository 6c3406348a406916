"""Lessons learned from sessions, replayed on real bugs: Defects4J through the session indexer.

    python benchmarks/lessons_auto.py FILE [--projects Chart,Lang] [--controls N]
        [--runner-controls N] [--json OUT]

``FILE``: ``defects4j_errors_fixes.jsonl`` (one bug per line: ``project``, ``bug_id``,
``trigger_tests`` [{test, trace}], ``src_patch``). For every bug (``benchmarks/d4j_sessions.py``)
a Claude Code transcript of its fix session: its first failing test reported, run, failing with
the real trace, the real patch applied as Edit calls, the test passing, the fix stated in one
sentence. Negative controls in the same store (``--controls N`` bugs of each kind, default
all): the test never passes; another test passes; the agent only reads files and the test
passes; the agent edits only ``README.md`` or ``docs/notes.md`` and the test passes. And
(``--runner-controls N`` bugs of each kind, default 60) the bug's failure written for pytest,
cargo, go or jest, the real patch applied, then a pass that leaves the failing test out
(``-k "not X"``, ``--deselect``, ``-m "not …"``, ``--ignore``, ``--ignore-glob``, ``cargo
test -- --skip``, ``go test -skip``, ``--testPathIgnorePatterns``), whose summary counts it
skipped, xfailed or deselected, that has one test fewer, or that runs less in a hostile way
(``|| true`` cut short, ``; exit 0``, ``--co``, ``--lf``, ``SKIP_SLOW=1``):
``benchmarks/lesson_controls.py``. All sessions are in one project (``cwd`` ``/defects4j``),
as the similar-error benchmark keeps all the bugs' lessons in one graph. Positive controls of
the same runners (``pytest -k X``, the failing node id, ``cargo test X``, ``go test -run X``
after the fix) are read by the episode detector alone and never stored:
``runner_fix_episodes`` of ``runner_fix_sessions`` must hold an episode.

Each transcript is indexed by the session indexer exactly as ``index-sessions`` indexes a
user's (``SessionIndexer.index_file`` with the identity its ``cwd`` gives, ``flush``, ``final``),
which hands it to the episode detector on the hook worker (``HookService``,
``PATTERN_AUTO_LESSONS=on``). Then every *other* failing test of a bug (the 785 queries of the
similar-error benchmark) is asked

- through ``find_similar_errors`` (its trace, its failing test as context): ``recall@1`` /
  ``recall@10`` of the lesson holding the bug's episode; ``fix_names_patched_file``: of those
  retrieved in the first 10, the share whose fix (explanation, changed files) names a file of
  the bug's patch;
- through the PostToolUseFailure hook's own handler (``HookService.handle``, one session per
  query, the failing ``defects4j test -t`` as its command and output): ``hook_injected``, the
  share where the bug's lesson is injected.

Queries, and the lessons recorded by hand, read a trace's first 12 lines, as the similar-error
benchmark's set holds them; the fix sessions' transcripts hold the whole traces.
``hand_recorded_recall@10``: the same queries against lessons recorded by hand with
``create_lesson`` from the same bugs (``benchmarks/relevance.py errors``' lessons). ``episodes``:
fix sessions in which the detector finds an episode (read on its own); ``lessons_created``:
the share of those episodes held by a lesson of the store (a new one, or an occurrence of one
with the same signature);
``false_lessons``: lessons or occurrences learned from control sessions (must be 0; per kind
in ``false_lessons_by_kind``).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import d4j_sessions as d4j  # noqa: E402
from benchmarks import lesson_controls as lc  # noqa: E402
from benchmarks.harness.embed_cache import make_embedder  # noqa: E402
from benchmarks.harness.report import write_json  # noqa: E402
from benchmarks.relevance import error_pattern  # noqa: E402

CWD = "/defects4j"
CONTROLS = ("never", "other", "reads")
RUNNER_CONTROLS = 60  # bugs given each runner control (default)
TRACE_LINES = 12  # a query's trace, and a hand-recorded lesson's: its first lines, as in the
# similar-error benchmark's BEIR set (beir_same_bug holds each trace's first 12 lines)


def head(trace: str) -> str:
    return "\n".join(trace.strip("\n").splitlines()[:TRACE_LINES])


def load(path: str, projects: list[str] | None) -> list[dict]:
    bugs = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    if projects:
        keep = {p.lower() for p in projects}
        bugs = [b for b in bugs if b["project"].lower() in keep]
    return [b for b in bugs if b.get("trigger_tests")]


def bug_id(b: dict) -> str:
    return f"{b['project']}-{b['bug_id']}"


def queries(bugs: list[dict]) -> list[tuple[str, str, str]]:
    """(bug, failing test, trace) of every failing test but the first of each bug."""
    return [(bug_id(b), t["test"], head(t["trace"])) for b in bugs for t in b["trigger_tests"][1:]]


def write_sessions(bugs: list[dict], folder: Path, controls: int,
                   runner_controls: int = RUNNER_CONTROLS, seed: int = 7) -> dict:  # fmt: skip
    """{path: (bug, kind)} of every session written (the stored ones: fixes and negative
    controls)."""
    out: dict[Path, tuple[str, str]] = {}
    rng = random.Random(seed)
    for b in bugs:
        out[d4j.session(b, "fix", folder, CWD)] = (bug_id(b), "fix")
    sample = rng.sample(bugs, min(controls, len(bugs))) if controls >= 0 else bugs
    by_project: dict[str, list[dict]] = {}
    for b in bugs:
        by_project.setdefault(b["project"], []).append(b)
    for b in sample:
        test = b["trigger_tests"][0]["test"]
        others = [o["trigger_tests"][0]["test"] for o in by_project[b["project"]]
                  if o["trigger_tests"][0]["test"] != test]  # fmt: skip
        for kind in CONTROLS:
            other = rng.choice(others) if others else None
            out[d4j.session(b, kind, folder, CWD, other)] = (bug_id(b), kind)
        for kind in lc.DOC_KINDS:
            out[lc.session(b, kind, folder, CWD)] = (bug_id(b), kind)
    for kind in lc.RUNNER_KINDS:
        for b in random.Random(f"{seed}-{kind}").sample(bugs, min(runner_controls, len(bugs))):
            out[lc.session(b, kind, folder, CWD)] = (bug_id(b), kind)
    return out


def write_positives(bugs: list[dict], folder: Path, runner_controls: int, seed: int = 7) -> list:
    """The positive runner controls (read by the detector alone, never stored)."""
    out = []
    for kind in lc.POSITIVE_KINDS:
        for b in random.Random(f"{seed}-{kind}").sample(bugs, min(runner_controls, len(bugs))):
            if any(h.fixed != h.buggy for h in d4j.hunks(b.get("src_patch") or "")):
                out.append(lc.session(b, kind, folder, CWD))
    return out


def learned_lessons(svc, who) -> dict[str, dict]:
    """{lesson name: its learned block} of the project's team graph."""
    rows = svc.store.reader.execute(
        "SELECT name, extra FROM lessons WHERE bucket=?", (who.bucket("team"),)
    ).fetchall()
    out = {}
    for r in rows:
        block = json.loads(r["extra"]).get("lesson", {}).get("learned")
        if isinstance(block, dict):
            out[r["name"]] = block
    return out


def detected(paths: list[Path]) -> list[str]:
    """The sessions in which the episode detector finds an episode (read on its own, without
    the store: what there was to learn)."""
    from ingest.learning.episode_events import FeedProgress, read_events
    from ingest.learning.episodes import SessionEpisodes, feed, finish

    out = []
    for path in paths:
        events, _ = read_events(path, FeedProgress(), final=True)
        states: dict[str, SessionEpisodes] = {}
        for session, ev in events:
            feed(states.setdefault(session, SessionEpisodes(session=session, cwd=CWD)), ev)
        for st in states.values():
            finish(st)
            out += [st.session] if st.ready else []
    return out


def recall_rows(ranked: list[str], relevant: set[str]) -> dict:
    return {"recall@1": float(bool(ranked[:1]) and ranked[0] in relevant),
            "recall@10": float(any(n in relevant for n in ranked[:10]))}  # fmt: skip


def run(args, embedder=None) -> dict:
    """The replay (module docstring); ``embedder``: the real model unless given (tests)."""
    from retrieval.engine import Engine
    from server.service.core.identity import Identity, identity_fields
    from server.service.graphs.graph_services import graph_services
    from server.service.memories.memory import MemoryService
    from server.service.prompting.hook_context import HookConfig
    from server.service.prompting.hook_events import HookRequest, HookService

    bugs = load(args.file, args.projects.split(",") if args.projects else None)
    qs = queries(bugs)
    embedder = embedder or make_embedder(not args.no_cache)
    who = Identity(**identity_fields({}, CWD), root=None)
    result: dict = {"bugs": len(bugs), "queries": len(qs)}
    runner_controls = getattr(args, "runner_controls", RUNNER_CONTROLS)
    with tempfile.TemporaryDirectory(prefix="pm-bench-auto-") as tmp:
        folder = Path(tmp) / "sessions"
        sessions = write_sessions(bugs, folder, args.controls, runner_controls)
        positives = write_positives(bugs, Path(tmp) / "positive", runner_controls)
        engine = Engine(Path(tmp) / "store", embedder)
        try:
            svc = MemoryService(engine)
            gs = graph_services(svc)
            hooks = HookService(svc, gs, auto_lessons="on")
            t0 = time.perf_counter()
            for path in sessions:
                hooks.indexer.index_file(who, path, flush=True, final=True)
            hooks.drain()
            result["index_seconds"] = round(time.perf_counter() - t0, 1)
            learned = learned_lessons(svc, who)
            holds: dict[str, set[str]] = {}  # session -> lessons holding its episode
            for name, block in learned.items():
                for s in [
                    block.get("session"),
                    *(x.get("session") for x in block.get("seen") or []),
                ]:
                    holds.setdefault(str(s), set()).add(name)
            fix = {bug: str(p.stem) for p, (bug, kind) in sessions.items() if kind == "fix"}
            ctrl = [p.stem for p, (_b, kind) in sessions.items() if kind != "fix"]
            relevant = {bug: holds.get(s, set()) for bug, s in fix.items()}
            found = detected([p for p, (_b, kind) in sessions.items() if kind == "fix"])
            kinds = {p.stem: kind for p, (_b, kind) in sessions.items() if kind != "fix"}
            by_kind: dict[str, list[int]] = {}
            for stem, kind in kinds.items():
                by_kind.setdefault(kind, [0, 0])
                by_kind[kind][0] += 1
                by_kind[kind][1] += len(holds.get(stem, ()))
            result.update({
                "fix_sessions": len(fix),
                "episodes": len(found),
                "lessons_created": round(sum(bool(holds.get(s)) for s in found) / max(1, len(found)), 4),
                "fix_sessions_with_a_lesson": sum(bool(v) for v in relevant.values()),
                "new_lessons": len(learned),
                "false_lessons": sum(len(holds.get(s, ())) for s in ctrl),
                "control_sessions": len(ctrl),
                "controls_by_kind": {k: v[0] for k, v in sorted(by_kind.items())},
                "false_lessons_by_kind": {k: v[1] for k, v in sorted(by_kind.items())},
                "runner_fix_sessions": len(positives),
                "runner_fix_episodes": len(detected(positives)),
            })  # fmt: skip
            result.update(ask(svc, gs, hooks, who, qs, relevant, learned, bugs, HookRequest,
                              HookConfig))  # fmt: skip
        finally:
            hooks.close()
            engine.close()
        result["hand_recorded_recall@10"] = hand_recorded(bugs, qs, embedder, Path(tmp))
        if args.latency:
            result["latency"] = latency(args.latency, bugs, qs, who, embedder, Path(tmp))
    return result


def latency(n: int, bugs: list[dict], qs, who, embedder, tmp: Path) -> dict:
    """The hooks timed over the replay's store (``benchmarks/lessons_latency.py``)."""
    from benchmarks import lessons_latency as lat
    from retrieval.engine import Engine
    from server.service.memories.memory import MemoryService

    by_id = {bug_id(b): b for b in bugs}
    picked = random.Random(3).sample(qs, min(n + 50, len(qs)))
    cases = [(by_id[b], t, tr) for b, t, tr in picked]
    out = lat.measure(tmp / "store", who, cases[:n], tmp / "latency", CWD,
                      trip_cases=cases[n:])  # fmt: skip
    engine = Engine(tmp / "store", embedder)
    try:
        out.update(lat.learned_after(MemoryService(engine), who, n))
    finally:
        engine.close()
    return out


def ask(svc, gs, hooks, who, qs, relevant, learned, bugs, HookRequest, HookConfig) -> dict:  # noqa: N803
    patched = {bug_id(b): {Path(h.path).name for h in d4j.hunks(b.get("src_patch") or "")}
               for b in bugs}  # fmt: skip
    from server.service.learning import failure_lessons as fl

    rows, named, injected, gate = [], [], [], []
    for i, (bug, test, trace) in enumerate(qs):
        res = gs.lessons.find_similar_errors(who, error_pattern(trace, test), limit=10)
        ranked = [m.name for m in res.lessons]
        rel = relevant.get(bug, set())
        rows.append(recall_rows(ranked, rel))
        for m in res.lessons:
            if m.name in rel:
                fix = learned.get(m.name, {}).get("fix") or {}
                text = " ".join([fix.get("explanation") or "", *(fix.get("files") or [])])
                named.append(any(f in text for f in patched.get(bug, ())))
        inp = {"session_id": f"query-{i}", "cwd": CWD, "hook_event_name": "PostToolUseFailure",
               "tool_name": "Bash", "tool_input": {"command": d4j.test_command(test)},
               "tool_use_id": f"toolu_query_{i}", "error": d4j.failed_output(test, trace)}  # fmt: skip
        answer = hooks.handle(who, HookRequest(event="PostToolUseFailure", input=inp,
                                               config=HookConfig()))  # fmt: skip
        recs = svc.store.get(answer.injected)
        injected.append(any(r.entity_name in rel for r in recs.values()))
        gate.append(judged_relevant(svc, who, fl, d4j.failed_output(test, trace),
                                    d4j.test_command(test), rel))  # fmt: skip
    n = max(1, len(rows))
    got = [g for g in gate if g is not None]
    return {
        "recall@1": round(sum(r["recall@1"] for r in rows) / n, 4),
        "recall@10": round(sum(r["recall@10"] for r in rows) / n, 4),
        "fix_names_patched_file": round(sum(named) / max(1, len(named)), 4),
        "hook_injected": round(sum(injected) / n, 4),
        "hook_detail": {  # why the hook injects the bug's lesson or not
            "relevant_among_candidates": round(sum(g["candidate"] for g in got) / n, 4),
            "relevant_clears_threshold": round(sum(g["clears"] for g in got) / n, 4),
        },
    }


def judged_relevant(svc, who, fl, output: str, command: str, rel: set[str]) -> dict | None:
    """Why the hook injects a query's bug lesson or not: whether the lesson search of the
    failure's query (``hook_context.lesson_scores`` of ``failure_lessons.query_text``, the
    hook's one search) returns it, and whether its relevance clears the threshold."""
    from retrieval.records import Kind, RecordFilter
    from server.service.prompting.hook_context import lesson_scores

    if not rel:
        return None
    pattern = fl.pattern_of(*fl.failure_query(output, command, CWD))
    ids = {r["record_id"] for r in svc.store.reader.execute(
        "SELECT name, record_id FROM lessons WHERE bucket=?", (who.bucket("team"),))
        if r["name"] in rel}  # fmt: skip
    f = RecordFilter(buckets=[who.bucket("team")], kinds=[Kind.lesson])
    scores = lesson_scores(svc, f, fl.query_text(pattern))
    best = max([scores.get(i, 0.0) for i in ids] or [0.0])
    return {"candidate": any(i in scores for i in ids),
            "clears": best >= fl.DEFAULT_LESSON_THRESHOLD}  # fmt: skip


def hand_recorded(bugs: list[dict], qs, embedder, tmp: Path) -> float:
    """recall@10 of the same queries over lessons made with create_lesson from the same bugs
    (the similar-error benchmark's lessons)."""
    from benchmarks.relevance import BenchCaller
    from graph.entities import GraphService
    from graph.lessons import LessonService
    from retrieval.engine import Engine

    who = BenchCaller("errors-hand")
    engine = Engine(tmp / "hand", embedder)
    try:
        lessons = LessonService(GraphService(engine))
        docs = [{"name": bug_id(b), "entityType": "lesson", "observations": [],
                 "errorPattern": error_pattern(head(b["trigger_tests"][0]["trace"]),
                                               b["trigger_tests"][0]["test"]),
                 "metadata": {"severity": "medium", "frequency": 1, "successRate": 1.0,
                              "environment": {"project": b["project"]}},
                 "verificationSteps": []} for b in bugs]  # fmt: skip
        for i in range(0, len(docs), 500):
            lessons.create_lessons(who, docs[i : i + 500])
        hits = 0
        for bug, test, trace in qs:
            res = lessons.find_similar_errors(who, error_pattern(trace, test), limit=10)
            hits += any(m.name == bug for m in res.lessons)
        return round(hits / max(1, len(qs)), 4)
    finally:
        engine.close()


KEYS = ("episodes", "lessons_created", "false_lessons", "recall@1", "recall@10",
        "fix_names_patched_file", "hook_injected", "hand_recorded_recall@10")  # fmt: skip


def table(r: dict) -> str:
    """The measures beside their targets."""
    lat = r.get("latency") or {}
    rows = [
        ("fix sessions with an episode", f"{r['episodes']} of {r['fix_sessions']}", ""),
        ("lessons created for episodes", f"{r['lessons_created']:.3f}", ">= 0.95"),
        ("false lessons (control sessions)", f"{r['false_lessons']} of {r['control_sessions']}",
         "0"),
        ("runner fixes with an episode", f"{r['runner_fix_episodes']} of "
         f"{r['runner_fix_sessions']}", "all"),
        ("recall@1 / recall@10, learned", f"{r['recall@1']:.3f} / {r['recall@10']:.3f}", ""),
        ("recall@10, recorded by hand", f"{r['hand_recorded_recall@10']:.3f}",
         "learned within 0.03"),
        ("fix names the patched file", f"{r['fix_names_patched_file']:.3f}", ">= 0.95"),
        ("failure hook injects the bug's lesson", f"{r['hook_injected']:.3f}", ""),
    ]  # fmt: skip
    if lat:
        rows += [
            ("PostToolUseFailure p50 / p95 ms", f"{lat['post_tool_use_failure_p50_ms']:.1f} / "
             f"{lat['post_tool_use_failure_p95_ms']:.1f}", "p50 <= 60"),
            ("PostToolUse p50 / p95 ms", f"{lat['post_tool_use_p50_ms']:.1f} / "
             f"{lat['post_tool_use_p95_ms']:.1f}", "p50 <= 60"),
            ("load average", f"{lat['loadavg']:.2f}", ""),
        ]  # fmt: skip
    width = max(len(a) for a, _, _ in rows)
    return "\n".join(f"  {a:<{width}}  {b:>16}  {c}" for a, b, c in rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", help="defects4j_errors_fixes.jsonl")
    ap.add_argument("--projects", help="comma-separated projects (default: all)")
    ap.add_argument("--controls", type=int, default=-1,
                    help="bugs given each control session (default: every bug)")  # fmt: skip
    ap.add_argument("--runner-controls", type=int, default=RUNNER_CONTROLS, metavar="N",
                    help="bugs given each runner control, negative and positive")  # fmt: skip
    ap.add_argument("--latency", type=int, default=0, metavar="N",
                    help="time the failed-command hooks on N query sessions (a daemon)")  # fmt: skip
    ap.add_argument("--no-cache", action="store_true", help="do not use .bench-cache")
    ap.add_argument("--json", help="write the result here")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    result = run(args)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    out = {**{k: result[k] for k in KEYS}, "details": result}
    print(json.dumps({k: result[k] for k in KEYS}))
    print(table(result))
    write_json(args.json, {
        "benchmark": "lessons_auto.py",
        "command": "python benchmarks/lessons_auto.py " + " ".join(argv or sys.argv[1:]),
        "data": f"{Path(args.file).name}: {result['bugs']} bugs, {result['queries']} other "
                "failing traces as queries",
        "model": "all-MiniLM-L6-v2",
        "result": out,
    })  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
