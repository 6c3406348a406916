"""The scale curve: one store grown through ``remember-bulk`` to each size of ``--curve``, and
at each size what the served store costs.

    python benchmarks/scale.py --curve 20000,100000,300000,1000000 [--store DIR] [--json OUT]

The fill measures the store, not the model: records get deterministic hash vectors stored under
the real model's id (:class:`SameIdHash`), so the daemon and the query engine load the real
model (the packaged int8 ONNX graph) and re-embed nothing. Every record passes the whole write
policy (secret scan, injection rules, the injection model's linear layer, fed by the same hash
vectors). Texts: :func:`curve_texts`, distinct and deterministic, SciFact sentences alone and
then in pairs (realistic words for the FTS5 postings). Identities, scopes, categories and tags
as in :mod:`benchmarks.scale` (20 agents, 3 projects, 4 scopes); the per-agent and per-project
limits are lifted in this process so one store can hold a million records.

Per point, in ``curve`` of the JSON (written after every point, so a partial curve survives):

- ``write_per_s``: records per second of the increment, ``remember-bulk`` calls of up to 1000
  records until the background writer has them in the vector index;
- ``start_s``: spawn of ``pattern-memory serve`` (which starts the daemon) to the first
  ``recall`` answered in hybrid mode; then ``rss_mb`` / ``pss_mb`` of the daemon and its
  children (``/proc/PID/smaps_rollup``) after ``--daemon-recalls`` recalls;
- ``postings_build_s``: a fresh engine's in-memory postings built from FTS5, from its first
  query until ready; ``postings_ready_s``: the same at the next start, loaded from the file the
  first engine saved when it closed (``postings_file_mb``);
- ``recall_p50_ms`` / ``recall_p95_ms`` (no filter), ``recall_filtered_*`` (one agent's four
  buckets): ``Engine.search(k=10)`` with the real query model, the vector index in its own
  process as the daemon runs it;
- ``disk_mb``: the store folder (SQLite + Chroma); ``sqlite_mb``, ``chroma_mb`` split it;
- ``reindex_s`` at the largest point: ``Engine.reindex`` (every collection rebuilt from the
  stored vectors).

``--remeasure`` (the same ``--store`` and ``--json``) measures the largest point again without
filling (postings, latency, the daemon's start and memory) under the settings of the
environment, recorded in ``remeasured_with``.

``--old-root DIR`` (the previous release: a checkout with its own ``.venv``): at each point, and
at a ``--remeasure``, the same store is measured by that tree too, in the same run, right after
this tree (its :func:`served` in its own interpreter): ``old`` in the point, with the same keys.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from benchmarks.harness.corpus import (
    _SENT,
    CATEGORIES,
    N_AGENTS,
    SCOPES,
    agent_name,
    agent_project,
    load_queries,
    visible_buckets,
)
from benchmarks.harness.report import pct
from benchmarks.harness.trees import compile_tree
from benchmarks.startup import SameIdHash, proc_memory, server_command, stop_daemon
from retrieval.embedding.embedder import SentenceTransformerEmbedder
from retrieval.engine import Engine
from retrieval.records import RecordFilter

ROOT = Path(__file__).resolve().parent.parent
CALL = 1000  # records per remember-bulk call (its limit)
# the settings a re-measure records (docs/scale.md, "Settings that trade memory for latency")
KNOBS = ("PATTERN_SQLITE_MMAP_MB", "PATTERN_SQLITE_CACHE_MB", "PATTERN_SQLITE_READERS",
         "PATTERN_BM25_MEMORY_MIN", "PATTERN_VECTOR_PROCESS")  # fmt: skip


def sentences(data: Path) -> list[str]:
    """SciFact's distinct abstract sentences (≥ 25 characters), in a fixed shuffled order."""
    seen: dict[str, None] = {}
    with open(data / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            for s in _SENT.split(json.loads(line).get("text", "")):
                if len(s.strip()) >= 25:
                    seen.setdefault(s.strip(), None)
    out = list(seen)
    random.Random(7).shuffle(out)
    return out


def curve_text(i: int, sents: list[str]) -> str:
    """Text ``i``: sentence ``i`` while there are sentences, then pairs. For ``i = r + k*S``
    (``S`` sentences, ``k ≥ 1``) the pair is (``r``, ``(k + 7r) mod S``): distinct for every
    ``i < S²`` (two billion with SciFact's 44k sentences)."""
    n = len(sents)
    r, k = i % n, i // n
    if k == 0:
        return sents[r]
    return f"{sents[r]} {sents[(k + 7 * r) % n]}"


def curve_item(i: int, sents: list[str]) -> tuple[int, dict]:
    """(agent index, remember-bulk item) of record ``i``: deterministic per ``i``."""
    rng = random.Random(1_000_003 * i + 11)
    a = rng.randrange(N_AGENTS)
    scopes, weights = zip(*SCOPES, strict=True)
    scope = rng.choices(scopes, weights)[0]
    item = {
        "content": curve_text(i, sents),
        "scope": scope.value,
        "category": rng.choice(CATEGORIES[scope]),
        "metadata": {"priority": rng.choice([1, 2, 2, 3]), "tags": [f"t{rng.randrange(50)}"]},
    }
    return a, item


def lift_limits() -> None:
    """No per-agent, per-category or per-project limit in this process (one store, 1M records)."""
    from server.service.core import scopes

    scopes.MAX_PER_AGENT = scopes.MAX_SHARED_PER_PROJECT = 10**12
    scopes.MAX_PER_CATEGORY = dict.fromkeys(scopes.MAX_PER_CATEGORY, 10**12)


def fill_to(home: Path, start: int, stop: int, sents: list[str]) -> dict:
    """Records ``start..stop-1`` through ``remember_bulk``; the write rate of the increment."""
    from server.service.core.identity import Identity
    from server.service.memories.bulk import remember_bulk
    from server.service.memories.memory import MemoryService
    from server.service.trust.policy import WritePolicy

    lift_limits()
    engine = Engine(home, SameIdHash(), vector_process=True, background_vectors=True)
    svc = MemoryService(engine, policy=WritePolicy.from_env({}))
    who = [Identity(project_id=agent_project(a), agent_id=agent_name(a)) for a in range(N_AGENTS)]
    t0, cpu0 = time.perf_counter(), time.process_time()
    try:
        step = CALL * N_AGENTS  # one call per agent per step
        for lo in range(start, stop, step):
            per: dict[int, list[dict]] = {}
            for i in range(lo, min(lo + step, stop)):
                a, item = curve_item(i, sents)
                per.setdefault(a, []).append(item)
            for a, items in per.items():
                for j in range(0, len(items), CALL):
                    remember_bulk(svc, who[a], items[j : j + CALL])
            done = min(lo + step, stop)
            dt = time.perf_counter() - t0
            print(f"  filled {done:>8}  {(done - start) / dt:7.0f}/s  load {os.getloadavg()[0]:.1f}",
                  file=sys.stderr, flush=True)  # fmt: skip
        engine.wait_vectors()
        engine.store.checkpoint()
        seconds = time.perf_counter() - t0
    finally:
        engine.close()
    return {
        "added": stop - start,
        "fill_s": round(seconds, 1),
        "write_per_s": round((stop - start) / seconds, 1),
        "write_cpu_ms_per_record": round(1000 * (time.process_time() - cpu0) / (stop - start), 2),
    }


def folder_mb(path: Path) -> float:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20, 1)


