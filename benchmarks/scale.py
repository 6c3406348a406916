"""Scale benchmark: write throughput, recall latency and memory of the engine at N memories.

    python benchmarks/scale.py --memories 100000 [--store DIR] [--json OUT] [--queries 300]

Fills a store with N memories of realistic length (sentences of the SciFact abstracts, combined
into pairs/triples when more distinct texts are needed), spread over 20 agents, 3 projects and
the 4 scopes, through ``Engine.add`` in batches with the real sentence-transformers embedder
(embedding included in the write rate). Then times ``Engine.search(query, k=10)`` over SciFact
queries (query embedding included): unfiltered, and with the visibility filter of one agent
(its private bucket in its project, its personal bucket, its project's team bucket, public).
The engine runs as the daemon runs it (``--vectors serving``: Chroma in a child process, the
outbox applied by the background writer; a slice's write time lasts until its vectors are in
the index); ``--vectors inline`` applies each write's vectors
in this process, on the writing thread (the library ``Engine``'s default).
The write rate has its baseline in the same run: ``encode_per_s`` is the bare model
(``embed_documents``) over the same texts in the same batches, measured slice by slice
alternating with the writes (so both see the same machine load); ``write_ratio`` =
write_per_s / encode_per_s (target >= 0.90: the store costs at most a tenth on top of the
model). Recall baselines in the same run: lexical-only and vector-only search with the same filter, and the
bare components (query embedding, FTS5 query, Chroma query).

``--store DIR`` keeps the filled store: a later run with the same DIR and N skips the fill and
reports the write rate measured when it was filled (saved in DIR/scale-fill.json).
``--curve 20000,100000,…`` grows one store to each size and measures the served store there
(write rate, recall latency, the daemon's memory, start-up, disk): :mod:`benchmarks.scale_curve`.
``--embedder hash`` is a latency proxy for loaded machines (see :class:`ProxyEmbedder`): its
write rate and rankings are not the real ones. Results and findings: docs/benchmarks.md, "Scale".
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.harness.corpus import (  # noqa: E402
    DATA,
    N_AGENTS,
    corpus_texts,
    load_queries,
    long_queries,
    make_records,
    visible_buckets,
)
from benchmarks.harness.processes import cpu_seconds  # noqa: E402
from benchmarks.harness.report import pct, write_json  # noqa: E402
from retrieval.embedding.embedder import HashEmbedder, SentenceTransformerEmbedder  # noqa: E402
from retrieval.engine import Engine  # noqa: E402
from retrieval.fulltext.lexical import LexicalIndex  # noqa: E402
from retrieval.records import Record, RecordFilter  # noqa: E402


class ProxyEmbedder(HashEmbedder):
    """Latency proxy (``--embedder hash``): documents get HashEmbedder vectors (a 100k fill in
    minutes instead of hours on a loaded machine), queries are embedded by the real model, so a
    recall pays the real query-embedding cost and searches 100k 384-d vectors. Rankings are
    meaningless in this mode, and its write rate is not the real one."""

    def __init__(self, real: SentenceTransformerEmbedder) -> None:
        super().__init__(384)
        self.real = real
        self.query_threads = real.query_threads
        self.bulk_threads = 0

    def embed_query(self, text: str) -> np.ndarray:
        return self.real.embed_query(text)


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


FILL_BATCHES_PER_CALL = 10


def encode_only(engine: Engine, records: list[Record], batch: int) -> None:
    """What the model alone does for these records in ``Engine.add``: ``embed_documents`` over
    the same texts (every view of every window), one call per batch of records."""
    for i in range(0, len(records), batch):
        texts = [t for r in records[i : i + batch] for views in engine.views(r) for t, _ in views]
        engine.embedder.embed_documents(texts)


def vector_child_cpu(engine: Engine) -> float:
    """CPU seconds used so far by the vector index's child process (0 when in process)."""
    proc = getattr(engine.vectors, "_proc", None)
    if proc is None:
        return 0.0
    return cpu_seconds(proc.pid)


