"""Citations against a real history: statuses vs the truth from ``git diff``, and their cost.

    python benchmarks/citations.py [--pairs 8] [--gap 15] [--per-pair 600] [--ref REV]
                                   [--json OUT] [--details OUT] [--ranking OUT]

The test data is this repository's own history, replayed in a temporary clone (nothing is
committed). For each pair of first-parent commits ``gap`` apart (``--pairs`` of them, spread over
the history), every Python function and method at the old commit (its range from ``ast``,
decorators included; a seeded sample of ``--per-pair``) is cited by a memory written through the
service at the old commit. The clone then checks out the new commit and the service checks
every citation (``CitationService.states``, what recall runs).

Truth, from ``git diff -U0 --no-renames OLD NEW``: the file deleted -> ``deleted``; a hunk that
touches the cited range -> ``changed``, unless the hunk only changes whitespace (the normalized
lines are equal: re-indentation) or the whole cited block reappears verbatim (normalized) among
the added lines of a hunk (git's "moved block") -> ``moved``; otherwise the lines shifted by the
hunks before them -> ``moved``, or did not -> ``fresh``.

Reported (JSON keys): ``n`` citations, ``precision_stale`` / ``recall_stale`` (stale = changed
or deleted), ``moved_detected`` (truth-moved recognised as moved), ``check_ms_p95``: the added
recall latency, a check of 10 cited items (``states`` over 10 random memories) with a warm
page cache once their statuses are known (one ``stat`` per file). ``--details`` also writes the
confusion matrix, the latency after touching the files' mtimes (hash + write-back), a bare
10-``stat`` baseline of the same run, and the fuzzy re-anchoring table that chose
``retrieval.cite.FUZZY_MIN``. ``--ranking OUT`` runs the stale-factor measurement with the real
model (docs/benchmarks.md, "Citations").
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.citations_diff import git, parse_diff, truth  # noqa: E402
from benchmarks.harness.report import write_json  # noqa: E402
from retrieval.cite import anchor, locate, read_lines  # noqa: E402
from server.service.core.runtime import Runtime  # noqa: E402
from server.service.memories.bulk import remember_bulk  # noqa: E402

STALE = {"changed", "deleted"}


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


# ---------------------------------------------------------------------- code units
def functions(text: str) -> list[tuple[str, int, int]]:
    """(qualified name, first line incl. decorators, last line) of every function/method."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    out = []

    def walk(node, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                out.append((f"{prefix}{child.name}", start, child.end_lineno))
                walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")

    walk(tree, "")
    return out


# ---------------------------------------------------------------------- one pair
@dataclass
class Cited:
    path: str
    qualname: str
    start: int
    end: int
    truth: str = ""
    why: str = ""
    predicted: str = ""
    memory_id: str = ""


def runtime_for(home: Path, repo: Path) -> Runtime:
    env = {
        "PATTERN_HOME": str(home), "PATTERN_EMBEDDER": "none", "PATTERN_PROJECT_ID": "bench",
        "PATTERN_AGENT_ID": "bench-agent", "PATTERN_DISABLE_CONTENT_SCAN": "true",
    }  # fmt: skip
    return Runtime.start(env, cwd=repo, model="off")


def cite_all(rt: Runtime, items: list[Cited]) -> None:
    who = rt.identity
    for i in range(0, len(items), 1000):
        part = items[i : i + 1000]
        res = remember_bulk(
            rt.service, who,
            [{"content": f"{c.qualname}: what it does and why (benchmark memory {i + j})",
              "citations": [{"path": c.path, "startLine": c.start, "endLine": c.end}]}
             for j, c in enumerate(part)],
        )  # fmt: skip
        assert res.stored == len(part), res.errors[:3]
        for c, mid in zip(part, res.memoryIds, strict=True):
            c.memory_id = mid


def time_checks(
    rt: Runtime, ids: list[str], rounds: int, rng, touch: Path | None, cpu: list | None = None
) -> list[float]:
    """ms per ``states`` call over 10 random cited memories; ``touch``: the repo whose cited
    files get a new (settled, in the past) mtime before each call, forcing a hash. ``cpu``
    collects the calling thread's CPU ms (the work itself, without waiting for a core)."""
    who = rt.identity
    rows = {r["record_id"]: r["abs_path"] for r in rt.citations.rows(ids)}
    out = []
    cpu = [] if cpu is None else cpu
    for k in range(rounds):
        sample = rng.sample(ids, 10)
        if touch is not None:
            t = time.time() - 30 + k * 1e-3
            for rid in sample:
                os.utime(rows[rid], (t, t))
        t0, c0 = time.perf_counter(), time.thread_time()
        rt.citations.states(who, sample)
        out.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.thread_time() - c0) * 1000)
    return out


