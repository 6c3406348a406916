"""Which file does an issue need? SWE-bench-style file localization through the ingest pipeline.

    python benchmarks/relevance.py localize DIR [--ranker all] [--limit N] [--json OUT]

``DIR`` holds ``instances.jsonl`` (``instance_id, base_commit, query, gold_files, files``:
``{path: blob sha}``) and ``blobs.jsonl.gz`` (``{sha, text}``), as ``../shared/data/
swebench_lite_sympy`` does. The instances are taken in order of their number (the repository's
history order), and one workspace folder is moved from snapshot to snapshot: the files of an
instance's ``base_commit`` are written (changed ones rewritten, vanished ones deleted) and the
folder is ingested with the real pipeline (``ingest.workspace.pipeline.Ingestor``: the walker, the
chunkers, incremental by content hash), exactly as ``pattern-memory ingest`` keeps a workspace
up to date. Then the issue text is asked and the answer is ranked *files*
(``Engine.search_files``, the ranking ``recall`` uses over a workspace).

Reported per ranker (``lexical``, ``vector``, ``hybrid``, and the baselines ``bm25_stdlib``,
BM25 over each file's path tokens and content, and ``minilm_whole``, one vector per file of its
path and start): ``acc@1``, ``acc@5``, ``acc@10`` (a gold file among the top k files) and
``test_top1`` (share of instances whose first file is a test). Embeddings are cached by text
(``.bench-cache/``), so a rerun embeds nothing it has seen.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from benchmarks.harness import baselines as bl
from ingest.workspace.pipeline import Ingestor
from ingest.workspace.walker import DEFAULT_MAX_FILE_KB
from retrieval.engine import Engine
from retrieval.ranking.grouping import is_test_path
from retrieval.records import Kind, RecordFilter

PROJECT, AGENT = "localize", "bench-agent"
KS = (1, 5, 10)
_NUM = re.compile(r"(\d+)$")


def load(folder: Path) -> tuple[list[dict], dict[str, str]]:
    instances = [json.loads(line) for line in open(folder / "instances.jsonl", encoding="utf-8")]
    instances.sort(key=lambda i: int(_NUM.search(i["instance_id"]).group(1)))
    blobs = {}
    with gzip.open(folder / "blobs.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            b = json.loads(line)
            blobs[b["sha"]] = b["text"]
    return instances, blobs


def checkout(ws: Path, before: dict[str, str], after: dict[str, str], blobs: dict) -> int:
    """Move the workspace from one snapshot to the next; the number of files written or
    deleted."""
    changed = 0
    for path in before.keys() - after.keys():
        (ws / path).unlink(missing_ok=True)
        changed += 1
    for path, sha in after.items():
        if before.get(path) != sha:
            target = ws / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(blobs[sha], encoding="utf-8")
            changed += 1
    return changed


def file_metrics(files: list[str], gold: set[str]) -> dict[str, float]:
    out = {f"acc@{k}": float(bool(gold & set(files[:k]))) for k in KS}
    out["test_top1"] = float(bool(files) and is_test_path(files[0]))
    return out


def mean(rows: list[dict]) -> dict:
    keys = [f"acc@{k}" for k in KS] + ["test_top1"]
    out = {k: round(float(np.mean([r[k] for r in rows])), 4) if rows else 0.0 for k in keys}
    out["queries"] = len(rows)
    return out


def dump_candidates(out, engine: Engine, inst: dict, f: RecordFilter, depth: int = 400) -> None:
    """One JSON line: the instance's query, gold files and every hybrid candidate chunk
    (path, title, completed lexical and vector scores, fused score)."""
    hits = engine.search(inst["query"], f, depth, mode="hybrid")
    rows = [[h.record.metadata.get("path"), h.record.metadata.get("title") or "",
             h.explanation.lexical_score, h.explanation.vector_similarity, h.score]
            for h in hits]  # fmt: skip
    out.write(json.dumps({"instance_id": inst["instance_id"], "query": inst["query"],
                          "gold": inst["gold_files"], "chunks": rows}) + "\n")  # fmt: skip
    out.flush()


class FileBaselines:
    """BM25 over path + content and the model over path + start, per file version (cached
    across instances by (path, blob))."""

    def __init__(self, embedder, blobs: dict[str, str], max_bytes: int) -> None:
        self.embedder, self.blobs, self.max_bytes = embedder, blobs, max_bytes
        self._tf: dict[tuple[str, str], Counter] = {}
        self._vec: dict[tuple[str, str], np.ndarray] = {}

    def _text(self, path: str, sha: str) -> str:
        return f"{path.replace('/', ' ').replace('_', ' ')}\n{self.blobs[sha]}"

    def rank(self, files: dict[str, str], query: str) -> dict[str, list[str]]:
        keys = [(p, s) for p, s in sorted(files.items())
                if len(self.blobs[s].encode()) <= self.max_bytes]  # fmt: skip
        for k in keys:
            if k not in self._tf:
                self._tf[k] = Counter(bl.tokens(self._text(*k)))
        todo = [k for k in keys if k not in self._vec]
        if todo:
            vecs = bl.whole_vectors(self.embedder, [self._text(*k)[:4000] for k in todo])
            self._vec.update(zip(todo, vecs, strict=True))
        paths = [p for p, _ in keys]
        lex = bl.StdlibBM25([self._tf[k] for k in keys]).scores(query)
        dense = bl.dense_scores(self.embedder, query, np.stack([self._vec[k] for k in keys]))
        return {
            "bm25_stdlib": bl.top_ids(lex, paths, 10),
            "minilm_whole": bl.top_ids(dense, paths, 10),
        }


def run(args, embedder, rankers: list[str]) -> dict:
    folder = Path(args.dir)
    instances, blobs = load(folder)
    if args.limit:
        instances = instances[: args.limit]
    print(f"localize: {len(instances)} instances, {len(blobs)} blobs", flush=True)
    rows: dict[str, list[dict]] = {r: [] for r in [*rankers, "bm25_stdlib", "minilm_whole"]}
    per_instance = []
    base = FileBaselines(embedder, blobs, DEFAULT_MAX_FILE_KB * 1024)
    t_start = time.perf_counter()
    dump = open(args.dump, "w", encoding="utf-8") if getattr(args, "dump", None) else None
    with tempfile.TemporaryDirectory(prefix="pm-localize-") as tmp:
        ws, home = Path(tmp) / "workspace", Path(tmp) / "store"
        ws.mkdir()
        engine = Engine(home, embedder)
        try:
            ingestor = Ingestor(engine, PROJECT, AGENT)
            before: dict[str, str] = {}
            for inst in instances:
                t0 = time.perf_counter()
                changed = checkout(ws, before, inst["files"], blobs)
                before = inst["files"]
                rep = ingestor.run(ws)
                hits0 = getattr(embedder, "hits", 0)
                print(f"{inst['instance_id']}: {changed} files changed, {rep.files_indexed} "
                      f"indexed, {rep.chunks_embedded} chunks embedded in "
                      f"{time.perf_counter() - t0:.1f}s (cache hits {hits0})", flush=True)  # fmt: skip
                gold = set(inst["gold_files"])
                f = RecordFilter(buckets=[ingestor.bucket], kinds=[Kind.chunk])
                got = {}
                for ranker in rankers:
                    ranked = engine.search_files(inst["query"], f, k=10, mode=ranker)
                    got[ranker] = [g.key for g in ranked]
                got.update(base.rank(inst["files"], inst["query"]))
                if dump is not None:
                    dump_candidates(dump, engine, inst, f)
                for name, files in got.items():
                    rows[name].append(file_metrics(files, gold))
                so_far = {n: mean(r) for n, r in rows.items()}
                print("  so far: " + ", ".join(f"{n} acc@5 {m['acc@5']:.3f} test_top1 "
                                                f"{m['test_top1']:.3f}" for n, m in so_far.items()),
                      flush=True)  # fmt: skip
                per_instance.append({"instance_id": inst["instance_id"], "gold": sorted(gold),
                                     "top5": {n: fs[:5] for n, fs in got.items()}})  # fmt: skip
        finally:
            engine.close()
            shutil.rmtree(ws, ignore_errors=True)
            if dump is not None:
                dump.close()
    results = {name: mean(r) for name, r in rows.items()}
    head = f"{'':<16}" + "".join(f"{m:>11}" for m in ("acc@1", "acc@5", "acc@10", "test_top1"))
    print(f"\nfile localization ({len(instances)} instances)\n{head}\n{'-' * len(head)}")
    for name, res in results.items():
        print(f"{name:<16}" + "".join(f"{res[m]:>11.4f}"
                                      for m in ("acc@1", "acc@5", "acc@10", "test_top1")))  # fmt: skip
    wall = time.perf_counter() - t_start
    hits, misses = getattr(embedder, "hits", 0), getattr(embedder, "misses", 0)
    print(f"wall {wall:.0f}s, embedding cache hits {hits} misses {misses}")
    results["_run"] = {"wall_s": round(wall, 1), "cache_hits": hits, "cache_misses": misses}
    if args.details:
        results["_instances"] = per_instance
    return results
