"""A small store scanned exactly against the same store searched through the vector index.

    python -m benchmarks run exact_scan [--sizes 50,500,2000,4000,8000] [--queries 200]
        [--json OUT] [--baseline OLD.json]

For each size: one store of that many records of one window each (the hashing embedder at
the packaged model's 384 dimensions: the cost measured is the vector side's, not the model's), searched by meaning (``mode=vector``,
k=10) with ``--queries`` queries, twice: scanned exactly (the store below the threshold,
``retrieval/vector/index_size.py``) and through the index (``index_from=0``: the index's child
process opened, as every store was before the threshold). Reported per size and way: the
search's p50 and p95 in ms, the top 10's agreement between the two ways (the index proposes
candidates, rescored exactly: 1.0 unless it missed one), and the stores' processes: the index
is a second process of 80-110 MB resident. With ``--baseline``, the previous run's rows beside.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.harness.report import write_json
from benchmarks.memory_parts import rss_mb
from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.records import Kind, Record, RecordFilter, Scope

WORDS = [f"w{i}" for i in range(3000)]
DIM = 384  # the packaged model's: what a window costs to read and score


def records(n: int, seed: int = 0) -> list[Record]:
    rng = random.Random(seed)
    return [
        Record(
            id=f"r{i:06d}",
            kind=Kind.memory,
            scope=Scope.team,
            project_id="p",
            agent_id="a",
            content=" ".join(rng.choices(WORDS, k=24)),
        )  # fmt: skip
        for i in range(n)
    ]


def queries(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=6)) for _ in range(n)]


def measure(home: Path, size: int, qs: list[str], index_from: int) -> tuple[dict, list[list[str]]]:
    eng = Engine(home, HashEmbedder(DIM), index_from=index_from)
    try:
        if not eng.store.all_buckets():
            eng.add(records(size))
        if index_from == 0:
            eng.vectors.wait_ready(120)
        f = RecordFilter()
        for q in qs[:10]:  # warm: the windows kept in memory, the child's first query
            eng.search(q, f, k=10, mode="vector")
        times, tops = [], []
        for q in qs:
            t = time.perf_counter()
            hits = eng.search(q, f, k=10, mode="vector")
            times.append((time.perf_counter() - t) * 1000)
            tops.append([h.record.id for h in hits])
        times.sort()
        proc = eng.vectors._proc if eng.vectors is not None else None
        row = {
            "size": size,
            "way": "index" if index_from == 0 else "exact",
            "p50_ms": round(statistics.median(times), 2),
            "p95_ms": round(times[int(0.95 * (len(times) - 1))], 2),
            "index_process": proc is not None,
            "index_rss_mb": rss_mb(proc.pid)["VmRSS"] if proc is not None else 0.0,
        }
        return row, tops
    finally:
        eng.close()


def agreement(a: list[list[str]], b: list[list[str]]) -> float:
    return round(
        statistics.mean(len(set(x) & set(y)) / max(len(x), 1) for x, y in zip(a, b, strict=True)), 4
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="50,500,2000,4000,8000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--json")
    ap.add_argument("--baseline")
    args = ap.parse_args(argv)
    qs = queries(args.queries)
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            exact, exact_tops = measure(Path(tmp) / "exact", size, qs, 10**9)
            index, index_tops = measure(Path(tmp) / "index", size, qs, 0)
        exact["top10_agreement"] = index["top10_agreement"] = agreement(exact_tops, index_tops)
        rows += [exact, index]
    base = json.loads(Path(args.baseline).read_text()) if args.baseline else {}
    base = base.get("result", base)  # a published run, or what --json wrote
    old = {(int(n), w): r for n, ways in base.get("sizes", {}).items()
           for w, r in ways.items() if isinstance(r, dict)}  # fmt: skip
    print(f"{'records':>8} {'way':>6} {'p50 ms':>8} {'p95 ms':>8} {'agree@10':>9} "
          f"{'index proc':>10} {'its RSS MB':>10}" + ("   baseline p50/p95" if old else ""))  # fmt: skip
    for r in rows:
        line = (f"{r['size']:>8} {r['way']:>6} {r['p50_ms']:>8} {r['p95_ms']:>8} "
                f"{r['top10_agreement']:>9} {str(r['index_process']):>10} {r['index_rss_mb']:>10}")  # fmt: skip
        b = old.get((r["size"], r["way"]))
        print(line + (f"   {b['p50_ms']}/{b['p95_ms']}" if b else ""))
    if args.json:
        sizes: dict[str, dict] = {}
        for r in rows:
            sizes.setdefault(str(r["size"]), {})[r["way"]] = r
            sizes[str(r["size"])]["top10_agreement"] = r["top10_agreement"]
        write_json(args.json, {"queries": args.queries, "sizes": sizes})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