def run_pair(
    src: Path, old: str, new: str, per_pair: int, rng, work: Path, stats: dict
) -> list[Cited]:
    repo = work / "repo"
    git(repo, "checkout", "-q", "-f", old)
    items: list[Cited] = []
    for path in git(repo, "ls-files", "*.py").split():
        text = (repo / path).read_text(encoding="utf-8", errors="replace")
        items += [Cited(path, q, s, e) for q, s, e in functions(text)]
    if len(items) > per_pair:
        items = rng.sample(items, per_pair)
    diff = parse_diff(
        git(repo, "diff", "-U0", "--no-renames", "--no-color", old, new, "--", "*.py")
    )
    old_lines: dict[str, list[str]] = {}
    for c in items:
        lines = old_lines.setdefault(c.path, read_lines((repo / c.path).read_bytes()) or [])
        c.truth, c.why = truth(diff.get(c.path), c.start, c.end, lines[c.start - 1 : c.end])
    home = work / f"home-{old[:8]}"
    rt = runtime_for(home, repo)
    try:
        cite_all(rt, items)
        git(repo, "checkout", "-q", "-f", new)
        time.sleep(2.1)  # the checkout's mtimes settle (a fresh mtime is re-hashed each time)
        t0 = time.perf_counter()
        states = rt.citations.states(rt.identity, [c.memory_id for c in items])
        stats["first_check_ms_per_item"].append((time.perf_counter() - t0) * 1000 / len(items))
        for c in items:
            c.predicted = states[c.memory_id][0].status
        fuzzy_rows(repo, items, old_lines, stats)
        ids = [c.memory_id for c in items if c.predicted != "deleted"]
        if len(ids) >= 10:
            rt.citations.states(rt.identity, ids)  # warm
            stats["warm_ms"] += time_checks(rt, ids, 200, rng, None, stats["warm_cpu_ms"])
            stats["touched_ms"] += time_checks(rt, ids, 50, rng, repo, stats["touched_cpu_ms"])
            paths = [r["abs_path"] for r in rt.citations.rows(ids[:10])]
            for _ in range(200):
                t0 = time.perf_counter()
                for p in paths:
                    os.stat(p)
                stats["stat_ms"].append((time.perf_counter() - t0) * 1000)
    finally:
        rt.close()
    return items


def fuzzy_rows(repo: Path, items: list[Cited], old_lines: dict, stats: dict) -> None:
    """For truth-changed citations whose function still exists (same qualified name): the
    fuzzy guess's similarity, and whether it overlaps the function's new range."""
    new_funcs: dict[str, dict[str, tuple[int, int]]] = {}
    for c in items:
        if c.truth != "changed":
            continue
        if c.path not in new_funcs:
            try:
                text = (repo / c.path).read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = ""
            new_funcs[c.path] = {q: (s, e) for q, s, e in functions(text)}
        target = new_funcs[c.path].get(c.qualname)
        lines = read_lines((repo / c.path).read_bytes()) if (repo / c.path).exists() else None
        a = anchor(old_lines[c.path], c.start, c.end)
        loc = locate(a, lines, "new", "old")
        if loc.ratio is None:
            continue
        hit = None
        if target is not None and loc.start is not None:
            hit = loc.start <= target[1] and loc.end >= target[0]
        stats["fuzzy"].append((loc.ratio, target is not None, hit))


# ---------------------------------------------------------------------- report
def confusion(items: list[Cited]) -> dict[str, dict[str, int]]:
    table: dict[str, Counter] = {}
    for c in items:
        table.setdefault(c.truth, Counter())[c.predicted] += 1
    return {t: dict(v) for t, v in sorted(table.items())}


def fuzzy_table(rows: list[tuple]) -> list[dict]:
    """Per threshold: how many changed citations get a proposed new place, and how often it
    is right (overlaps the same-named function's new range)."""
    out = []
    exists = [r for r in rows if r[1]]
    for th in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
        proposed = [r for r in rows if r[0] >= th]
        right = [r for r in proposed if r[2]]
        out.append({
            "threshold": th,
            "proposed": len(proposed),
            "right": len(right),
            "precision": round(len(right) / len(proposed), 4) if proposed else None,
            "coverage": round(len([r for r in exists if r[0] >= th and r[2]]) / len(exists), 4)
            if exists else None,
        })  # fmt: skip
    return out


