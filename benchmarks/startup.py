"""Time from process start to a completed MCP ``initialize`` + ``tools/list`` over stdio.

    python benchmarks/startup.py [--runs 5] [--json OUT]

Each run is a cold start of ``pattern-memory serve`` (the stdio bridge) in a fresh store
folder: no daemon runs, the bridge starts one. The handshake answers are replayed from the
bridge's per-code-version cache once a first start has filled it (run 1 after an install or
upgrade pays the daemon start), and the embedding model loads in the background. Prints every run and
the median; JSON key ``handshake_s`` is the median. Baseline in the same run: the bare
interpreter start (``python -c pass``), the floor any Python server pays.
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


def server_command() -> list[str]:
    exe = shutil.which("pattern-memory", path=str(Path(sys.executable).parent))
    return [exe, "serve"] if exe else [sys.executable, "-m", "server.cli", "serve"]


async def one_start(env: dict[str, str]) -> tuple[float, int]:
    cmd = server_command()
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=env)
    t0 = time.perf_counter()
    async with Client(params) as client:
        tools = await client.list_tools()
        elapsed = time.perf_counter() - t0
    return elapsed, len(tools.tools)


def bare_python() -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument(
        "--embedder",
        default="sentence-transformers",
        help="PATTERN_EMBEDDER for the server (default: the real model)",
    )
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args()
    times, ntools = [], 0
    for i in range(args.runs):
        home = tempfile.mkdtemp(prefix="pm-startup-")
        env = {
            **os.environ,
            "PATTERN_HOME": home,
            "PATTERN_EMBEDDER": args.embedder,
            "PATTERN_PROJECT_ID": "bench",
            "PATTERN_AGENT_ID": "bench",
        }
        try:
            t, ntools = anyio.run(one_start, env)
        finally:  # the bridge started a daemon for this store: stop it
            subprocess.run([sys.executable, "-m", "server.cli", "stop", "--home", home],
                           env=env, capture_output=True, timeout=120)  # fmt: skip
            shutil.rmtree(home, ignore_errors=True)
        times.append(t)
        print(f"run {i + 1}: {t:.3f} s  ({ntools} tools)", flush=True)
    floor = statistics.median(bare_python() for _ in range(3))
    result = {
        "handshake_s": round(statistics.median(times), 3),
        "runs_s": [round(t, 3) for t in times],
        "tools": ntools,
        "python_start_s": round(floor, 3),
        "target_s": 1.5,
    }
    print(f"\n{'measure':<32}{'seconds':>10}")
    label = f"handshake (median of {args.runs})"
    print(f"{label:<32}{result['handshake_s']:>10.3f}")
    print(f"{'bare python start (baseline)':<32}{result['python_start_s']:>10.3f}")
    print(f"{'target':<32}{1.5:>10.3f}")
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
