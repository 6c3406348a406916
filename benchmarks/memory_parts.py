"""What each part of a served store costs, measured on a filled store, per 100k records.

    python benchmarks/memory_parts.py STORE_DIR [--json OUT]

STORE_DIR is a store filled by ``benchmarks/scale.py --curve`` (or any store whose vectors are
384-d, the packaged model's). Every figure is measured on that store and divided by its record
count (x 100k); the fixed parts (the model, the interpreter and libraries) are reported apart.

- ``vectors``: the float32 vectors as the vector index holds them (windows x 384 x 4 bytes),
  and what the index's files hold per element beside them (``hnsw_links``: the level-0
  neighbour lists and labels, computed from hnswlib's layout with Chroma's M = 16, plus the
  upper levels' ``link_lists.bin``; ``data_level0.bin`` holds only the elements Chroma has
  persisted, the rest wait in its log, ``chroma.sqlite3``); ``vector_process_rss``: the
  vector index's process after one query per collection (every collection loaded), minus the
  same process with only its smallest collection loaded;
- ``postings``: the in-memory bm25 postings (:mod:`retrieval.fulltext.postings`): their arrays' bytes,
  the growth of this process's heap and mapped file pages when they are built from FTS5 and
  when a second index loads them from the saved file, and the file's size;
- ``sqlite``: the store's file by part (``dbstat``): records and their indexes, the FTS5 index,
  the stored vectors, the change log; the page cache is a setting per connection
  (``PATTERN_SQLITE_CACHE_MB``, filled as pages are read), the memory map
  (``PATTERN_SQLITE_MMAP_MB``) maps file pages the kernel may drop.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.harness.report import write_json  # noqa: E402
from retrieval.fulltext.lexical import LexicalIndex  # noqa: E402
from retrieval.records import RecordFilter  # noqa: E402
from retrieval.storage.store import SQLiteStore  # noqa: E402

MB = 2**20
DIM = 384
HNSW_M = 16  # Chroma's default max_neighbors (retrieval/vector/vectors.py does not change it)


def sqlite_parts(db: Path) -> dict[str, float]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
    finally:
        conn.close()
    out: dict[str, float] = {}
    for name, size in rows:
        if name.startswith("records_fts"):
            part = "fts5_index"
        elif "embeddings" in name:
            part = "stored_vectors"
        elif name.startswith(("records", "record_tags", "sqlite_autoindex_records")):
            part = "records_and_indexes"
        elif name.startswith("changes"):
            part = "change_log"
        else:
            part = "other"
        out[part] = out.get(part, 0.0) + size / MB
    return {k: round(v, 1) for k, v in sorted(out.items())}


def chroma_parts(chroma: Path, n_vectors: int) -> dict[str, float]:
    files: dict[str, int] = {}
    for f in chroma.rglob("*"):
        if f.is_file():
            key = f.name if f.parent != chroma else f"top-level {f.suffix or f.name}"
            files[key] = files.get(key, 0) + f.stat().st_size
    vectors = n_vectors * DIM * 4
    # hnswlib's level 0: per element 2M neighbour ids (int32) + a count, the vector, a label;
    # the upper levels (link_lists.bin) hold ~1/M of the elements again
    links = n_vectors * (2 * HNSW_M * 4 + 4 + 8) + files.get("link_lists.bin", 0)
    return {
        "files_mb": {k: round(v / MB, 1) for k, v in sorted(files.items())},
        "vectors_mb": round(vectors / MB, 1),
        "hnsw_links_mb": round(links / MB, 1),
        "chroma_total_mb": round(sum(files.values()) / MB, 1),
    }


def rss_mb(pid: int | None = None) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid or 'self'}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile"):
            out[key] = round(int(value.split()[0]) / 1024, 1)
    return out


def postings_parts(store: SQLiteStore) -> dict:
    """Built from FTS5 (and saved), then loaded from the file by a second index: the growth of
    this process's heap (RssAnon) and mapped file pages (RssFile) for each."""
    import gc

    out: dict = {}
    for how in ("build", "load"):
        gc.collect()
        before = rss_mb()
        lx = LexicalIndex(store, postings_min=0)
        if how == "build" and lx.postings.file is not None:
            lx.postings.file.unlink(missing_ok=True)
        t0 = time.perf_counter()
        lx.postings.start()
        lx.postings.wait(3600)
        seconds = time.perf_counter() - t0
        gc.collect()
        after = rss_mb()
        p = lx.postings
        out[f"{how}_s"] = round(seconds, 2)
        out[f"{how}_anon_growth_mb"] = round(after["RssAnon"] - before["RssAnon"], 1)
        out[f"{how}_file_growth_mb"] = round(after["RssFile"] - before["RssFile"], 1)
        lx.postings.close()
        if how == "build":
            arrays = sum(s.nbytes + f.nbytes for s, f in p.post.values())
            arrays += sum(getattr(p, a).nbytes for a in ("rowid", "bucket", "dl", "alive"))
            out |= {"records": p.n_alive, "terms": len(p.post),
                    "postings": sum(len(s) for s, _ in p.post.values()),
                    "arrays_mb": round(arrays / MB, 1)}  # fmt: skip
        else:
            out["file_mb"] = round(p.file.stat().st_size / MB, 1) if p.file else None
        del lx, p
    return out


