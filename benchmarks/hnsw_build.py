"""The vector index's insert rate as one collection grows, per HNSW ``ef_construction``.

    python benchmarks/hnsw_build.py [--size 140000] [--ef 200,100] [--step 20000] [--json OUT]

For each ``ef_construction``: a new Chroma collection in a temp folder, with the settings of
``retrieval/vector/vectors.py`` (``HNSW``) but that one, filled with random unit 384-d vectors in
upserts of 1000 (the vector writer's batch), each carrying a ``record_id`` metadata value as
ours do. Reported: inserts per second over each ``--step`` vectors. Random vectors measure the
insert cost, not the graph's quality; the ranking under each setting is measured by
``benchmarks/relevance.py`` (docs/scale.md, "The vector index").
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.harness.report import write_json
from retrieval.vector.vectors import HNSW

BATCH = 1000


def insert_rates(ef: int, size: int, step: int, folder: Path) -> list[tuple[int, float]]:
    """(vectors in the collection after the step, inserts/s over the step) for one setting."""
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(
        path=str(folder), settings=Settings(anonymized_telemetry=False)
    )
    col = client.create_collection(
        f"ef{ef}",
        configuration={"hnsw": {**HNSW, "ef_construction": ef}},  # the product's, but for ef
        embedding_function=None,
    )
    rng = np.random.default_rng(0)
    out, t_step = [], time.perf_counter()
    for lo in range(0, size, BATCH):
        vecs = rng.standard_normal((BATCH, 384)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        ids = [f"{i:09d}" for i in range(lo, lo + BATCH)]
        col.upsert(ids=ids, embeddings=vecs, metadatas=[{"record_id": i} for i in ids])
        if (lo + BATCH) % step == 0:
            now = time.perf_counter()
            out.append((lo + BATCH, round(step / (now - t_step), 1)))
            t_step = now
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--size", type=int, default=140_000)
    ap.add_argument("--step", type=int, default=20_000)
    ap.add_argument("--ef", default="200,100", help="ef_construction values, comma-separated")
    ap.add_argument("--json", help="write {ef: [[vectors, inserts_per_s], ...]} here")
    args = ap.parse_args(argv)
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    result: dict = {"size": args.size, "step": args.step, "batch": BATCH, "rates": {}}
    for ef in (int(e) for e in args.ef.split(",")):
        folder = Path(tempfile.mkdtemp(prefix="pm-hnsw-"))
        try:
            rates = insert_rates(ef, args.size, args.step, folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        result["rates"][str(ef)] = rates
        print(f"ef_construction {ef:>4}: " + "  ".join(f"{n // 1000}k {r:.0f}/s" for n, r in rates))
    if args.json:
        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
