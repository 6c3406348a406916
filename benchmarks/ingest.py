"""Ingestion throughput against the raw encode rate of the same chunks, and the rerun cost.

    python benchmarks/ingest.py PATH [PATH ...] [--json OUT] [--max-files N]

1. a fresh store in a temporary folder, the real embedding model loaded and warmed up first
   (model load is not ingestion);
2. first run: every PATH ingested with :class:`ingest.workspace.pipeline.Ingestor` (walk, read, hash,
   chunk, embed, SQLite, Chroma, artifacts) -> files/s and chunks/s;
3. second run on the unchanged tree -> ``rerun_seconds`` (target ≤ 1 % of the first);
4. raw encode rate: ``embedder.embed_documents`` on the texts the pipeline embedded (every
   window view of every chunk, ``Engine.views``: exactly what the vectors were made from), in
   one call, timed alone -> chunks/s;
5. ``ratio`` = ingestion chunks/s ÷ raw encode chunks/s (target ≥ 0.85).

``--max-files N`` ingests a copy of the first N files of the walk (sorted by path) instead of
the whole tree, for a shorter run on a slow machine. JSON keys: files, chunks, first_seconds,
files_per_s, chunks_per_s, encode_rate, ratio, rerun_seconds (plus timings and load).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.harness.report import write_json  # noqa: E402
from ingest.workspace.pipeline import IngestOptions, Ingestor  # noqa: E402
from ingest.workspace.walker import Walker  # noqa: E402
from retrieval.engine import Engine  # noqa: E402


def subset(paths: list[Path], max_files: int, dest: Path) -> list[Path]:
    """Copy the first ``max_files`` walked files (over all paths) under ``dest``."""
    out, left = [], max_files
    for p in paths:
        if left <= 0:
            break
        target = dest / p.name
        for cand in Walker(p).walk().files[:left]:
            (target / cand.rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(cand.path, target / cand.rel)
            left -= 1
        out.append(target)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--json")
    ap.add_argument("--max-files", type=int)
    ap.add_argument("--embed-batch", type=int, default=IngestOptions.embed_batch)
    args = ap.parse_args(argv)
    from retrieval.embedding.embedder import SentenceTransformerEmbedder

    paths = [Path(p).resolve() for p in args.paths]
    work = Path(tempfile.mkdtemp(prefix="pm-bench-ingest-"))
    try:
        if args.max_files:
            paths = subset(paths, args.max_files, work / "tree")
        embedder = SentenceTransformerEmbedder().load()
        embedder.embed_documents(["warm up the model"] * 8)
        engine = Engine(work / "store", embedder)
        ingestor = Ingestor(
            engine, "bench", "bench-agent", IngestOptions(embed_batch=args.embed_batch)
        )
        load0 = os.getloadavg()[0]

        t0 = time.perf_counter()
        reports = [ingestor.run(p) for p in paths]
        first = time.perf_counter() - t0
        files = sum(r.files_indexed for r in reports)
        chunks = sum(r.chunks_added for r in reports)
        timings: dict[str, float] = {}
        for r in reports:
            for k, v in r.timings.items():
                timings[k] = round(timings.get(k, 0.0) + v, 2)

        t0 = time.perf_counter()
        reruns = [ingestor.run(p) for p in paths]
        rerun = time.perf_counter() - t0
        assert all(r.files_indexed == 0 and r.chunks_embedded == 0 for r in reruns), reruns

        recs = engine.store.list(_chunk_filter())
        # the same texts the pipeline embedded: every window view of every chunk
        texts = [t for r in recs for window in engine.views(r) for t, _w in window]
        t0 = time.perf_counter()
        embedder.embed_documents(texts)
        encode = time.perf_counter() - t0
        load1 = os.getloadavg()[0]
        engine.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    out = {
        "files": files,
        "chunks": chunks,
        "first_seconds": round(first, 2),
        "files_per_s": round(files / first, 2),
        "chunks_per_s": round(chunks / first, 2),
        # raw encode of the same views, per chunk (a chunk may have several window views)
        "encode_rate": round(chunks / encode, 2),
        "encode_views_per_s": round(len(texts) / encode, 2),
        "views": len(texts),
        "ratio": round((chunks / first) / (chunks / encode), 3),
        "rerun_seconds": round(rerun, 3),
        "rerun_fraction": round(rerun / first, 5),
        "encode_seconds": round(encode, 2),
        "timings": timings,
        "loadavg": [round(load0, 2), round(load1, 2)],
        "paths": [str(p) for p in args.paths],
        "max_files": args.max_files,
    }
    print(f"{'files':>8} {'chunks':>8} {'first s':>9} {'files/s':>8} {'chunks/s':>9} "
          f"{'encode/s':>9} {'ratio':>6} {'rerun s':>8} {'rerun %':>8}")  # fmt: skip
    print(
        f"{files:>8} {chunks:>8} {first:>9.1f} {out['files_per_s']:>8.2f} "
        f"{out['chunks_per_s']:>9.2f} {out['encode_rate']:>9.2f} {out['ratio']:>6.3f} "
        f"{rerun:>8.3f} {100 * rerun / first:>7.3f}%"
    )
    print(f"stage seconds: {timings}  load average {out['loadavg']}")
    if args.json:
        write_json(args.json, out)
    return 0


def _chunk_filter():
    from retrieval.records import Kind, RecordFilter

    return RecordFilter(kinds=[Kind.chunk])


if __name__ == "__main__":
    sys.exit(main())