def daemon_run(home: Path, queries: list[str], recalls: int) -> dict:
    """Start ``serve`` (and so the daemon) on the store: seconds to the first hybrid recall, the
    mean latency of ``recalls`` more (over MCP), then the daemon's memory."""
    from mcp import Client, StdioServerParameters

    env = {**os.environ, "PATTERN_HOME": str(home), "PATTERN_EMBEDDER": "sentence-transformers",
           "PATTERN_PROJECT_ID": agent_project(0), "PATTERN_AGENT_ID": agent_name(0),
           "PYTHONPATH": str(ROOT)}  # fmt: skip
    env.pop("PATTERN_EMBED_BACKEND", None)
    cmd = server_command()

    async def run() -> dict:
        params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=env)
        t0 = time.perf_counter()
        mode, calls = "", 0
        async with Client(params, read_timeout_seconds=600) as client:
            while mode.split(" (")[0] != "hybrid":
                res = await client.call_tool("recall", {"query": queries[0], "limit": 5})
                calls += 1
                mode = (res.structured_content or {}).get("mode") or ""
                if mode.split(" (")[0] != "hybrid":
                    if time.perf_counter() - t0 > 900:
                        raise RuntimeError("no hybrid answer within 900 s")
                    await anyio.sleep(0.05)
            start_s = time.perf_counter() - t0
            first_mode = mode
            ms = []
            for q in queries[1 : recalls + 1]:
                t = time.perf_counter()
                await client.call_tool("recall", {"query": q, "limit": 10})
                ms.append(1000 * (time.perf_counter() - t))
            await anyio.sleep(1.0)
            info = json.loads((home / "daemon.json").read_text())
            mem = proc_memory(info["pid"])
        return {"start_s": round(start_s, 2), "start_calls": calls, "first_mode": first_mode,
                "mcp_recall_p50_ms": round(pct(ms, 50), 1), "mcp_recall_p95_ms": round(pct(ms, 95), 1),
                "rss_mb": mem.get("VmRSS"), "pss_mb": mem.get("Pss"), "rss_anon_mb": mem.get("RssAnon"),
                "rss_file_mb": mem.get("RssFile"), "daemon_processes": mem["processes"]}  # fmt: skip

    try:
        return anyio.run(run)
    finally:
        stop_daemon(str(home), env)


