"""Does the collection across buckets rank a search over every bucket as the buckets do?

    python benchmarks/across.py [--data DIR] [--json OUT] [--limit N]

A BEIR set (SciFact by default) spread over the scale benchmark's 44 buckets (20 agents,
3 projects, the 4 scopes in the same shares: ``benchmarks/harness/corpus.py``), indexed with
the real model, each labelled question asked of every bucket (no agent's filter) twice on
the same store in the same run: by the collection across buckets
(``retrieval/vector/across.py``) and bucket by bucket, as a store without it is asked. Prints
nDCG@10 / recall@10 of hybrid and vector ranking each way, how many of the vector side's top
100 candidates the two share, and each way's latency. The across collection only proposes
candidates (each is scored from its stored vectors), so the two can differ only where one
approximate index misses a candidate that 44 small ones find.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.harness.corpus import N_AGENTS, SCOPES, agent_name, agent_project  # noqa: E402
from benchmarks.harness.embed_cache import make_embedder  # noqa: E402
from benchmarks.harness.metrics import mean_metrics, query_metrics  # noqa: E402
from benchmarks.harness.report import format_table, pct, write_json  # noqa: E402
from benchmarks.harness.sets import beir_set  # noqa: E402
from retrieval.engine import Engine  # noqa: E402
from retrieval.records import Record, RecordFilter  # noqa: E402
from retrieval.vector.across import ACROSS, BUILT, meta_key  # noqa: E402

DATA = Path("/work/shared/data/scifact")


def spread(records: list[Record], seed: int = 11) -> list[Record]:
    """Each record in the bucket of a random agent and scope, in the scale store's shares."""
    rng = random.Random(seed)
    scopes, weights = zip(*SCOPES, strict=True)
    out = []
    for r in records:
        a = rng.randrange(N_AGENTS)
        scope = rng.choices(scopes, weights)[0]
        out.append(r.model_copy(update={"project_id": agent_project(a), "agent_id": agent_name(a),
                                        "scope": scope}))  # fmt: skip
    return out


def ask(engine: Engine, queries, mode: str, across: bool) -> tuple[dict, list[float], dict]:
    """(mean metrics, latencies in ms, each query's vector-side top-100 ids) one way."""
    serves = engine._sync.across.serves
    if not across:
        engine._sync.across.serves = lambda *a: False  # asked bucket by bucket
    rows, ms, tops = [], [], {}
    try:
        for q in queries:
            t = time.perf_counter()
            hits = engine.search(q.text, RecordFilter(), 10, mode=mode)
            ms.append(1000 * (time.perf_counter() - t))
            ranked = [h.record.metadata.get("doc_id", h.record.id) for h in hits]
            rows.append(query_metrics(ranked, q.relevant))
            if mode == "vector":
                tops[q.qid] = [h.record.id for h in engine.search(q.text, RecordFilter(), 100,
                                                                  mode="vector")]  # fmt: skip
    finally:
        engine._sync.across.serves = serves
    return mean_metrics(rows), ms, tops


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(DATA), help="a BEIR folder (corpus, queries, qrels)")
    ap.add_argument("--split", default=None)
    ap.add_argument("--json", help="write the results as JSON to this file")
    ap.add_argument("--limit", type=int, default=0, help="ask only the first N questions")
    args = ap.parse_args(argv)
    records, queries, _corpus, split = beir_set(Path(args.data), args.split)
    records = spread(records)
    if args.limit:
        queries = queries[: args.limit]
    embedder = make_embedder(True)
    with tempfile.TemporaryDirectory(prefix="pm-across-") as home:
        engine = Engine(Path(home), embedder, index_from=0, background_vectors=True)
        try:
            t0 = time.perf_counter()
            engine.add(records)
            engine.wait_vectors(3600)
            buckets = engine.bucket_count()
            print(f"{len(records)} records in {buckets} buckets, indexed in "
                  f"{time.perf_counter() - t0:.1f} s", flush=True)  # fmt: skip
            t0 = time.perf_counter()
            engine.search("start", RecordFilter(), 10)  # the first search over every bucket
            engine.wait_vectors(3600)
            model = embedder.model_id
            if engine.store.meta(meta_key(model)) != BUILT:
                raise SystemExit("the collection across buckets was not built")
            copy_s = time.perf_counter() - t0
            results: dict = {"records": len(records), "buckets": buckets, "queries": len(queries),
                             "split": split, "across_copy_s": round(copy_s, 1),
                             "across_vectors": engine.vectors.count(ACROSS, model)}  # fmt: skip
            table = []
            tops: dict[str, dict] = {}
            for mode in ("hybrid", "vector"):
                for across in (False, True):
                    ask(engine, queries[:20], mode, across)  # warm: caches, collections
                    metrics, ms, top = ask(engine, queries, mode, across)
                    name = f"{mode}, {'across buckets' if across else 'bucket by bucket'}"
                    row = {**metrics, "p50_ms": round(pct(ms, 50), 2),
                           "p95_ms": round(pct(ms, 95), 2)}  # fmt: skip
                    table.append((name, row))
                    results[name] = row
                    if top:
                        tops[name] = top
            a, b = tops["vector, across buckets"], tops["vector, bucket by bucket"]
            shared = [len(set(a[q]) & set(b[q])) / max(1, len(b[q])) for q in b]
            results["vector_top100_shared"] = round(sum(shared) / max(1, len(shared)), 4)
            results["vector_top100_identical_queries"] = sum(a[q] == b[q] for q in b)
        finally:
            engine.close()
    print(format_table(f"{Path(args.data).name} over {buckets} buckets, every bucket asked", table))
    print(f"vector top 100 shared: {results['vector_top100_shared']:.4f}  identical in "
          f"{results['vector_top100_identical_queries']}/{len(queries)} queries; copy into the "
          f"across collection {results['across_copy_s']} s")  # fmt: skip
    write_json(args.json, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
