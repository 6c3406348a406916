"""Start-up of the served memory: the MCP handshake, the first vector query, the idle memory.

    python benchmarks/startup.py [--runs 5] [--ready-runs N] [--memories 10000] [--json OUT]

Every figure is the median of ``--runs`` runs (default 5; ``--ready-runs`` for 2-3, default the
same), reported with the machine's 1-minute load average at each run (``os.getloadavg()``):
on a shared machine the load decides what a time means.

1. ``handshake_s``: each run is a cold start of ``pattern-memory serve`` (the stdio bridge) in a
   fresh store folder: no daemon runs, the bridge starts one, and ``initialize`` +
   ``tools/list`` complete. The bridge answers both from its static handshake
   (``server/http/handshake.json``) without waiting for the daemon, whose start runs beside it.
   Baseline: the bare interpreter start (``python -c pass``), the floor any Python server
   pays.
2. ``model_ready_s``: a store of ``--memories`` memories (SciFact sentences, 20 agents, 3
   projects, 4 scopes, as benchmarks/scale.py) is built once per run of this script; its
   vectors are hash vectors stored under the real model's id, so the daemon loads the real
   model and re-embeds nothing. The ONNX export is made first (it is a one-time cost, outside
   the timing). Each run starts ``pattern-memory serve`` on that store (the bridge starts the
   daemon) and calls ``recall`` until it answers in ``hybrid`` mode: the time from spawning
   ``serve`` to that answer. Median of ``--ready-runs``.
3. ``rss_mb``: the idle daemon's resident memory, read from ``/proc`` ``--idle`` seconds after
   that first hybrid answer and one more recall (model loaded, Chroma open with the agent's
   collections loaded, the store's pages mapped). Median. It
   is the sum over the daemon and its children (the vector index runs in a child
   process: ``daemon_processes``); ``pss_mb`` is the same sum in proportional set size (a
   library both processes map counts once).
   ``rss_anon_mb`` and ``rss_file_mb`` split it: heap vs mapped files (the model weights are
   heap; SQLite's memory-mapped pages and shared libraries are file pages the kernel can drop).
4. Baseline in the same run: one start with ``PATTERN_EMBED_BACKEND=torch`` (the
   sentence-transformers model in the daemon, without the lean ONNX serving): ``torch_model_ready_s``,
   ``torch_rss_mb``.
5. ``--old-root DIR``: the previous release (a checkout with its own ``.venv``) measured in the
   same run on the same store: its ready runs alternate with this tree's (``old`` in the JSON:
   ``model_ready_s``, ``rss_mb``, ``pss_mb``, each run's figures and load).
6. Bytecode: each measured tree's modules are compiled first (``compileall``), as an installed
   package's are (``pip`` compiles them at install): under ``PYTHONDONTWRITEBYTECODE`` a
   checkout would otherwise compile every module it imports at every start.
7. ``breakdown``: what each part costs on its own, each in a fresh interpreter (seconds, RSS
   after, MB): the imports (chromadb, onnxruntime, tokenizers, the MCP server, torch +
   sentence-transformers), the ONNX session, Chroma opened on the store with a query, the SQLite
   store opened with an integrity check (with and without its memory map), the in-memory
   postings (built at 20k records by default; forced here), the torch backend's loaded model.

Results: docs/benchmarks.md, "Start-up and memory of the served process" and "lean serving".
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.harness.corpus import (  # noqa: E402
    DATA,
    agent_name,
    agent_project,
    corpus_texts,
    load_queries,
    make_records,
)
from benchmarks.harness.processes import children, cpu_seconds  # noqa: E402
from benchmarks.harness.trees import compile_tree  # noqa: E402
from retrieval.embedding.embedder import HashEmbedder, SentenceTransformerEmbedder  # noqa: E402

HANDSHAKE_TARGET_S = 0.25
READY_TARGET_S = 2.0
RSS_TARGET_MB = 400.0
AGENT = 0  # the identity that recalls: agent-00 of proj-alpha


def server_command(root: Path | None = None) -> list[str]:
    """``pattern-memory serve`` of this tree, or of the checkout ``root`` (its own ``.venv``)."""
    if root is not None:
        return [str(root / ".venv" / "bin" / "python"), "-m", "server.cli", "serve"]
    exe = shutil.which("pattern-memory", path=str(Path(sys.executable).parent))
    return [exe, "serve"] if exe else [sys.executable, "-m", "server.cli", "serve"]


def stop_daemon(home: str, env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "-m", "server.cli", "stop", "--home", home],
                   env=env, capture_output=True, timeout=120, cwd=ROOT)  # fmt: skip


def proc_memory(pid: int) -> dict[str, float]:
    """VmRSS, RssAnon, RssFile of a process and its children together, in MB (from
    /proc/PID/status), and their Pss (from smaps_rollup: shared pages divided between the
    processes that map them, so the libraries both load count once)."""
    out: dict[str, float] = {"processes": 0, "Pss": 0.0}
    for p in [pid, *children(pid)]:
        out["processes"] += 1
        for line in Path(f"/proc/{p}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
                out[key] = round(out.get(key, 0.0) + int(value.split()[0]) / 1024, 1)
        for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                out["Pss"] = round(out["Pss"] + int(line.split()[1]) / 1024, 1)
    return out


async def one_start(env: dict[str, str]) -> tuple[float, int]:
    cmd = server_command()
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=env)
    t0 = time.perf_counter()
    async with Client(params) as client:
        tools = await client.list_tools()
        elapsed = time.perf_counter() - t0
    return elapsed, len(tools.tools)


async def ready_start(
    env: dict[str, str], query: str, idle: float, root: Path | None = None
) -> dict:
    """Spawn ``serve`` on a built store; recall until the answer is hybrid; then idle RSS.
    Hybrid is the ranking, whatever the vector side's source: the mode names it when the
    vector index's process is still opening and the stored vectors were scored exactly
    ("hybrid (vector index opening: exact scan …)"); ``first_mode`` keeps that answer's mode."""
    cmd = server_command(root)
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=env)
    t0 = time.perf_counter()
    calls, mode = 0, ""
    async with Client(params, read_timeout_seconds=120) as client:
        while mode.split(" (")[0] != "hybrid":
            res = await client.call_tool("recall", {"query": query, "limit": 5})
            calls += 1
            if res.is_error:
                raise RuntimeError(f"recall failed: {res.content}")
            mode = (res.structured_content or {}).get("mode") or ""
            n_items = len((res.structured_content or {}).get("items", []))
            if mode.split(" (")[0] != "hybrid":
                if time.perf_counter() - t0 > 300:
                    raise RuntimeError("the model did not load within 300 s")
                await anyio.sleep(0.02)
        ready = time.perf_counter() - t0
        pid = json.loads((Path(env["PATTERN_HOME"]) / "daemon.json").read_text())["pid"]
        cpu = cpu_seconds(pid)  # the daemon's own processor time to that answer
        # the first answer may have scored stored vectors exactly (the vector index's process
        # starts once the daemon serves): after the idle wait, one more recall goes through
        # Chroma, so the RSS read below includes the index's loaded collections
        await anyio.sleep(idle)
        await client.call_tool("recall", {"query": query, "limit": 5})
        await anyio.sleep(1.0)
        info = json.loads((Path(env["PATTERN_HOME"]) / "daemon.json").read_text())
        mem = proc_memory(info["pid"])
    return {"ready_s": ready, "cpu_s": cpu, "calls": calls, "items": n_items, "first_mode": mode,
            **mem}  # fmt: skip