def fill(engine: Engine, records: list[Record], batch: int) -> dict:
    """Write the records through ``Engine.add`` (several batches per call: it pipelines them),
    slice by slice, each slice first encoded by the bare model (the baseline)."""
    n = len(records)
    load0 = os.getloadavg()[0]
    write_s = encode_s = write_cpu = encode_cpu = 0.0
    chunk = batch * FILL_BATCHES_PER_CALL
    for i in range(0, n, chunk):
        part = records[i : i + chunk]
        t, c = time.perf_counter(), time.process_time()
        encode_only(engine, part, batch)
        encode_s += time.perf_counter() - t
        encode_cpu += time.process_time() - c
        t, c = time.perf_counter(), time.process_time() + vector_child_cpu(engine)
        engine.add(part, batch=batch)
        engine.wait_vectors()  # written = in the vector index too (the background writer)
        write_s += time.perf_counter() - t
        write_cpu += time.process_time() + vector_child_cpu(engine) - c
        done = min(i + chunk, n)
        print(
            f"  filled {done:>7}/{n}  write {done / write_s:6.1f}/s  encode {done / encode_s:6.1f}/s"
            f"  rss {rss_mb():.0f} MB  load {os.getloadavg()[0]:.1f}",
            file=sys.stderr,
            flush=True,
        )
    return {
        "memories": n,
        "fill_seconds": round(write_s, 1),
        "write_per_s": round(n / write_s, 1),
        "encode_per_s": round(n / encode_s, 1),
        "write_ratio": round(encode_s / write_s, 3),
        # CPU seconds this process (and the vector index's child) used per memory, and the
        # machine load while filling: on a shared machine the wall-clock rate depends on what
        # else runs
        "write_cpu_ms_per_memory": round(1000 * write_cpu / n, 2),
        "encode_cpu_ms_per_memory": round(1000 * encode_cpu / n, 2),
        "fill_loadavg": round((load0 + os.getloadavg()[0]) / 2, 2),
    }


CPU_MS: dict[str, float] = {}


