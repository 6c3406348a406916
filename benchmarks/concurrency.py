"""Many agents, one store: no write may be lost or duplicated.

    python benchmarks/concurrency.py [--agents 8 --writes 500] [--json OUT]

Starts N agent processes; each runs the official MCP client over stdio against its own
``pattern-memory serve`` bridge (so N bridges share one daemon), writes W memories with
interleaved recalls (one every 10 writes), and reports per-call latencies. Then counts what the
store holds: expected, present, duplicated. JSON keys: expected, present, duplicated,
writes_per_s, p50_ms, p95_ms (+ recall latencies and the standalone scenario).

Second scenario (baseline): two ``serve --standalone`` processes on one store — the second must
be refused cleanly (one owner per store) and the store must stay intact.
"""

from __future__ import annotations

import argparse
import json
import os
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
    return {"writes": w_lat, "recalls": r_lat, "errors": errors}


def worker_main(args) -> int:
    out = anyio.run(agent, args.home, args.name, args.writes, args.embedder)
    Path(args.out).write_text(json.dumps(out))
    return 0


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


def pct(values: list[float], q: float) -> float:
    return (
        round(statistics.quantiles(values, n=100)[int(q) - 1] * 1000, 1) if len(values) > 1 else 0.0
    )


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agents", type=int, default=8)
    ap.add_argument("--writes", type=int, default=500)
    ap.add_argument("--embedder", default="sentence-transformers")
    ap.add_argument("--json", dest="json_out")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--home", help=argparse.SUPPRESS)
    ap.add_argument("--name", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker_main(args)

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
    codes = [p.wait() for p in procs]
    wall = time.perf_counter() - t0
    results = [json.loads(o.read_text()) for o in outs if o.exists()]
    writes = [x for r in results for x in r["writes"]]
    recalls = [x for r in results for x in r["recalls"]]
    errors = [e for r in results for e in r["errors"]]
    subprocess.run([*serve_cmd()[:1], "stop", "--home", home] if serve_cmd()[0].endswith("pattern-memory")
                   else [sys.executable, "-m", "server.cli", "stop", "--home", home], check=False)  # fmt: skip
    counts = count_store(home, args.agents, args.writes)
    result = {
        **counts,
        "writes_per_s": round(len(writes) / wall, 1),
        "p50_ms": pct(writes, 50),
        "p95_ms": pct(writes, 95),
        "recall_p50_ms": pct(recalls, 50),
        "recall_p95_ms": pct(recalls, 95),
        "agents": args.agents,
        "writes_per_agent": args.writes,
        "wall_s": round(wall, 1),
        "agent_exit_codes": codes,
        "tool_errors": errors[:5],
        "standalone": standalone_scenario(args.embedder),
    }
    shutil.rmtree(home, ignore_errors=True)
    print(f"{'metric':<22}{'value':>12}")
    for key in ("expected", "present", "duplicated", "integrity", "writes_per_s", "p50_ms", "p95_ms",
                "recall_p50_ms", "recall_p95_ms", "wall_s"):  # fmt: skip
        print(f"{key:<22}{result[key]!s:>12}")
    sa = result["standalone"]
    print(f"\nbaseline: two --standalone servers on one store -> second exits {sa['second_exit_code']}:"
          f" {sa['second_message']!r}; store integrity {sa['integrity']}")  # fmt: skip
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(json.dumps(result, indent=2))
    return 0 if counts["present"] == counts["expected"] and counts["duplicated"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
