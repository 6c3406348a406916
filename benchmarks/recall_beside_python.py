"""Recall while another thread of the server runs Python.

    python benchmarks/recall_beside_python.py [--memories 2000] [--queries 40]
        [--embedder sentence-transformers] [--old-root PREVIOUS] [--json OUT]

A server's threads share one interpreter lock (the GIL). A search gives it up at every SQLite
statement, every row a cursor returns and every model pass, and must take it back each time;
while another thread runs Python (a bulk write's records, an import, the session indexer
reading transcripts), it gets it back only when that thread's switch interval runs out
(CPython's default: 5 ms). A search that reads thousands of rows one by one then waits
seconds.

The script builds a store of ``--memories`` one-line notes of 8 agents (team scope, as
``benchmarks/concurrency.py`` writes them), then times ``recall`` in the process, as the MCP
tool calls it, for agent a0: ``--queries`` queries, first with nothing else running
(``alone``), then beside one thread that runs Python without pause (``beside_python``). The
process is set up as ``pattern-memory daemon`` sets up its own (``serving_threads``: the BLAS
threads and, where the tree sets one, the switch interval).

``--old-root DIR``: the same measurement with DIR's code and ``DIR/.venv`` (the previous
release), in a process of its own, before this tree's: both columns come from one run. JSON:
``result`` (this tree: p50 / p95 ms of each pass, the switch interval) and ``result.old``.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROWS = ("alone_p50_ms", "alone_p95_ms", "beside_python_p50_ms", "beside_python_p95_ms",
        "slowdown_p50", "switch_interval_ms", "memories")  # fmt: skip


def notes(n: int) -> list[tuple[str, str]]:
    """(agent, text) of the store's memories."""
    return [(f"a{i % 8}", f"a{i % 8} note {i}: the build step {i % 37} needs cache key "
             f"{i * 7919 % 1000}") for i in range(n)]  # fmt: skip


def pct(values: list[float], q: int) -> float:
    return round(statistics.quantiles(values, n=100)[q - 1], 1)


@functools.cache
def _trees():
    """``benchmarks/harness/trees.py`` of this file's tree, loaded by its path: the measuring
    child runs with the previous release's code first on its path, whose ``benchmarks``
    package is that release's."""
    spec = importlib.util.spec_from_file_location(
        "_beside_trees", ROOT / "benchmarks" / "harness" / "trees.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(memories: int, queries: int, embedder: str) -> dict:
    """The child: build the store, time the recalls (ms), alone then beside busy Python."""
    from server.cli.serve_commands import serving_threads

    serving_threads()
    from retrieval.records import Record, Scope

    moved = _trees().moved
    Identity = moved("server.service.core.identity", "server.service.identity", "Identity")
    RecallInput = moved("server.service.core.models", "server.service.models", "RecallInput")
    Runtime = moved("server.service.core.runtime", "server.service.runtime", "Runtime")
    recall = moved("server.service.recalling.recall", "server.service.recall", "recall")

    home = tempfile.mkdtemp(prefix="pm-beside-")
    env = {
        **os.environ,
        "PATTERN_HOME": home,
        "PATTERN_PROJECT_ID": "beside",
        "PATTERN_EMBEDDER": embedder,
    }
    rt = Runtime.start(env, background=False)
    try:
        svc = rt.service
        svc.engine.add([Record(project_id=rt.identity.project_id, agent_id=agent,
                               scope=Scope.team, content=text)
                        for agent, text in notes(memories)])  # fmt: skip
        who = Identity(project_id=rt.identity.project_id, agent_id="a0")
        asks = [f"which cache key does build step {i % 37} need?" for i in range(queries)]

        def timed() -> list[float]:
            out = []
            for q in asks:
                t0 = time.perf_counter()
                recall(svc, who, RecallInput(query=q))
                out.append((time.perf_counter() - t0) * 1000)
            return out

        timed()  # warm: the query vectors, the matrix, the caches
        alone = timed()
        stop = threading.Event()

        def busy() -> None:
            x = 0
            while not stop.is_set():
                for i in range(1000):
                    x += i

        worker = threading.Thread(target=busy, daemon=True)
        worker.start()
        try:
            beside = timed()
        finally:
            stop.set()
            worker.join()
    finally:
        rt.close()
        shutil.rmtree(home, ignore_errors=True)
    return {
        "alone_p50_ms": pct(alone, 50),
        "alone_p95_ms": pct(alone, 95),
        "beside_python_p50_ms": pct(beside, 50),
        "beside_python_p95_ms": pct(beside, 95),
        "slowdown_p50": round(pct(beside, 50) / max(pct(alone, 50), 0.1), 1),
        "switch_interval_ms": round(sys.getswitchinterval() * 1000, 2),
        "memories": memories,
    }


def run_tree(root: Path, python: str, args) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root)}
    cmd = [python, "-P", str(Path(__file__).resolve()), "--child", "--memories", str(args.memories),
           "--queries", str(args.queries), "--embedder", args.embedder]  # fmt: skip
    proc = subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"{root}: the measurement failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=2000)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--embedder", default="sentence-transformers")
    ap.add_argument("--old-root", help="the previous release's checkout (with .venv)")
    ap.add_argument("--json", dest="json_out")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.memories, args.queries, args.embedder)))
        return 0
    old = None
    if args.old_root:
        root = Path(args.old_root).resolve()
        old = run_tree(root, _trees().python_of(root), args)
    result = run_tree(ROOT, sys.executable, args)
    print(f"{'measure':<24}{'this tree':>12}" + (f"{'previous':>12}" if old else ""))
    for key in ROWS:
        print(f"{key:<24}{result[key]!s:>12}" + (f"{old[key]!s:>12}" if old else ""))
    if args.json_out:
        out = {"benchmark": "recall_beside_python.py", "result": {**result, "old": old}}
        Path(args.json_out).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