def time_calls(fn, args_list) -> list[float]:
    out = []
    cpu = time.process_time()
    for args in args_list:
        t = time.perf_counter()
        fn(*args)
        out.append((time.perf_counter() - t) * 1000)
    CPU_MS["last"] = 1000 * (time.process_time() - cpu) / max(1, len(args_list))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--store", help="store folder to fill once and reuse (default: a temp folder)")
    ap.add_argument("--json", help="write the results as JSON to this file")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--batch", type=int, default=1000, help="records per Engine.add call")
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--profile", help="cProfile the filtered hybrid queries into this .prof file")
    ap.add_argument("--skip-baselines", action="store_true")
    ap.add_argument(
        "--embedder",
        choices=["minilm", "hash"],
        default="minilm",
        help="hash = latency proxy: HashEmbedder document vectors, real query embedding (see ProxyEmbedder)",
    )
    ap.add_argument(
        "--vectors",
        choices=["serving", "inline"],
        default="serving",
        help="serving (default, as the daemon runs): Chroma in a child process, applied by the "
        "background writer; inline: in this process, on the writing thread (the library Engine's default)",
    )
    ap.add_argument(
        "--curve",
        help="comma-separated sizes (e.g. 20000,100000,300000,1000000): grow one store through "
        "remember-bulk to each and measure the served store there (benchmarks/scale_curve.py)",
    )
    ap.add_argument("--daemon-recalls", type=int, default=30, help="--curve: recalls over MCP")
    ap.add_argument("--plot", help="--curve: write the curve as a PNG here (needs matplotlib)")
    ap.add_argument("--no-reindex", action="store_true", help="--curve: skip reindex_s")
    ap.add_argument("--old-root", help="--curve: the previous release's checkout (with .venv), "
                    "measured on the same store in the same run")  # fmt: skip
    ap.add_argument(
        "--remeasure",
        action="store_true",
        help="--curve on a store grown before (--store, --json): measure its largest point again "
        "(postings, latency, daemon memory, start) under the current settings; nothing is filled",
    )
    ap.add_argument(
        "--replot",
        metavar="JSON",
        help="draw the curve a --curve run wrote to JSON as the PNG of --plot (no measuring)",
    )
    args = ap.parse_args(argv)
    if args.replot:
        from benchmarks.scale_curve import plot

        data = json.loads(Path(args.replot).read_text())
        curve = data["result"]["curve"] if "result" in data else data["curve"]
        return 0 if plot(curve, Path(args.plot or "scale-curve.png")) else 1
    if args.curve:
        from benchmarks.scale_curve import run_curve

        return run_curve(sorted(int(n) for n in args.curve.split(",")), args)

    data = Path(args.data)
    tmp = None
    if args.store:
        home = Path(args.store)
    else:
        tmp = tempfile.mkdtemp(prefix="pm-scale-")
        home = Path(tmp)
    real = SentenceTransformerEmbedder().load()
    # every query is timed several times (unfiltered, filtered, baselines): the query-vector
    # cache would turn all but the first into cache hits
    real.query_cache = 0
    embedder = ProxyEmbedder(real) if args.embedder == "hash" else real
    print(
        f"store {home}  model {embedder.model_id}  threads query={embedder.query_threads} "
        f"bulk={embedder.bulk_threads}  cpus={os.cpu_count()}  load {os.getloadavg()[0]:.1f}",
        file=sys.stderr,
    )
    serving = args.vectors == "serving"
    engine = Engine(home, embedder, vector_process=serving, background_vectors=serving)
    meta_path = home / "scale-fill.json"
    have = engine.store.count(RecordFilter(include_expired=True))
    results: dict = {"memories": args.memories}
    if have == 0:
        texts = corpus_texts(args.memories, data)
        records = make_records(texts)
        del texts
        print(f"filling {len(records)} memories in batches of {args.batch}", file=sys.stderr)
        fill_stats = fill(engine, records, args.batch)
        del records
        fill_stats["fill_peak_rss_mb"] = round(peak_rss_mb(), 1)
        meta_path.write_text(json.dumps(fill_stats))
        results.update(fill_stats)
        results["fill_reused"] = False
    elif have == args.memories and meta_path.exists():
        results.update(json.loads(meta_path.read_text()))
        results["fill_reused"] = True
        print(f"reusing the filled store ({have} memories)", file=sys.stderr)
    else:
        raise SystemExit(f"{home} holds {have} records, not {args.memories}; use another --store")

    queries = load_queries(data, args.queries)
    filters = [RecordFilter(buckets=visible_buckets(i % N_AGENTS)) for i in range(len(queries))]
    everything = RecordFilter()
    # visible share for one agent, for the report
    seen = [engine.store.count(RecordFilter(buckets=visible_buckets(i))) for i in range(N_AGENTS)]
    results["visible_per_agent_mean"] = round(statistics.mean(seen))

    # warm-up: caches, threads, lazy imports; the first query starts the in-memory postings
    t0 = time.perf_counter()
    for q, f in zip(queries[:20], filters[:20], strict=True):
        engine.search(q, f, k=10)
        engine.search(q, k=10)
    # the searches over every bucket started the collection across them (a store of many
    # buckets: retrieval/vector/across.py): measured once it is built
    t_across = time.perf_counter()
    engine.wait_vectors(7200)
    results["across_wait_s"] = round(time.perf_counter() - t_across, 1)
    postings = engine.lexical.postings
    if postings is not None and postings.state != "empty":
        ready = postings.wait(1800)
        results["postings_ready_s"] = round(time.perf_counter() - t0, 1) if ready else None
        print(f"in-memory postings: {postings.state} after {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)  # fmt: skip

    rows: list[tuple[str, list[float]]] = []
    cpu_ms: dict[str, float] = {}
    load_q0 = os.getloadavg()[0]

    def run(name: str, fn, arglist):
        ms = time_calls(fn, arglist)
        rows.append((name, ms))
        cpu_ms[name] = CPU_MS["last"]
        return ms

    qf = list(zip(queries, filters, strict=True))
    run("hybrid, no filter", lambda q: engine.search(q, everything, k=10), [(q,) for q in queries])
    if args.profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    run("hybrid, agent filter", lambda q, f: engine.search(q, f, k=10), qf)
    if args.profile:
        prof.disable()
        prof.dump_stats(args.profile)
    longs = long_queries(data, queries)
    run("hybrid 150 words, agent filter", lambda q, f: engine.search(q, f, k=10),
        list(zip(longs, filters, strict=True)))  # fmt: skip
    if not args.skip_baselines:
        run(
            "lexical only, agent filter",
            lambda q, f: engine.search(q, f, k=10, mode="lexical"),
            qf,
        )
        run(
            "vector only, agent filter",
            lambda q, f: engine.search(q, f, k=10, mode="vector"),
            qf,
        )
        depth = engine.ranker.config.depth
        run("  component: embed query", lambda q: embedder.embed_query(q), [(q,) for q in queries])
        run(
            "  component: lexical top-depth, filter",
            lambda q, f: engine.lexical.search(q, f, depth),
            qf,
        )
        sql_only = LexicalIndex(engine.store, postings_min=-1)
        run(
            "  component: FTS5 SQL top-depth, filter",
            lambda q, f: sql_only.search(q, f, depth),
            qf,
        )
        qvecs = [embedder.embed_query(q) for q in queries]
        run(
            "  component: Chroma top-depth, 4 buckets",
            lambda v, f: engine.vectors.query(f.buckets, embedder.model_id, v, depth + 20),
            list(zip(qvecs, filters, strict=True)),
        )

    by = dict(rows)
    results.update(
        {
            "recall_p50_ms": round(pct(by["hybrid, no filter"], 50), 2),
            "recall_p95_ms": round(pct(by["hybrid, no filter"], 95), 2),
            "recall_filtered_p50_ms": round(pct(by["hybrid, agent filter"], 50), 2),
            "recall_filtered_p95_ms": round(pct(by["hybrid, agent filter"], 95), 2),
            "recall_long_p50_ms": round(pct(by["hybrid 150 words, agent filter"], 50), 2),
            "recall_long_p95_ms": round(pct(by["hybrid 150 words, agent filter"], 95), 2),
            "peak_rss_mb": round(peak_rss_mb(), 1),
            "rss_after_queries_mb": round(rss_mb(), 1),
            "queries": len(queries),
            "query_threads": embedder.query_threads,
            "bulk_threads": embedder.bulk_threads,
            "depth": engine.ranker.config.depth,
            "embedder": embedder.model_id
            if args.embedder == "minilm"
            else "hash-384 documents + MiniLM queries (latency proxy)",
            "query_loadavg": round((load_q0 + os.getloadavg()[0]) / 2, 2),
            "baselines": {
                name.strip(): {
                    "p50_ms": round(pct(ms, 50), 2),
                    "p95_ms": round(pct(ms, 95), 2),
                    "cpu_ms_per_query": round(cpu_ms[name], 2),
                }
                for name, ms in rows
            },
        }
    )
    for key in ("write_per_s", "encode_per_s", "write_ratio"):
        results.setdefault(key, None)

    w = max(len(n) for n, _ in rows) + 2
    print(f"\n{args.memories} memories, {len(queries)} queries, k=10")
    print(f"{'':{w}} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8} {'cpu ms':>8}")
    for name, ms in rows:
        print(
            f"{name:{w}} {pct(ms, 50):8.1f} {pct(ms, 95):8.1f} {statistics.mean(ms):8.1f}"
            f" {cpu_ms[name]:8.1f}"
        )
    print(
        f"\nwrite {results['write_per_s']} memories/s (embedding included"
        f"{', from the earlier fill' if results.get('fill_reused') else ''}), the model alone "
        f"{results['encode_per_s']}/s: write_ratio {results['write_ratio']}"
        f"   peak RSS {results['peak_rss_mb']:.0f} MB"
        f"   visible to one agent ~{results['visible_per_agent_mean']}"
        f"   load avg during queries {results['query_loadavg']}"
    )
    print(json.dumps({k: results[k] for k in KEYS}))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        write_json(args.json, results)
    engine.close()
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


KEYS = (
    "write_per_s",
    "encode_per_s",
    "write_ratio",
    "recall_p50_ms",
    "recall_p95_ms",
    "recall_filtered_p50_ms",
    "recall_filtered_p95_ms",
    "recall_long_p95_ms",
    "peak_rss_mb",
)

if __name__ == "__main__":
    raise SystemExit(main())
