"""Many agents, one store: no write may be lost or duplicated.

    python benchmarks/concurrency.py [--agents 8 --writes 500] [--json OUT]

Starts N agent processes; each runs the official MCP client over stdio against its own
``pattern-memory serve`` bridge (so N bridges share one daemon), writes W memories with
interleaved recalls (one every 10 writes), and reports per-call latencies. The agents start
behind a barrier: each connects and answers one recall, then all write at once on a signal, so
``writes_per_s`` is the memories written over the write window (first write to last call; the
interleaved recalls are inside it) and ``start_s`` is the time until every agent was connected
(17 Python processes starting on the benchmark machine). Then counts what the store holds:
expected, present, duplicated, and the vectors search reads for them (every memory must have
its vector, and the outbox must be empty): Chroma's, or the stored vectors themselves for a
store below the vector index's threshold, which is scanned exactly. JSON keys: expected,
present, duplicated, vectors_missing, outbox, writes_per_s, p50_ms, p95_ms (+ recall latencies
and the standalone scenario).

Recall under load: ``recall_p50_ms`` / ``recall_p95_ms`` are the agents' recalls during the
writes; once every agent has stopped, one more client asks the same queries of the same store
(``recall_idle_p50_ms`` / ``recall_idle_p95_ms``, nobody writing), and ``recall_load_ratio`` is
the p95 under load over the idle p95 (target <= 3). The idle pass asks them as new texts (each
with a ``?``), so that the model embeds each query the first time it comes, as during the writes
(one recall in eight); the same queries asked as they were, every vector in the daemon's query
cache by then, are ``recall_idle_cached_p50_ms`` / ``_p95_ms``. ``recall_load_ratio_90`` is
the ratio's 90 % bootstrap interval (both samples drawn again 2,000 times): one run's p95
rests on a few of its slowest recalls. ``write_stages`` is the daemon's own
breakdown of a write (``pattern_health``'s ``writeStages``: mean wall and processor ms per
write of policy, embedding, scan, links, commit, waiting and the rest; a release without it
reports none).

``--old-root DIR``: the same scenario first with DIR's code and venv (``DIR/.venv``, the
previous release checked out there), reported as ``old`` beside this tree's
figures, from the same run.

Baseline in the same run, after the agents stop: ``encode_single_per_s``, the model alone
embedding the same texts one per call (as a single ``remember`` does) from as many threads
as there are cores, each on its own core: the model's own forward passes, without the
grouping of concurrent calls that a release may put in front of it (grouped calls run on one
core, which would halve the baseline and flatter the ratio); ``write_ratio`` = writes_per_s /
encode_single_per_s (target >= 0.5: the whole MCP path, bridges and store included, at half
the speed of the bare model).

``--same-record``: many agents edit the same 5 memories and 5 entities at once; stale edits
merge instead of failing (see ``benchmarks/merge_race.py``).

Second scenario (baseline): two ``serve --standalone`` processes on one store — the second must
be refused cleanly (one owner per store) and the store must stay intact.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def _harness(name: str):
    """``benchmarks/harness/NAME.py`` of this file's tree, loaded by its path: with
    ``--old-root`` this script runs in the previous release's venv, whose ``benchmarks``
    package is that release's."""
    spec = importlib.util.spec_from_file_location(
        f"_concurrency_{name}", ROOT / "benchmarks" / "harness" / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def serve_cmd(*extra: str) -> tuple[str, list[str]]:
    exe = Path(sys.executable).parent / "pattern-memory"
    if exe.exists():
        return str(exe), ["serve", *extra]
    return sys.executable, ["-m", "server.cli", "serve", *extra]


async def agent(home: str, name: str, writes: int, embedder: str) -> dict:
    env = {**os.environ, "PATTERN_HOME": home, "PATTERN_PROJECT_ID": "load",
           "PATTERN_AGENT_ID": name, "PATTERN_EMBEDDER": embedder}  # fmt: skip
    cmd, args = serve_cmd()
    w_lat, r_lat, errors = [], [], []
    async with Client(StdioServerParameters(command=cmd, args=args, env=env)) as client:
        await client.list_tools()
        # the start barrier: every agent connected (its bridge and the daemon started, the
        # model loaded) before any writes, so the write window measures writes only
        await client.call_tool("recall", {"query": "warm up"})
        Path(home, f"ready-{name}").touch()
        while not Path(home, "go").exists():
            await anyio.sleep(0.01)
        started = time.time()
        for i in range(writes):
            scope = "team" if i % 2 else "private"
            category = "learnings" if scope == "team" else "longterm"
            t0 = time.perf_counter()
            res = await client.call_tool("remember", {
                "content": f"{name} note {i}: the build step {i % 37} needs cache key {i * 7919 % 1000}",
                "scope": scope, "category": category})  # fmt: skip
            w_lat.append(time.perf_counter() - t0)
            if res.is_error:
                errors.append(res.content[0].text[:200])
            if i % 10 == 9:
                t0 = time.perf_counter()
                await client.call_tool("recall", {"query": f"cache key for build step {i % 37}"})
                r_lat.append(time.perf_counter() - t0)
        ended = time.time()
    return {"writes": w_lat, "recalls": r_lat, "errors": errors, "started": started,
            "ended": ended}  # fmt: skip


def as_new_texts(queries: list[str]) -> list[str]:
    """The queries as texts the daemon's query cache has not seen (each with a ``?``): asked in
    the same order, the model embeds each one the first time it comes, as it did during the
    writes (after them the cache holds every one, and a recall of them embeds nothing)."""
    return [f"{q}?" for q in queries]


async def idle_recalls(home: str, embedder: str, queries: list[str]) -> dict:
    """The agents' recall queries again, nobody writing (agent a0: what it may see): first as
    new texts (:func:`as_new_texts`: the idle figures), then as they were asked (their vectors
    cached: ``cached``); and the daemon's breakdown of the writes (``pattern_health``)."""
    env = {**os.environ, "PATTERN_HOME": home, "PATTERN_PROJECT_ID": "load",
           "PATTERN_AGENT_ID": "a0", "PATTERN_EMBEDDER": embedder}  # fmt: skip
    cmd, args = serve_cmd()
    lat = []
    async with Client(StdioServerParameters(command=cmd, args=args, env=env)) as client:
        await client.call_tool("recall", {"query": "warm up"})
        for q in as_new_texts(queries):
            t0 = time.perf_counter()
            await client.call_tool("recall", {"query": q})
            lat.append(time.perf_counter() - t0)
        cached = []
        for q in queries:
            t0 = time.perf_counter()
            await client.call_tool("recall", {"query": q})
            cached.append(time.perf_counter() - t0)
        health = await client.call_tool("pattern_health", {})
    stages = None
    if not health.is_error and health.structured_content:
        stages = health.structured_content.get("writeStages")
    return {"recalls": lat, "cached": cached, "write_stages": stages}


def recall_queries(agents: int, writes: int) -> list[str]:
    """The recalls the agents asked during the writes (as :func:`agent` builds them)."""
    return [f"cache key for build step {i % 37}" for _ in range(agents)
            for i in range(writes) if i % 10 == 9]  # fmt: skip


def previous_release(root: Path, argv: list[str]) -> dict:
    """This scenario run with ``root``'s code and venv (its ``.venv``), in a process of its own."""
    out = Path(tempfile.mkdtemp(prefix="pm-previous-")) / "result.json"
    cmd = [str(root / ".venv" / "bin" / "python"), __file__, *argv, "--json", str(out)]
    subprocess.run(cmd, cwd=root, check=False)
    result = json.loads(out.read_text()) if out.exists() else {"error": "no result"}
    shutil.rmtree(out.parent, ignore_errors=True)
    return result


def worker_main(args) -> int:
    out = anyio.run(agent, args.home, args.name, args.writes, args.embedder)
    Path(args.out).write_text(json.dumps(out))
    return 0


def texts(agents: int, writes: int) -> list[str]:
    """Every memory the agents write (as :func:`agent` builds them)."""
    return [
        f"a{a} note {i}: the build step {i % 37} needs cache key {i * 7919 % 1000}"
        for a in range(agents)
        for i in range(writes)
    ]


def moved(path: str, earlier: str, name: str):
    """``name`` from ``path`` or, in the previous release, ``earlier``
    (``benchmarks/harness/trees.py``)."""
    return _harness("trees").moved(path, earlier, name)


def encode_single(all_texts: list[str], embedder: str) -> dict:
    """The model alone, as a single write uses it: ``embed_documents([text])`` per text, from
    as many threads as cores (the same texts, after the agents stopped)."""
    import threading

    from retrieval.engine import DEFAULT_WINDOW_WORDS, embed_views
    from retrieval.records import Record

    Settings = moved("server.service.core.config", "server.service.config", "Settings")

    emb = Settings.from_env({**os.environ, "PATTERN_EMBEDDER": embedder}).make_embedder()
    jobs = []  # the texts a write embeds for each memory (one window, one view here)
    for text in all_texts:
        rec = Record(project_id="load", agent_id="a", content=text)
        jobs.append([t for w in embed_views(rec, DEFAULT_WINDOW_WORDS, 16) for t, _ in w])
    for job in jobs[:20]:  # warm-up: sessions, caches
        emb.embed_documents(job)
    threads = os.cpu_count() or 1
    t0 = time.perf_counter()

    # the model's own passes: embed_documents groups concurrent calls onto one core
    alone = getattr(emb, "_encode_now", None)
    encode = (lambda job: alone(job, workers=1)) if alone else emb.embed_documents

    def run(part: list[list[str]]) -> None:
        for job in part:
            encode(job)

    workers = [threading.Thread(target=run, args=(jobs[i::threads],)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    wall = time.perf_counter() - t0
    return {"encode_single_per_s": round(len(jobs) / wall, 1), "encode_threads": threads}


def count_vectors(home: str) -> dict:
    """The memories without a vector where search reads it, and the outbox left over. A model
    whose store is scanned exactly (below the vector index's threshold: ``meta``'s
    ``vector_index:<model>`` is ``exact``) has no index; its stored vectors are what search
    reads. Any other (a built index, or a release without the threshold) is read in Chroma."""
    VectorIndex = moved("retrieval.vector.vectors", "retrieval.vectors", "VectorIndex")

    db = sqlite3.connect(f"file:{home}/pattern.sqlite3?mode=ro", uri=True)
    ids = {r[0] for r in db.execute("SELECT id FROM records WHERE kind='memory'")}
    models = {r[0] for r in db.execute("SELECT DISTINCT embedding_model FROM records")}
    states = dict(db.execute("SELECT key, value FROM meta WHERE key LIKE 'vector_index:%'"))
    outbox = db.execute("SELECT count(*) FROM vector_outbox").fetchone()[0]
    found: set[str] = set()
    indexed = []
    for model in models - {None}:
        if states.get(f"vector_index:{model}") == "exact":
            found.update(r[0] for r in db.execute(
                "SELECT DISTINCT r.id FROM records r JOIN embeddings e "
                "ON e.record_rowid = r.rowid WHERE e.model_id = ?", (model,)))  # fmt: skip
        else:
            indexed.append(model)
    db.close()
    if indexed:
        index = VectorIndex(f"{home}/chroma")
        for model in indexed:
            for bucket in index.buckets(model):
                found.update(v.split("#", 1)[0] for v in index.ids(bucket, model))
        index.close()
    return {"vectors_missing": len(ids - found), "outbox": outbox,
            "vectors_read_from": "chroma" if indexed else "stored vectors (exact scan)"}  # fmt: skip


def count_store(home: str, agents: int, writes: int) -> dict:
    db = sqlite3.connect(f"file:{home}/pattern.sqlite3?mode=ro", uri=True)
    rows = db.execute(
        "SELECT content, count(*) FROM records WHERE kind='memory' GROUP BY content"
    ).fetchall()
    expected = {f"a{a} note {i}:" for a in range(agents) for i in range(writes)}
    present = {c.split(" the build", 1)[0] for c, _ in rows} & expected
    duplicated = sum(n - 1 for _, n in rows if n > 1)
    integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
    db.close()
    return {"expected": len(expected), "present": len(present), "duplicated": duplicated,
            "integrity": integrity}  # fmt: skip


def cpu_sampler(home: str, agents: set[int]):
    """The processor time of the write window by role: the agents (each an MCP client), their
    bridges (the agents' children), the daemon of ``home`` with its children (the vector
    index's process). None where there is no ``/proc``."""

    def classify(pid: int, ppid: int, cmd: str, roles: dict[int, str]) -> str | None:
        if pid in agents:
            return "agents"
        if (" daemon " in f"{cmd} " and home in cmd) or roles.get(ppid) == "daemon":
            return "daemon"
        if roles.get(ppid) == "agents":
            return "bridges"
        return None

    return (
        _harness("processes").CpuByRole(classify).start()
        if Path("/proc/self/stat").exists()
        else None
    )


def cpu_per_write(cpu: dict | None, writes: int, base: dict) -> dict:
    """Processor ms per write of each role over the write window (the interleaved recalls
    included), and the ceiling they set: the writes per second the machine's cores could
    reach if the daemon cost nothing but the model's own pass of the text (the agents' and
    bridges' time per write, plus the model's per text: cores over the single-text rate)."""
    if not cpu or not writes:
        return {"cpu_ms_per_write": None}
    per = {role: round(row["cpu_s"] * 1000 / writes, 2) for role, row in sorted(cpu.items())}
    model_ms = 1000 * base["encode_threads"] / base["encode_single_per_s"]
    clients_ms = per.get("agents", 0.0) + per.get("bridges", 0.0)
    cores = os.cpu_count() or 1
    ceiling = cores * 1000 / (clients_ms + model_ms)
    return {"cpu_ms_per_write": per, "model_cpu_ms_per_text": round(model_ms, 2),
            "write_ratio_ceiling": round(ceiling / base["encode_single_per_s"], 3)}  # fmt: skip


def pct(values: list[float], q: float) -> float:
    return (
        round(statistics.quantiles(values, n=100)[int(q) - 1] * 1000, 1) if len(values) > 1 else 0.0
    )


def ratio_interval(load: list[float], idle: list[float], runs: int = 2000) -> list[float]:
    """The 90 % bootstrap interval (percentile method, Efron & Tibshirani 1993, ch. 13) of
    ``pct(load, 95) / pct(idle, 95)``: both samples drawn again with replacement ``runs``
    times (a fixed seed). A p95 of 160 recalls rests on its 8 slowest: the interval shows how
    far one run's ratio can be from another's on the same code."""
    if len(load) < 2 or len(idle) < 2:
        return []
    rng = random.Random(0)
    ratios = sorted(
        pct(rng.choices(load, k=len(load)), 95) / max(pct(rng.choices(idle, k=len(idle)), 95), 0.1)
        for _ in range(runs)
    )
    return [round(ratios[int(0.05 * runs)], 2), round(ratios[int(0.95 * runs) - 1], 2)]


def standalone_scenario(embedder: str) -> dict:
    """Two --standalone servers on one store: the second must be refused, the first unharmed."""
    home = tempfile.mkdtemp(prefix="pm-standalone-")
    env = {**os.environ, "PATTERN_HOME": home, "PATTERN_EMBEDDER": embedder,
           "PATTERN_PROJECT_ID": "load", "PATTERN_AGENT_ID": "s1"}  # fmt: skip
    cmd, args = serve_cmd("--standalone")
    first = subprocess.Popen([cmd, *args], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)  # fmt: skip
    time.sleep(3)
    second = subprocess.run([cmd, *args], env={**env, "PATTERN_AGENT_ID": "s2"}, input=b"",
                            capture_output=True, timeout=120)  # fmt: skip
    first.stdin.close()
    first.wait(timeout=60)
    message = second.stderr.decode().strip().splitlines()[-1] if second.stderr else ""
    db = sqlite3.connect(f"file:{home}/pattern.sqlite3?mode=ro", uri=True)
    integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
    db.close()
    shutil.rmtree(home, ignore_errors=True)
    return {
        "second_exit_code": second.returncode,
        "second_message": message,
        "integrity": integrity,
    }


ROWS = ("expected", "present", "duplicated", "vectors_missing", "outbox", "integrity",
        "writes_per_s", "encode_single_per_s", "write_ratio", "p50_ms", "p95_ms",
        "recall_p50_ms", "recall_p95_ms", "recall_idle_p50_ms", "recall_idle_p95_ms",
        "recall_idle_cached_p50_ms", "recall_idle_cached_p95_ms", "recall_load_ratio",
        "recall_load_ratio_90", "write_window_s", "start_s", "wall_s",
        "loadavg_after_agents")  # fmt: skip


def report(result: dict) -> None:
    """The figures, this tree's beside the previous release's when it ran."""
    prev = result.get("old")
    print(f"{'metric':<22}{'value':>12}" + (f"{'previous':>12}" if prev else ""))

    def shown(v) -> str:
        return f"{v[0]:.2f}-{v[1]:.2f}" if isinstance(v, list) and len(v) == 2 else str(v)

    for key in ROWS:
        line = f"{key:<22}{shown(result.get(key, '-')):>12}"
        print(line + (f"{shown(prev.get(key, '-')):>12}" if prev else ""))
    stages = result.get("write_stages")
    if stages and stages.get("writes"):
        print(f"\na write's stages (mean of {stages['writes']} writes, ms): wall / processor")
        for name, wall in stages["wall_ms"].items():
            cpu = stages["cpu_ms"][name]
            print(f"  {name:<12}{wall:>8.2f} / " + ("-" if cpu is None else f"{cpu:.2f}"))
    per = result.get("cpu_ms_per_write")
    if per:
        print("\nprocessor ms per write over the write window, by process: "
              + ", ".join(f"{role} {ms:.2f}" for role, ms in per.items())
              + f"; the model's own pass {result['model_cpu_ms_per_text']:.2f} a text. "
              f"With a daemon costing only the model, the cores allow write_ratio "
              f"{result['write_ratio_ceiling']}")  # fmt: skip
    sa = result.get("standalone")
    if sa:
        print(f"\nbaseline: two --standalone servers on one store -> second exits "
              f"{sa['second_exit_code']}: {sa['second_message']!r}; store integrity "
              f"{sa['integrity']}")  # fmt: skip


def main() -> int:
    if "--same-record" in sys.argv:  # the merge scenario: many agents editing the same records
        sys.path.insert(0, str(ROOT))
        from benchmarks.merge_race import main as same_record

        return same_record(sys.argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agents", type=int, default=8)
    ap.add_argument("--writes", type=int, default=500)
    ap.add_argument("--embedder", default="sentence-transformers")
    ap.add_argument("--json", dest="json_out")
    ap.add_argument("--old-root", type=Path, help="run the scenario first with this tree's venv")
    ap.add_argument("--no-standalone", action="store_true", help="skip the second scenario")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--home", help=argparse.SUPPRESS)
    ap.add_argument("--name", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker_main(args)

    previous = None
    if args.old_root:
        same = ["--agents", str(args.agents), "--writes", str(args.writes),
                "--embedder", args.embedder, "--no-standalone"]  # fmt: skip
        previous = previous_release(args.old_root.resolve(), same)
    home = tempfile.mkdtemp(prefix="pm-concurrency-")
    outs = [Path(home) / f"agent{a}.json" for a in range(args.agents)]
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--worker",
                "--home",
                home,
                "--name",
                f"a{a}",
                "--writes",
                str(args.writes),
                "--embedder",
                args.embedder,
                "--out",
                str(outs[a]),
            ]
        )  # fmt: skip
        for a in range(args.agents)
    ]
    deadline = time.time() + 600
    while sum(Path(home, f"ready-a{a}").exists() for a in range(args.agents)) < args.agents:
        if time.time() > deadline or any(p.poll() not in (None, 0) for p in procs):
            break
        time.sleep(0.05)
    start_s = time.perf_counter() - t0
    sampler = cpu_sampler(home, {p.pid for p in procs})
    Path(home, "go").touch()
    codes = [p.wait() for p in procs]
    cpu = sampler.stop() if sampler else None
    wall = time.perf_counter() - t0
    results = [json.loads(o.read_text()) for o in outs if o.exists()]
    writes = [x for r in results for x in r["writes"]]
    recalls = [x for r in results for x in r["recalls"]]
    errors = [e for r in results for e in r["errors"]]
    idle = anyio.run(idle_recalls, home, args.embedder, recall_queries(args.agents, args.writes))
    subprocess.run([*serve_cmd()[:1], "stop", "--home", home] if serve_cmd()[0].endswith("pattern-memory")
                   else [sys.executable, "-m", "server.cli", "stop", "--home", home], check=False)  # fmt: skip
    counts = count_store(home, args.agents, args.writes)
    counts.update(count_vectors(home))
    load_agents = os.getloadavg()[0]
    base = encode_single(texts(args.agents, args.writes), args.embedder)
    # the write window: from the go signal to the last agent's last call (recalls included)
    window = max(r["ended"] for r in results) - min(r["started"] for r in results)
    writes_per_s = round(len(writes) / window, 1)
    result = {
        **counts,
        "writes_per_s": writes_per_s,
        **base,
        "write_ratio": round(writes_per_s / base["encode_single_per_s"], 3),
        "loadavg_after_agents": round(load_agents, 2),
        "p50_ms": pct(writes, 50),
        "p95_ms": pct(writes, 95),
        "recall_p50_ms": pct(recalls, 50),
        "recall_p95_ms": pct(recalls, 95),
        "recall_idle_p50_ms": pct(idle["recalls"], 50),
        "recall_idle_p95_ms": pct(idle["recalls"], 95),
        "recall_load_ratio": round(pct(recalls, 95) / max(pct(idle["recalls"], 95), 0.1), 2),
        "recall_load_ratio_90": ratio_interval(recalls, idle["recalls"]),
        "recall_idle_cached_p50_ms": pct(idle["cached"], 50),
        "recall_idle_cached_p95_ms": pct(idle["cached"], 95),
        "write_stages": idle["write_stages"],
        **cpu_per_write(cpu, len(writes), base),
        "agents": args.agents,
        "writes_per_agent": args.writes,
        "write_window_s": round(window, 1),
        "start_s": round(start_s, 1),
        "wall_s": round(wall, 1),
        "agent_exit_codes": codes,
        "tool_errors": errors[:5],
        "standalone": None if args.no_standalone else standalone_scenario(args.embedder),
    }
    if previous is not None:
        result["old"] = {"root": str(args.old_root), **previous}
    shutil.rmtree(home, ignore_errors=True)
    report(result)
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(json.dumps(result, indent=2))
    intact = (
        counts["present"] == counts["expected"]
        and counts["duplicated"] == 0
        and counts["vectors_missing"] == 0
        and counts["outbox"] == 0
        and not errors
    )
    return 0 if intact else 1


if __name__ == "__main__":
    sys.exit(main())
