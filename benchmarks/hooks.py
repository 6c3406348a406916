"""Hook latency: ``UserPromptSubmit`` from process start to exit, against a warm daemon.

    python benchmarks/hooks.py [--json OUT] [--store DIR] [--prompts 200] [--memories 10000] [--runs 5]

A store of 10,000 memories (SciFact sentences over 20 agents and 3 projects as in
``benchmarks/scale.py``, plus the LoCoMo dev turns as the hook agent's own memories, so real
questions find something to inject), filled in-process with the real model (embeddings cached
in ``.bench-cache/``; ``--store DIR`` keeps the store for a rerun). Then the daemon is started
over it and warmed (model loaded, a few prompts), and 200 LoCoMo questions are sent one by one
exactly as Claude Code runs the installed hook: ``python -S server/hooks/hookclient.py
UserPromptSubmit`` with the hook JSON on stdin, timed from process start to exit (10 prompts per
session, so the ledger works as in real use). Baselines in the same run: the bare interpreter
(``python -S -c pass``, the floor of any hook written in Python) and the daemon round trip alone
(the same request from this process). The whole pass runs ``--runs`` times (default 5, fresh
sessions each time) against the same warm daemon; every figure is the median of the runs'.
JSON: ``p50_ms``, ``p95_ms``, ``n`` (prompts per run) (+ the baselines, how many prompts got an
injection, each run's figures and 1-minute load average, ``loadavg`` their median: it decides
what these numbers mean on a shared machine).

``--old-root DIR``: the previous release (a checkout with its own ``.venv``) in the same run on
the same store: each pass runs against this tree's daemon and hook client, then against the
previous release's (``old`` in the JSON). Each tree's modules are compiled first
(``compileall``), as an installed package's are: under ``PYTHONDONTWRITEBYTECODE`` a hook run
from a checkout would otherwise compile every module it imports, every time.

    python benchmarks/hooks.py --client NAME|all [--per-event 40] [--runs 3] [--json OUT]

Every event we install for a client (``claude``, ``codex``, ``gemini``, ``cursor``, ``copilot``
or ``all``), driven the way that client runs it: the command ``hooks install --client NAME``
writes, through ``sh -c``, that client's recorded payload on stdin
(``benchmarks/hook_payloads.py``), against the same warm daemon and store, which also holds a
team lesson for each recorded failure. A prompt event's payload carries ``--per-event`` LoCoMo
questions (10 per session); every other event runs ``--per-event`` times, each in a new session
(a briefing, a lesson every time). A client's events are seconds apart (the model works between
them), so each call starts once the daemon is idle, done with what the previous one queued
(storing the prompt, reading the transcript); ``--back-to-back`` starts each at once. JSON: per
client and event ``p50_ms``, ``p95_ms``, ``n``, ``injected``, ``client_cpu_p50_ms`` (medians of
the runs), ``reference`` (the UserPromptSubmit pass's own call in the same run), the floors
``python_floor_p50_ms`` and ``shell_floor_p50_ms`` (``sh -c "python -S -c pass"``), the budget
and the rows over it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import hook_payloads  # noqa: E402
from benchmarks.harness import corpus as scale  # noqa: E402
from benchmarks.harness.data import locomo_sessions  # noqa: E402
from benchmarks.harness.embed_cache import make_embedder  # noqa: E402
from benchmarks.harness.trees import compile_tree, python_of  # noqa: E402
from ingest.sessions.turns import turn_text  # noqa: E402
from retrieval.engine import Engine  # noqa: E402
from retrieval.records import Record, Scope  # noqa: E402
from server.hooks.clients import CLIENTS  # noqa: E402
from server.hooks.hookclient import http_post  # noqa: E402
from server.hooks.install import CLIENT  # noqa: E402
from server.http.daemon import read_info  # noqa: E402
from server.http.daemonfiles import wait_announced  # noqa: E402

LOCOMO = Path("/work/shared/data/locomo/locomo_dev.json")  # as scale.py finds SciFact
PROJECT, AGENT = scale.agent_project(0), scale.agent_name(0)
BUDGET = {"p50_ms": 60.0, "p95_ms": 150.0}
REFERENCE = "reference"
NOTHING = ("", "{}", '{"continue": true}')  # a hook's answer that injects nothing (Cursor's)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


def build_store(home: Path, n: int, locomo: list[dict]) -> None:
    turns = [turn_text(t) for s in locomo for _, _, ts in locomo_sessions(s["conversation"])
             for t in ts]  # fmt: skip
    texts = scale.corpus_texts(max(0, n - len(turns)), scale.DATA)
    records = scale.make_records(texts)
    records += [Record(project_id=PROJECT, agent_id=AGENT, scope=Scope.private,
                       category="longterm", content=t) for t in turns]  # fmt: skip
    engine = Engine(home, make_embedder(True))
    try:
        t0 = time.perf_counter()
        for i in range(0, len(records), 2000):
            engine.add(records[i : i + 2000])
            print(f"  filled {min(i + 2000, len(records))}/{len(records)}", flush=True)
        print(f"store of {len(records)} memories filled in {time.perf_counter() - t0:.0f}s")
    finally:
        engine.close()
    (home / "hooks-bench.json").write_text(json.dumps({"memories": len(records)}))


def start_daemon(home: Path, extra: dict | None = None, root: Path = ROOT) -> subprocess.Popen:
    env = {**os.environ, "PATTERN_HOME": str(home), "PYTHONPATH": str(root), **(extra or {})}
    proc = subprocess.Popen([python_of(root), "-m", "server.cli", "daemon", "--home", str(home)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=root)  # fmt: skip
    try:
        wait_announced(home, proc, timeout=120)
    except RuntimeError as exc:
        raise SystemExit(str(exc)) from None
    return proc


def headers(info: dict) -> dict:
    return {"Authorization": f"Bearer {info['secret']}", "X-Pattern-Project": PROJECT,
            "X-Pattern-Agent": AGENT}  # fmt: skip


def tool(info: dict, name: str, arguments: dict) -> tuple[int, dict]:
    msg = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": name, "arguments": arguments}}).encode()  # fmt: skip
    extra = {**headers(info), "Accept": "application/json, text/event-stream"}
    status, data = http_post(info["host"], info["port"], "/mcp", msg, extra, 30)
    return status, (json.loads(data) if status == 200 else {})


def wait_model(info: dict, timeout: float = 300) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        status, data = tool(info, "pattern_health", {})
        if status == 200 and data["result"]["structuredContent"]["modelReady"]:
            return
        time.sleep(0.5)
    raise SystemExit("the model did not load")


def child_cpu_ms() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return 1000 * (r.ru_utime + r.ru_stime)


def hook_once(home: Path, payload: dict, argv: list[str] | None = None) -> tuple[float, str, float]:
    """(wall ms, stdout, CPU ms of the hook's processes: what it costs whatever the load);
    ``argv`` (default: Claude Code's UserPromptSubmit command) runs with ``payload`` on stdin."""
    env = {**os.environ, "PATTERN_HOME": str(home), "PATTERN_PROJECT_ID": PROJECT,
           "PATTERN_AGENT_ID": AGENT}  # fmt: skip
    data = json.dumps(payload).encode()
    argv = argv or [sys.executable, "-S", str(CLIENT), "UserPromptSubmit"]
    cpu0 = child_cpu_ms()
    t0 = time.perf_counter()
    proc = subprocess.run(argv, input=data, capture_output=True, env=env, cwd=ROOT)
    took = 1000 * (time.perf_counter() - t0)
    return took, proc.stdout.decode(), child_cpu_ms() - cpu0


def measure(home: Path, info: dict, questions: list[str], tag: str, root: Path = ROOT) -> dict:
    """One pass: every question as a hook process (10 per session), then the baselines."""
    load0 = os.getloadavg()[0]
    times, cpu, injected = [], [], 0
    argv = [python_of(root), "-S", str(root / CLIENT.relative_to(ROOT)), "UserPromptSubmit"]
    for i, q in enumerate(questions):
        payload = {"session_id": f"bench-{tag}-{i // 10}", "transcript_path": None,
                   "cwd": str(ROOT), "hook_event_name": "UserPromptSubmit", "prompt": q}  # fmt: skip
        took, out, used = hook_once(home, payload, argv)
        times.append(took)
        cpu.append(used)
        injected += bool(out.strip())
    floor, floor_cpu = [], []
    for _ in range(30):
        cpu0 = child_cpu_ms()
        t0 = time.perf_counter()
        subprocess.run([python_of(root), "-S", "-c", "pass"], check=True)
        floor.append(1000 * (time.perf_counter() - t0))
        floor_cpu.append(child_cpu_ms() - cpu0)
    trips = []
    for q in questions[:50]:
        body = json.dumps({"input": {"session_id": f"trip-{tag}", "prompt": q}}).encode()
        t0 = time.perf_counter()
        http_post(info["host"], info["port"], "/hooks/UserPromptSubmit", body, headers(info), 30)  # fmt: skip
        trips.append(1000 * (time.perf_counter() - t0))
    load1 = os.getloadavg()[0]
    return {
        "p50_ms": round(statistics.median(times), 1),
        "p95_ms": round(pct(times, 95), 1),
        "injected": injected,
        "client_cpu_p50_ms": round(statistics.median(cpu), 1),
        "python_floor_p50_ms": round(statistics.median(floor), 1),
        "python_floor_cpu_p50_ms": round(statistics.median(floor_cpu), 1),
        "daemon_roundtrip_p50_ms": round(statistics.median(trips), 1),
        "daemon_roundtrip_p95_ms": round(pct(trips, 95), 1),
        "loadavg": round((load0 + load1) / 2, 2),
    }


def one_pass(home: Path, questions: list[str], root: Path, r: int) -> dict:
    """Start the daemon of the tree ``root`` on the store, warm it, one :func:`measure` pass
    with that tree's hook client, stop it; the pass's figures and its hook errors."""
    (home / "hooks.log").unlink(missing_ok=True)
    proc = start_daemon(home, root=root)
    try:
        info = read_info(home)
        wait_model(info)
        argv = [python_of(root), "-S", str(root / CLIENT.relative_to(ROOT)), "UserPromptSubmit"]
        for i in range(10):  # warm: the query path, the hook client's page cache
            hook_once(home, {"session_id": "warm", "prompt": questions[i % len(questions)],
                             "hook_event_name": "UserPromptSubmit"}, argv)  # fmt: skip
        (home / "hooks.log").unlink(missing_ok=True)  # count the measured prompts' errors only
        time.sleep(1.0)  # what a daemon starts after its first answers (vector index, vocabulary)
        wait_idle(psutil.Process(proc.pid), timeout=30)
        out = measure(home, info, questions, f"{time.strftime('%Y%m%d%H%M%S')}-{r}", root)
        log = home / "hooks.log"
        out["errors"] = log.read_text().count("\n") if log.exists() else 0
        return out
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)


def floors() -> tuple[float, float]:
    """p50 ms of ``python -S -c pass`` and of the same through ``sh -c`` (as clients run hooks)."""
    bare, shell = [], []
    for _ in range(30):
        for argv, out in (([sys.executable, "-S", "-c", "pass"], bare),
                          (["sh", "-c", f"{sys.executable} -S -c pass"], shell)):  # fmt: skip
            t0 = time.perf_counter()
            subprocess.run(argv, check=True)
            out.append(1000 * (time.perf_counter() - t0))
    return round(statistics.median(bare), 1), round(statistics.median(shell), 1)


def daemon_cpu_ms(daemon: psutil.Process) -> float:
    """Processor time of the daemon and its children (the vector index process)."""
    total = 0.0
    for p in [daemon, *daemon.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.Error:  # a child that exited meanwhile
            continue
        total += 1000 * (t.user + t.system)
    return total


def wait_idle(daemon: psutil.Process | None, timeout: float = 10.0) -> None:
    """Until the daemon used under 3 ms of processor time in 30 ms: what the last hook queued
    (a prompt stored, a transcript read, the detector) is done, as it is when a client's next
    event comes seconds later. ``None``: no wait (hooks back to back)."""
    if daemon is None:
        return
    end, last = time.monotonic() + timeout, daemon_cpu_ms(daemon)
    while time.monotonic() < end:
        time.sleep(0.03)
        now = daemon_cpu_ms(daemon)
        if now - last < 3:
            return
        last = now


def measure_clients(home: Path, plan: dict, work: Path, questions: list[str], tag: str,
                    daemon: psutil.Process | None) -> dict:  # fmt: skip
    """One pass over every client's events: ``{client: {label: figures}}``."""
    out: dict[str, dict] = {}
    load0 = os.getloadavg()[0]
    for client, (commands, samples) in plan.items():
        rows = out[client] = {}
        for k, sample in enumerate(samples):
            command = commands[sample.event]
            argv = ["sh", "-c", command] if command else None  # None: the reference call
            times, cpu, injected = [], [], 0
            for i, q in enumerate(questions):
                if sample.prompt:  # 10 prompts per session, as the UserPromptSubmit pass
                    sid = f"bench-{tag}-{client}-{k}-{i // 10}"
                else:  # every other event in a session of its own
                    sid = f"bench-{tag}-{client}-{k}-{i}"
                if client == "copilot":
                    hook_payloads.copilot_session(work, sid, sample.upto)
                wait_idle(daemon)
                took, stdout, used = hook_once(home, sample.for_session(sid, q), argv)
                times.append(took)
                cpu.append(used)
                injected += stdout.strip() not in NOTHING
            rows[sample.label] = {"p50_ms": round(statistics.median(times), 1),
                                  "p95_ms": round(pct(times, 95), 1), "n": len(times),
                                  "injected": injected,
                                  "client_cpu_p50_ms": round(statistics.median(cpu), 1)}  # fmt: skip
    out["loadavg"] = round((load0 + os.getloadavg()[0]) / 2, 2)
    return out


def clients_main(args, questions: list[str], home: Path, memories: int) -> int:
    """``--client``: every installed event of each client, with its recorded payloads."""
    names = list(CLIENTS) if args.client == "all" else [args.client]
    work = Path(tempfile.mkdtemp(prefix="pm-bench-clients-"))
    plan = {}
    for name in names:
        project = work / "projects" / name
        project.mkdir(parents=True)
        plan[name] = (hook_payloads.installed_commands(name, project),
                      hook_payloads.samples(name, work, ROOT))  # fmt: skip
    # the reference in the same run: the UserPromptSubmit pass's own call (no shell, no
    # transcript), spaced as the rest
    bare_prompt = {"session_id": "", "transcript_path": None, "cwd": str(ROOT),
                   "hook_event_name": "UserPromptSubmit", "prompt": ""}  # fmt: skip
    plan[REFERENCE] = ({"UserPromptSubmit": None},
                       [hook_payloads.Sample("UserPromptSubmit", REFERENCE, bare_prompt, True)])  # fmt: skip
    (home / "hooks.log").unlink(missing_ok=True)
    proc = start_daemon(home, hook_payloads.daemon_env(work))
    try:
        info = read_info(home)
        wait_model(info)
        for lesson in hook_payloads.LESSONS:  # a lesson per recorded failure (kept in --store)
            status, data = tool(info, "create_lesson", {"lesson": lesson})
            if status != 200 or data["result"]["isError"]:
                print(f"  lesson {lesson['name']} not created (there already?)", flush=True)
        daemon = None if args.back_to_back else psutil.Process(proc.pid)
        measure_clients(home, plan, work, questions[:3], "warm", daemon)  # each path once
        (home / "hooks.log").unlink(missing_ok=True)
        bare, shell = floors()
        runs = []
        for r in range(args.runs):
            tag = f"{time.strftime('%Y%m%d%H%M%S')}-{r}"
            runs.append(measure_clients(home, plan, work, questions, tag, daemon))
            print(f"run {r + 1}/{args.runs} done (load {runs[-1]['loadavg']})", flush=True)
        log = home / "hooks.log"
        errors = log.read_text().count("\n") if log.exists() else 0
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        shutil.rmtree(work, ignore_errors=True)

    clients, over = {}, []
    for name in [*names, REFERENCE]:
        events = {}
        for label, first in runs[0][name].items():
            per = [r[name][label] for r in runs]
            row = {k: round(statistics.median(x[k] for x in per), 1)
                   for k in ("p50_ms", "p95_ms", "client_cpu_p50_ms")}  # fmt: skip
            row.update(n=first["n"], injected=int(statistics.median(x["injected"] for x in per)))
            row["within_budget"] = all(row[k] <= v for k, v in BUDGET.items())
            if not row["within_budget"] and name != REFERENCE:
                over.append(f"{name} {label}")
            events[label] = row
        if name != REFERENCE:
            clients[name] = {"title": CLIENTS[name].title, "events": events}
    reference = events[REFERENCE]
    loads = [r["loadavg"] for r in runs]
    res = {"clients": clients, "per_event": len(questions), "memories": memories,
           "spacing": "back to back" if args.back_to_back else "each call once the daemon is idle",
           "hook_errors": errors, "reference": reference,
           "python_floor_p50_ms": bare, "shell_floor_p50_ms": shell,
           "budget": BUDGET, "over_budget": over, "loadavg": round(statistics.median(loads), 2),
           "runs": len(runs), "loadavg_runs": loads}  # fmt: skip
    print(f"each installed hook, {len(questions)} calls per event x {len(runs)} runs, store of "
          f"{memories} memories, warm daemon; medians of the runs (load average "
          f"{res['loadavg']}, runs {loads}); budget p50 <= 60 ms, p95 <= 150 ms")  # fmt: skip
    head = f"  {'client':<20} {'event':<28} {'p50 ms':>8} {'p95 ms':>8} {'CPU ms':>8}"
    print(f"{head} {'injected':>9}")
    for c in clients.values():
        for label, row in c["events"].items():
            flag = "" if row["within_budget"] else "  OVER BUDGET"
            print(f"  {c['title']:<20} {label:<28} {row['p50_ms']:8.1f} {row['p95_ms']:8.1f} "
                  f"{row['client_cpu_p50_ms']:8.1f} {row['injected']:>5}/{row['n']}{flag}")  # fmt: skip
    print(f"  reference (the UserPromptSubmit pass's call, no shell, no transcript): p50 "
          f"{reference['p50_ms']} ms, p95 {reference['p95_ms']} ms")  # fmt: skip
    print(f"  python -S -c pass p50 {bare} ms; through sh -c p50 {shell} ms; {errors} hook errors")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(res, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", metavar="OUT")
    ap.add_argument("--store", metavar="DIR", help="keep / reuse the filled store here")
    ap.add_argument("--prompts", type=int, default=200)
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--locomo", default=str(LOCOMO))
    ap.add_argument("--runs", type=int, default=5, help="measured passes (medians reported)")
    ap.add_argument("--client", choices=[*CLIENTS, "all"],
                    help="every installed event of this client (or all) with its recorded payloads")  # fmt: skip
    ap.add_argument("--per-event", type=int, default=40, help="with --client: calls per event")
    ap.add_argument("--old-root", type=Path, help="the previous release's checkout (with .venv), "
                    "measured in the same run: each pass against it too")  # fmt: skip
    ap.add_argument("--back-to-back", action="store_true",
                    help="with --client: each call at once, not when the daemon is idle")  # fmt: skip
    args = ap.parse_args(argv)
    locomo = json.loads(Path(args.locomo).read_text(encoding="utf-8"))
    questions = [qa["question"] for s in locomo for qa in s.get("qa", []) if qa.get("question")]
    random.Random(5).shuffle(questions)
    questions = questions[: args.per_event if args.client else args.prompts]
    tmp = None
    if args.store:
        home = Path(args.store)
        home.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="pm-bench-hooks-")
        home = Path(tmp.name)
    if not (home / "hooks-bench.json").exists():
        build_store(home, args.memories, locomo)
    memories = json.loads((home / "hooks-bench.json").read_text())["memories"]
    if args.client:
        try:
            return clients_main(args, questions, home, memories)
        finally:
            if tmp is not None:
                tmp.cleanup()
    (home / "hooks.log").unlink(missing_ok=True)
    trees = [("this tree", ROOT)] + ([("previous release", args.old_root)] if args.old_root else [])
    for _, root in trees:
        compile_tree(root)
    passes: dict[str, list[dict]] = {name: [] for name, _ in trees}
    errors = 0
    try:
        for r in range(args.runs):
            for name, root in trees:  # each pass against each tree in turn: the same load
                passes[name].append(one_pass(home, questions, root, r))
                one = passes[name][-1]
                errors += one.pop("errors")
                print(f"{name}: run {r + 1}/{args.runs}: p50 {one['p50_ms']} ms, p95 {one['p95_ms']} ms, "
                      f"client CPU p50 {one['client_cpu_p50_ms']} ms, daemon round trip p50 "
                      f"{one['daemon_roundtrip_p50_ms']} ms (load {one['loadavg']})", flush=True)  # fmt: skip
    finally:
        if tmp is not None:
            tmp.cleanup()
    runs = passes["this tree"]

    def med(key: str, runs: list[dict] = runs) -> float:
        return round(statistics.median(r[key] for r in runs), 1)

    res = {
        "p50_ms": med("p50_ms"),
        "p95_ms": med("p95_ms"),
        "n": len(questions),
        "memories": memories,
        "injected": int(statistics.median(r["injected"] for r in runs)),
        "hook_errors": errors,
        "client_cpu_p50_ms": med("client_cpu_p50_ms"),
        "python_floor_cpu_p50_ms": med("python_floor_cpu_p50_ms"),
        "python_floor_p50_ms": med("python_floor_p50_ms"),
        "daemon_roundtrip_p50_ms": med("daemon_roundtrip_p50_ms"),
        "daemon_roundtrip_p95_ms": med("daemon_roundtrip_p95_ms"),
        "loadavg": round(statistics.median(r["loadavg"] for r in runs), 2),
        "runs": len(runs),
        "p50_runs_ms": [r["p50_ms"] for r in runs],
        "p95_runs_ms": [r["p95_ms"] for r in runs],
        "loadavg_runs": [r["loadavg"] for r in runs],
    }
    if args.old_root:
        old = passes["previous release"]
        res["old"] = {"root": str(args.old_root), "p50_runs_ms": [r["p50_ms"] for r in old],
                      "p95_runs_ms": [r["p95_ms"] for r in old]}  # fmt: skip
        for key in ("p50_ms", "p95_ms", "client_cpu_p50_ms", "python_floor_p50_ms",
                    "python_floor_cpu_p50_ms",
                    "daemon_roundtrip_p50_ms", "daemon_roundtrip_p95_ms", "loadavg"):  # fmt: skip
            res["old"][key] = med(key, old)
    print(f"UserPromptSubmit hook, {len(questions)} LoCoMo questions x {len(runs)} runs, store of "
          f"{memories} memories, warm daemon; medians of the runs (load average "
          f"{res['loadavg']}, runs {res['loadavg_runs']}):")  # fmt: skip
    print(f"  process start -> exit   p50 {res['p50_ms']:7.1f} ms   p95 {res['p95_ms']:7.1f} ms"
          f"   (targets 60 / 150)")  # fmt: skip
    print(f"  hook process CPU        p50 {res['client_cpu_p50_ms']:7.1f} ms   (user + system)")
    print(f"  python -S -c pass       p50 {res['python_floor_p50_ms']:7.1f} ms   (the floor)")
    print(f"  daemon round trip       p50 {res['daemon_roundtrip_p50_ms']:7.1f} ms   p95 "
          f"{res['daemon_roundtrip_p95_ms']:7.1f} ms")  # fmt: skip
    if "old" in res:
        o = res["old"]
        print(f"  previous release        p50 {o['p50_ms']:7.1f} ms   p95 {o['p95_ms']:7.1f} ms   "
              f"client CPU p50 {o['client_cpu_p50_ms']:.1f} ms   daemon round trip p50 "
              f"{o['daemon_roundtrip_p50_ms']:.1f} / p95 {o['daemon_roundtrip_p95_ms']:.1f} ms")  # fmt: skip
    print(
        f"  injected something for {res['injected']} of {len(questions)} prompts; "
        f"{errors} hook errors over the runs"
    )
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(res, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