def vector_process_parts(home: Path) -> dict:
    from retrieval.engine import Engine

    engine = Engine(home, vector_process=True)
    try:
        engine.open_vectors()
        buckets = engine.store.all_buckets()
        model = engine.store.reader.execute("SELECT model_id FROM embeddings LIMIT 1").fetchone()[0]
        q = np.ones(DIM, dtype=np.float32) / DIM**0.5
        buckets.sort(key=lambda b: engine.store.count(RecordFilter(buckets=[b])))
        engine.vectors.query(buckets[:1], model, q, 10)  # chromadb loaded, smallest collection
        base = rss_mb(engine.vectors._proc.pid)
        t0 = time.perf_counter()
        for b in buckets:
            engine.vectors.query([b], model, q, 10)
        loaded_s = time.perf_counter() - t0
        return {"collections": len(buckets), "load_all_s": round(loaded_s, 1),
                "rss_one_small_collection_mb": base, "rss_mb": rss_mb(engine.vectors._proc.pid)}  # fmt: skip
    finally:
        engine.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("store")
    ap.add_argument("--json")
    args = ap.parse_args()
    home = Path(args.store)
    db = home / "pattern.sqlite3"
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    n = conn.execute("SELECT count(*) FROM records").fetchone()[0]
    n_vectors = conn.execute("SELECT count(*) FROM embeddings").fetchone()[0]
    conn.close()
    out: dict = {"records": n, "vectors": n_vectors}
    out["sqlite_mb"] = sqlite_parts(db)
    out["chroma"] = chroma_parts(home / "chroma", n_vectors)
    store = SQLiteStore(db)
    try:
        out["postings"] = postings_parts(store)
    finally:
        store.close()
    out["vector_process"] = vector_process_parts(home)
    scale = 100_000 / n
    per = {
        "vectors_mb": out["chroma"]["vectors_mb"] * scale,
        "hnsw_links_mb": out["chroma"]["hnsw_links_mb"] * scale,
        "vector_process_rss_mb": (
            out["vector_process"]["rss_mb"]["VmRSS"]
            - out["vector_process"]["rss_one_small_collection_mb"]["VmRSS"]
        )
        * scale,
        "postings_arrays_mb": out["postings"]["arrays_mb"] * scale,
        "postings_heap_loaded_mb": out["postings"]["load_anon_growth_mb"] * scale,
        "postings_heap_built_mb": out["postings"]["build_anon_growth_mb"] * scale,
        "postings_file_mb": (out["postings"]["file_mb"] or 0) * scale,
        **{f"sqlite_{k}_mb": v * scale for k, v in out["sqlite_mb"].items()},
        "chroma_disk_mb": out["chroma"]["chroma_total_mb"] * scale,
    }
    out["per_100k"] = {k: round(v, 1) for k, v in per.items()}
    out["settings"] = {k: os.environ.get(k) for k in ("PATTERN_SQLITE_CACHE_MB", "PATTERN_SQLITE_MMAP_MB",
                                                      "PATTERN_BM25_MEMORY_MIN")}  # fmt: skip
    print(json.dumps(out, indent=2))
    if args.json:
        write_json(args.json, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