def postings_ready(engine: Engine, queries: list[str], filters: list[RecordFilter]) -> float | None:
    """Seconds a fresh engine takes to make its in-memory postings ready (built from FTS5, or
    loaded from the saved file), started as its first query would start them; then warm-up
    queries (caches, threads, the vector index's collections)."""
    postings = engine.lexical.postings
    seconds = None
    if postings is not None and engine.store.count(RecordFilter()) >= postings.min_records:
        t0 = time.perf_counter()
        postings.start()
        if postings.wait(3600):
            seconds = round(time.perf_counter() - t0, 2)
    # every agent's filter once (each opens its buckets' collections: a search over every
    # bucket no longer does, it asks the collection across them), and the whole store
    for q, f in zip(queries[:N_AGENTS], filters[:N_AGENTS], strict=True):
        engine.search(q, f, k=10)
        engine.search(q, k=10)
    return seconds


def query_run(home: Path, queries: list[str], real: SentenceTransformerEmbedder) -> dict:
    """A fresh engine on the store (vector index in its own process, as served): the postings
    built from FTS5 (the saved file removed first), hybrid recall latency without and with one
    agent's filter; then a second engine: the postings loaded from the file saved at close."""
    filters = [RecordFilter(buckets=visible_buckets(i % N_AGENTS)) for i in range(len(queries))]
    saved = home / "pattern.sqlite3.postings.npz"
    saved.unlink(missing_ok=True)
    engine = Engine(home, real, vector_process=True, background_vectors=True)
    out: dict = {}
    try:
        out["postings_build_s"] = postings_ready(engine, queries, filters)
        # its searches over every bucket started the collection across them (a store of many
        # buckets: retrieval/vector/across.py): measured once it is built
        t = time.perf_counter()
        engine.wait_vectors(7200)
        out["across_wait_s"] = round(time.perf_counter() - t, 1)
        for name, fs in (("recall", [RecordFilter()] * len(queries)), ("recall_filtered", filters)):
            ms = []
            for q, f in zip(queries, fs, strict=True):
                t = time.perf_counter()
                engine.search(q, f, k=10)
                ms.append(1000 * (time.perf_counter() - t))
            out[f"{name}_p50_ms"] = round(pct(ms, 50), 2)
            out[f"{name}_p95_ms"] = round(pct(ms, 95), 2)
    finally:
        engine.close()  # saves the postings
    out["postings_file_mb"] = round(saved.stat().st_size / 2**20, 1) if saved.exists() else None
    engine = Engine(home, real, vector_process=True, background_vectors=True)
    try:
        out["postings_ready_s"] = postings_ready(engine, queries, filters)
    finally:
        engine.close()
    return out