def pairs_of(repo: Path, n: int, gap: int, ref: str = "HEAD") -> list[tuple[str, str]]:
    commits = git(repo, "rev-list", "--first-parent", ref).split()
    starts = list(range(0, max(1, len(commits) - gap)))
    if len(starts) > n:
        step = len(starts) / n
        starts = [starts[int(i * step)] for i in range(n)]
    return [(commits[i + gap], commits[i]) for i in starts if i + gap < len(commits)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=8, help="commit pairs (default 8)")
    ap.add_argument("--gap", type=int, default=15, help="first-parent commits apart (default 15)")
    ap.add_argument("--per-pair", type=int, default=600, help="cited functions per pair")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--repo", default=str(ROOT), help="the git history to replay (default: ours)")
    ap.add_argument("--ref", default="HEAD", help="newest commit of the history (default HEAD)")
    ap.add_argument("--json", dest="json_out")
    ap.add_argument("--details", help="write the confusion matrix and extra timings here")
    ap.add_argument("--ranking", help="run the stale-factor measurement (real model) into OUT")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    stats: dict = {"warm_ms": [], "touched_ms": [], "stat_ms": [], "fuzzy": [],
                   "first_check_ms_per_item": [], "warm_cpu_ms": [], "touched_cpu_ms": []}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="pm-cite-") as tmp:
        work = Path(tmp)
        subprocess.run(["git", "clone", "-q", "--no-checkout", args.repo, str(work / "repo")],
                       check=True)  # fmt: skip
        pairs = pairs_of(work / "repo", args.pairs, args.gap, args.ref)
        items: list[Cited] = []
        for old, new in pairs:
            part = run_pair(Path(args.repo), old, new, args.per_pair, rng, work, stats)
            c = Counter(x.truth for x in part)
            print(f"{old[:8]} -> {new[:8]}: {len(part)} cited, truth {dict(c)}", flush=True)
            items += part
        if args.ranking:
            from benchmarks.citations_ranking import run_ranking

            ranking = run_ranking(work, pairs, rng)
            write_json(args.ranking, ranking)
    tp = sum(c.truth in STALE and c.predicted in STALE for c in items)
    pred = sum(c.predicted in STALE for c in items)
    real = sum(c.truth in STALE for c in items)
    moved = [c for c in items if c.truth == "moved"]
    result = {
        "n": len(items),
        "precision_stale": round(tp / pred, 4) if pred else None,
        "recall_stale": round(tp / real, 4) if real else None,
        "moved_detected": round(sum(c.predicted == "moved" for c in moved) / len(moved), 4)
        if moved else None,
        "check_ms_p95": round(pct(stats["warm_ms"], 95), 3),
    }  # fmt: skip
    details = {
        "pairs": [[o[:12], n[:12]] for o, n in pairs],
        "truth": dict(Counter(c.truth for c in items)),
        "truth reasons": {f"{k[0]}: {k[1]}": v for k, v in
                          sorted(Counter((c.truth, c.why) for c in items).items())},
        "confusion (truth -> predicted)": confusion(items),
        "check_ms_warm": {"p50": round(pct(stats["warm_ms"], 50), 3),
                          "p95": round(pct(stats["warm_ms"], 95), 3)},
        "check_ms_touched": {"p50": round(pct(stats["touched_ms"], 50), 3),
                             "p95": round(pct(stats["touched_ms"], 95), 3)},
        "check_cpu_ms_warm": {"p50": round(pct(stats["warm_cpu_ms"], 50), 3),
                              "p95": round(pct(stats["warm_cpu_ms"], 95), 3)},
        "check_cpu_ms_touched": {"p50": round(pct(stats["touched_cpu_ms"], 50), 3),
                                 "p95": round(pct(stats["touched_cpu_ms"], 95), 3)},
        "baseline_10_stats_ms": {"p50": round(pct(stats["stat_ms"], 50), 4),
                                 "p95": round(pct(stats["stat_ms"], 95), 4)},
        "first_check_ms_per_item": round(statistics.mean(stats["first_check_ms_per_item"]), 3)
        if stats["first_check_ms_per_item"] else None,
        "fuzzy": fuzzy_table(stats["fuzzy"]),
        "load": os.getloadavg(),
    }  # fmt: skip
    print("\ntruth from git diff, by reason:")
    for k, v in details["truth reasons"].items():
        print(f"  {k}: {v}")
    print("\nconfusion (rows: truth from git diff, columns: predicted)")
    cols = ["fresh", "moved", "changed", "deleted"]
    print(f"{'':>10}" + "".join(f"{c:>10}" for c in cols))
    for t, row in details["confusion (truth -> predicted)"].items():
        print(f"{t:>10}" + "".join(f"{row.get(c, 0):>10}" for c in cols))
    print("\nfuzzy re-anchoring of changed code (threshold: proposed, right, precision, coverage)")
    for r in details["fuzzy"]:
        print(
            f"  {r['threshold']:.1f}: {r['proposed']:>5} {r['right']:>5} {r['precision']} {r['coverage']}"
        )
    print(f"\ncheck of 10 cited items: warm p50 {details['check_ms_warm']['p50']} ms, "
          f"p95 {details['check_ms_warm']['p95']} ms; after touching mtimes p50 "
          f"{details['check_ms_touched']['p50']} ms, p95 {details['check_ms_touched']['p95']} ms; "
          f"CPU p95 warm {details['check_cpu_ms_warm']['p95']} ms, touched "
          f"{details['check_cpu_ms_touched']['p95']} ms; "
          f"baseline 10 bare stats p95 {details['baseline_10_stats_ms']['p95']} ms; "
          f"first check {details['first_check_ms_per_item']} ms/item; load {details['load']}")  # fmt: skip
    print(json.dumps(result))
    if args.json_out:
        write_json(args.json_out, result)
    if args.details:
        write_json(args.details, details)
    return 0


if __name__ == "__main__":
    sys.exit(main())