def load() -> float:
    """The machine's 1-minute load average."""
    return round(os.getloadavg()[0], 2)


def bare_python() -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - t0


class SameIdHash(HashEmbedder):
    """Hash vectors (384-d) stored under the real model's id: a daemon that loads the real
    model finds every record embedded by it and re-embeds nothing."""

    def __init__(self) -> None:
        super().__init__(384)
        self.model_id = SentenceTransformerEmbedder().model_id


def build_store(n: int) -> tuple[str, float]:
    from retrieval.engine import Engine

    home = tempfile.mkdtemp(prefix="pm-startup-store-")
    t0 = time.perf_counter()
    eng = Engine(home, SameIdHash())
    try:
        eng.add(make_records(corpus_texts(n, DATA)), batch=1000)
        eng.store.checkpoint()
    finally:
        eng.close()
    return home, time.perf_counter() - t0


PROBE = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
store = sys.argv[2]
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
t0 = time.perf_counter()
exec(sys.argv[3])
print(json.dumps({"s": time.perf_counter() - t0, "rss_mb": rss()}))
"""

LEXICAL_RECALLS = (
    "from benchmarks.scale import DATA, load_queries, visible_buckets\n"
    "from retrieval.engine import Engine\n"
    "from retrieval.records import RecordFilter\n"
    "eng = Engine(store)\n"
    "f = RecordFilter(buckets=visible_buckets(0))\n"
    "for q in load_queries(DATA, 20):\n"
    "    eng.search(q, f, k=10)"
)

PARTS = {
    "python (bare)": "pass",
    "import numpy": "import numpy",
    "import tokenizers + tokenizer.json": (
        "from retrieval.embedding.tokenizer import ModelTokenizer\n"
        "from retrieval.embedding.embedder import default_model_path\n"
        "ModelTokenizer(default_model_path())(['warm up'])"
    ),
    "import onnxruntime": "import onnxruntime",
    "onnx session (float, warmed)": (
        "from retrieval.embedding.embedder import SentenceTransformerEmbedder\n"
        "SentenceTransformerEmbedder(backend='onnx').load().embed_query('warm up')"
    ),
    "import chromadb": "import chromadb",
    "chroma: open store + 1 query": (
        "import numpy as np\n"
        "from retrieval.vector.vectors import VectorIndex\n"
        "v = VectorIndex(os.path.join(store, 'chroma'))\n"
        "from retrieval.storage.store import SQLiteStore\n"
        "b = SQLiteStore(os.path.join(store, 'pattern.sqlite3')).all_buckets()\n"
        "from retrieval.embedding.embedder import SentenceTransformerEmbedder as S\n"
        "v.query(b, S().model_id, np.ones(384, dtype=np.float32) / 384 ** .5, 100)"
    ),
    "sqlite: open + integrity_check": (
        "from retrieval.storage.store import SQLiteStore\n"
        "SQLiteStore(os.path.join(store, 'pattern.sqlite3')).integrity_check()"
    ),
    "sqlite: 20 lexical recalls (mmap 1 GB)": LEXICAL_RECALLS,
    "sqlite: 20 lexical recalls (no mmap)": "os.environ['PATTERN_SQLITE_MMAP_MB'] = '0'\n"
    + LEXICAL_RECALLS,
    "sqlite: + in-memory postings built": (
        "from retrieval.storage.store import SQLiteStore\n"
        "from retrieval.fulltext.lexical import LexicalIndex\n"
        "s = SQLiteStore(os.path.join(store, 'pattern.sqlite3'))\n"
        "LexicalIndex(s, postings_min=0).postings.build(s.reader)"
    ),
    "import mcp server (app)": "import server.mcp.app",
    "import torch": "import torch",
    "import sentence_transformers": "import sentence_transformers",
    "torch backend: model loaded": (
        "from retrieval.embedding.embedder import SentenceTransformerEmbedder\n"
        "SentenceTransformerEmbedder(backend='torch').load().embed_query('warm up')"
    ),
}


def breakdown(store: str) -> dict[str, dict[str, float]]:
    out = {}
    for name, code in PARTS.items():
        runs = []
        for _ in range(2):  # the second run: imports from a warm page cache
            proc = subprocess.run(
                [sys.executable, "-c", PROBE, str(ROOT), store, code],
                capture_output=True, text=True, check=True, cwd=ROOT,
            )  # fmt: skip
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        best = min(runs, key=lambda r: r["s"])
        out[name] = {"s": round(best["s"], 3), "rss_mb": round(best["rss_mb"], 1)}
        print(f"  {name:<42}{best['s']:>8.3f} s{best['rss_mb']:>9.1f} MB", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="runs per figure (medians reported)")
    ap.add_argument(
        "--ready-runs", type=int, default=None, help="model-ready + RSS runs (default: --runs)"
    )
    ap.add_argument("--memories", type=int, default=10_000, help="memories in the built store")
    ap.add_argument("--idle", type=float, default=3.0, help="seconds idle before reading RSS")
    ap.add_argument(
        "--embedder",
        default="sentence-transformers",
        help="PATTERN_EMBEDDER for the handshake runs (default: the real model)",
    )
    ap.add_argument("--no-breakdown", action="store_true", help="skip the per-part table")
    ap.add_argument("--no-torch", action="store_true", help="skip the torch-backend baseline")
    ap.add_argument("--json", dest="json_out")
    ap.add_argument("--old-root", type=Path, help="the previous release's checkout (with .venv), "
                    "measured in the same run: ready runs alternate with this tree's")  # fmt: skip
    args = ap.parse_args()
    compile_tree(ROOT)
    if args.old_root:
        compile_tree(args.old_root)
    if args.ready_runs is None:
        args.ready_runs = args.runs
    base_env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}  # fmt: skip

    # 1. handshake
    times, loads, ntools = [], [], 0
    for i in range(args.runs):
        home = tempfile.mkdtemp(prefix="pm-startup-")
        env = {**base_env, "PATTERN_HOME": home, "PATTERN_EMBEDDER": args.embedder,
               "PATTERN_PROJECT_ID": "bench", "PATTERN_AGENT_ID": "bench"}  # fmt: skip
        loads.append(load())
        try:
            t, ntools = anyio.run(one_start, env)
        finally:  # the bridge started a daemon for this store: stop it
            stop_daemon(home, env)
            shutil.rmtree(home, ignore_errors=True)
        times.append(t)
        print(f"handshake run {i + 1}: {t:.3f} s  ({ntools} tools; load {loads[-1]})", flush=True)
    floor = statistics.median(bare_python() for _ in range(3))
    result: dict = {
        "handshake_s": round(statistics.median(times), 3) if times else None,
        "runs_s": [round(t, 3) for t in times],
        "loadavg_runs": loads,
        "loadavg": statistics.median(loads) if loads else None,
        "tools": ntools,
        "python_start_s": round(floor, 3),
        "target_s": HANDSHAKE_TARGET_S,
    }

    # 2-4. model ready and idle RSS on a built store
    if args.ready_runs > 0:
        from retrieval.embedding import onnx_model

        emb = SentenceTransformerEmbedder()
        t0 = time.perf_counter()
        onnx_model.ensure_exported(emb.model_path, emb.quantize)
        print(f"ONNX export present ({time.perf_counter() - t0:.1f} s)", flush=True)
        store, fill_s = build_store(args.memories)
        print(f"built a {args.memories}-memory store in {fill_s:.1f} s: {store}", flush=True)
        query = load_queries(DATA, 1)[0]
        env = {**base_env, "PATTERN_HOME": store, "PATTERN_EMBEDDER": "sentence-transformers",
               "PATTERN_PROJECT_ID": agent_project(AGENT),
               "PATTERN_AGENT_ID": agent_name(AGENT)}  # fmt: skip
        env.pop("PATTERN_EMBED_BACKEND", None)
        old_env = {**env, "PYTHONPATH": str(args.old_root)} if args.old_root else None
        try:
            ready, old = [], []
            for i in range(args.ready_runs):
                for tree, runs, e, root in (("this tree", ready, env, None),
                                            ("previous release", old, old_env, args.old_root)):  # fmt: skip
                    if e is None:
                        continue
                    at = load()
                    try:
                        r = anyio.run(ready_start, e, query, args.idle, root)
                    finally:
                        stop_daemon(store, env)
                    r["loadavg"] = at
                    runs.append(r)
                    print(f"{tree}: ready run {i + 1} (load {at}): first hybrid recall after {r['ready_s']:.3f} s "
                          f"(daemon CPU {r['cpu_s']:.2f} s) "
                          f"({r['calls']} calls, {r['items']} items, mode {r['first_mode']!r}); idle RSS {r['VmRSS']} MB "
                          f"(anon {r['RssAnon']}, file {r['RssFile']})", flush=True)  # fmt: skip
            if old:
                result["old"] = {
                    "root": str(args.old_root),
                    "model_ready_s": round(statistics.median(r["ready_s"] for r in old), 3),
                    "model_ready_cpu_s": round(statistics.median(r["cpu_s"] for r in old), 3),
                    "rss_mb": statistics.median(r["VmRSS"] for r in old),
                    "pss_mb": statistics.median(r["Pss"] for r in old),
                    "ready_runs_s": [round(r["ready_s"], 3) for r in old],
                    "ready_loadavg_runs": [r["loadavg"] for r in old],
                    "ready_loadavg": statistics.median(r["loadavg"] for r in old),
                }
            result |= {
                "model_ready_s": round(statistics.median(r["ready_s"] for r in ready), 3),
                "model_ready_cpu_s": round(statistics.median(r["cpu_s"] for r in ready), 3),
                "rss_mb": statistics.median(r["VmRSS"] for r in ready),
                "rss_anon_mb": statistics.median(r["RssAnon"] for r in ready),
                "rss_file_mb": statistics.median(r["RssFile"] for r in ready),
                "pss_mb": statistics.median(r["Pss"] for r in ready),
                "daemon_processes": ready[0]["processes"],
                "ready_runs_s": [round(r["ready_s"], 3) for r in ready],
                "first_modes": [r["first_mode"] for r in ready],
                "ready_loadavg_runs": [r["loadavg"] for r in ready],
                "ready_loadavg": statistics.median(r["loadavg"] for r in ready),
                "rss_runs_mb": [r["VmRSS"] for r in ready],
                "memories": args.memories,
                "model_ready_target_s": READY_TARGET_S,
                "rss_target_mb": RSS_TARGET_MB,
            }
            if not args.no_torch:
                torch_env = {**env, "PATTERN_EMBED_BACKEND": "torch"}
                try:
                    r = anyio.run(ready_start, torch_env, query, args.idle)
                finally:
                    stop_daemon(store, torch_env)
                print(f"torch backend (baseline): first hybrid recall after {r['ready_s']:.3f} s;"
                      f" idle RSS {r['VmRSS']} MB", flush=True)  # fmt: skip
                result |= {"torch_model_ready_s": round(r["ready_s"], 3),
                           "torch_rss_mb": r["VmRSS"]}  # fmt: skip
            if not args.no_breakdown:
                print("\nbreakdown (fresh interpreter each, best of 2):", flush=True)
                result["breakdown"] = breakdown(store)
        finally:
            shutil.rmtree(store, ignore_errors=True)

    print(f"\n{'measure':<48}{'value':>10}{'target':>10}")
    rows = [("bare python start s (baseline)", result["python_start_s"], None)]
    if times:
        rows.insert(0, (f"handshake s (median of {args.runs}, load {result['loadavg']})",
                        result["handshake_s"], HANDSHAKE_TARGET_S))  # fmt: skip
    if "model_ready_s" in result:
        rows += [
            (f"model_ready s (median of {args.ready_runs}, load {result['ready_loadavg']})",
             result["model_ready_s"], READY_TARGET_S),
            (f"idle daemon RSS MB ({args.memories} memories)", result["rss_mb"], RSS_TARGET_MB),
            (f"  over {result['daemon_processes']} processes; their PSS MB", result["pss_mb"],
             None),
            ("  of which anon / file MB", f"{result['rss_anon_mb']}/{result['rss_file_mb']}", None),
        ]  # fmt: skip
    if "model_ready_cpu_s" in result:
        rows.append(("  the daemon's CPU s to it", result["model_ready_cpu_s"], None))
    if "old" in result:
        rows += [("previous release: model_ready s", result["old"]["model_ready_s"], None),
                 ("previous release: the daemon's CPU s", result["old"]["model_ready_cpu_s"], None),
                 ("previous release: idle RSS MB", result["old"]["rss_mb"], None)]  # fmt: skip
    if "torch_model_ready_s" in result:
        rows += [("torch backend: model_ready s", result["torch_model_ready_s"], None),
                 ("torch backend: idle RSS MB", result["torch_rss_mb"], None)]  # fmt: skip
    for label, value, target in rows:
        v = f"{value:.3f}" if isinstance(value, float) else str(value)
        print(f"{label:<48}{v:>10}{'' if target is None else target:>10}")
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