def served(home: Path, queries: list[str], real: SentenceTransformerEmbedder, recalls: int) -> dict:
    """What a point measures of the store as served: :func:`query_run`, then :func:`daemon_run`,
    each with the load average it started at."""
    out: dict = {"loadavg_queries": round(os.getloadavg()[0], 2)}
    out |= query_run(home, queries, real)
    out["loadavg_daemon"] = round(os.getloadavg()[0], 2)
    return out | daemon_run(home, queries, recalls)


OLD_SERVED = """
import json, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from benchmarks.scale import load_queries
from benchmarks.scale_curve import served
from retrieval.embedder import SentenceTransformerEmbedder
real = SentenceTransformerEmbedder().load()
real.query_cache = 0
queries = load_queries(Path(sys.argv[3]), int(sys.argv[4]))
print("OLD-SERVED " + json.dumps(served(Path(sys.argv[2]), queries, real, int(sys.argv[5]))))
"""


def served_by(root: Path, home: Path, args) -> dict:
    """:func:`served` as the checkout ``root`` measures it (its interpreter, its code), on the
    same store."""
    python = root / ".venv" / "bin" / "python"
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([str(python), "-c", OLD_SERVED, str(root), str(home), str(args.data),
                          str(args.queries), str(args.daemon_recalls)],
                         env=env, cwd=root, capture_output=True, text=True, check=True)  # fmt: skip
    line = next(x for x in out.stdout.splitlines() if x.startswith("OLD-SERVED "))
    return json.loads(line[len("OLD-SERVED ") :])


def reindex_run(home: Path, real: SentenceTransformerEmbedder) -> dict:
    engine = Engine(home, real, vector_process=True)
    try:
        t0 = time.perf_counter()
        n, _orphans = engine.reindex()
        return {"reindex_s": round(time.perf_counter() - t0, 1), "reindexed": n}
    finally:
        engine.close()


def plot(curve: list[dict], path: Path) -> str | None:
    """The curve as a PNG (None, with the reason printed, when matplotlib is not installed)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return None
    n = [p["memories"] for p in curve]
    fig, ax = plt.subplots(2, 2, figsize=(10, 7))
    for key, label in (("recall_filtered_p50_ms", "filtered p50"),
                       ("recall_filtered_p95_ms", "filtered p95"),
                       ("recall_p50_ms", "unfiltered p50"), ("recall_p95_ms", "unfiltered p95")):  # fmt: skip
        ax[0][0].plot(n, [p.get(key) for p in curve], marker="o", label=label)
    for limit in (30, 80):  # the 1M targets: filtered p50 and p95
        ax[0][0].axhline(limit, color="grey", linestyle="--", linewidth=0.8)
    ax[0][0].set_title("recall latency (ms); dashed: filtered p50/p95 targets")
    ax[0][0].legend()
    ax[0][1].plot(n, [p.get("rss_mb") for p in curve], marker="o", label="RSS")
    ax[0][1].plot(n, [p.get("pss_mb") for p in curve], marker="o", label="PSS")
    ax[0][1].plot(n, [p.get("disk_mb") for p in curve], marker="o", label="disk")
    ax[0][1].axhline(3072, color="grey", linestyle="--", linewidth=0.8)
    ax[0][1].set_title("daemon + children RSS/PSS, disk (MB); dashed: 3 GB")
    ax[0][1].legend()
    ax[1][0].plot(n, [p.get("write_per_s") for p in curve], marker="o")
    if curve and curve[0].get("write_per_s"):
        ax[1][0].axhline(curve[0]["write_per_s"] / 2, color="grey", linestyle="--", linewidth=0.8)
    ax[1][0].set_ylim(bottom=0)
    ax[1][0].set_title("write rate (records/s); dashed: half the first point's")
    ax[1][1].plot(n, [p.get("start_s") for p in curve], marker="o", label="start → hybrid")
    ax[1][1].plot(
        n, [p.get("postings_ready_s") for p in curve], marker="o", label="postings loaded"
    )
    ax[1][1].set_title("seconds")
    ax[1][1].legend()
    for a in ax.flat:
        a.set_xscale("log")
        a.set_xlabel("records")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return str(path)


def run_curve(points: list[int], args) -> int:
    data = Path(args.data)
    tmp = None
    if args.store:
        home = Path(args.store)
        home.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.mkdtemp(prefix="pm-curve-")
        home = Path(tmp)
    sents = sentences(data)
    queries = load_queries(data, args.queries)
    for tree in (ROOT, *([Path(args.old_root)] if args.old_root else [])):
        compile_tree(tree)  # as installed: no start compiles the modules it imports
    real = SentenceTransformerEmbedder().load()
    real.query_cache = 0  # distinct timings, not cache hits
    result: dict = {"points": points, "sentences": len(sents), "curve": []}
    if args.json and Path(args.json).exists():  # resume a partial curve on the same store
        old = json.loads(Path(args.json).read_text())
        result["curve"] = [p for p in old.get("curve", []) if p["memories"] in points]
    have = result["curve"][-1]["memories"] if result["curve"] else 0

    def save() -> None:
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(result, indent=2))

    try:
        for n in points:
            if n <= have:
                continue
            print(f"point {n}: filling {have}..{n}", file=sys.stderr, flush=True)
            point: dict = {"memories": n, "loadavg_fill": round(os.getloadavg()[0], 2)}
            point |= fill_to(home, have, n, sents)
            have = n
            point["disk_mb"] = folder_mb(home)
            point["sqlite_mb"] = round(
                sum(f.stat().st_size for f in home.glob("pattern.sqlite3*")) / 2**20, 1
            )
            point["chroma_mb"] = folder_mb(home / "chroma") if (home / "chroma").exists() else 0.0
            point |= served(home, queries, real, args.daemon_recalls)
            if args.old_root:
                point["old"] = served_by(Path(args.old_root), home, args)
            result["curve"].append(point)
            save()
            print(json.dumps(point), file=sys.stderr, flush=True)
        if args.remeasure and result["curve"]:  # the grown store again, under today's settings
            point = result["curve"][-1]
            point |= served(home, queries, real, args.daemon_recalls)
            if args.old_root:
                point["old"] = served_by(Path(args.old_root), home, args)
            point["remeasured_with"] = {k: v for k, v in os.environ.items() if k in KNOBS}
            save()
        if not args.no_reindex and result["curve"]:
            result["curve"][-1] |= reindex_run(home, real)
            save()
        if args.plot:
            result["plot"] = plot(result["curve"], Path(args.plot))
            save()
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    first = result["curve"][0] if result["curve"] else None
    for p in result["curve"]:
        if "old" in p:
            o = p["old"]
            print(f"{p['memories']:>8}  previous release: filtered {o.get('recall_filtered_p50_ms')}/"
                  f"{o.get('recall_filtered_p95_ms')} ms  all {o.get('recall_p50_ms')}/"
                  f"{o.get('recall_p95_ms')} ms  start {o.get('start_s')} s")  # fmt: skip
        ratio = p["write_per_s"] / first["write_per_s"] if first else float("nan")
        print(f"{p['memories']:>8}  write {p['write_per_s']:7.0f}/s ({ratio:.2f}x)  "
              f"filtered {p.get('recall_filtered_p50_ms')}/{p.get('recall_filtered_p95_ms')} ms  "
              f"all {p.get('recall_p50_ms')}/{p.get('recall_p95_ms')} ms  rss {p.get('rss_mb')} "
              f"pss {p.get('pss_mb')} MB  disk {p['disk_mb']} MB  start {p.get('start_s')} s  "
              f"postings {p.get('postings_ready_s')} s")  # fmt: skip
    return 0


__all__ = ["curve_item", "curve_text", "run_curve", "sentences"]
