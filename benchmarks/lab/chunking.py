"""Which chunk size and overlap find the right file? Measured on questions about a repository.

    python -m benchmarks run chunking PATH [--questions FILE] [--sizes 600,1200,2000]
                                       [--overlaps 0,3] [--json OUT]

For every (max_chars, overlap) variant: ingest PATH into a fresh store with the real model
(vectors cached in ``.bench-cache/``, so variants sharing chunk texts embed them once), ask
every question with ``Engine.search`` over chunks, rank files by their best chunk, and report
hit@1 / hit@3 / MRR@10 of the expected files, plus the number of chunks (the embedding cost).
Questions: JSON list of {"q": text, "files": [relative paths, any of which is right]}.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.harness.embed_cache import CachingEmbedder  # noqa: E402
from benchmarks.harness.report import write_json  # noqa: E402
from ingest.workspace.pipeline import IngestOptions, Ingestor  # noqa: E402
from retrieval.engine import Engine  # noqa: E402
from retrieval.records import Kind, RecordFilter  # noqa: E402

QUESTIONS = ROOT / "benchmarks" / "data" / "repo_questions.json"


def ranked_files(engine: Engine, query: str, k: int = 30) -> list[str]:
    hits = engine.search(query, RecordFilter(kinds=[Kind.chunk]), k=k)
    return list(dict.fromkeys(h.record.metadata["path"] for h in hits))


def evaluate(engine: Engine, questions: list[dict]) -> dict:
    h1 = h3 = mrr = 0.0
    misses = []
    for q in questions:
        files = ranked_files(engine, q["q"])
        rank = next((i + 1 for i, f in enumerate(files[:10]) if f in q["files"]), None)
        h1 += rank == 1
        h3 += rank is not None and rank <= 3
        mrr += 1.0 / rank if rank else 0.0
        if not rank or rank > 3:
            misses.append({"q": q["q"], "want": q["files"], "got": files[:3]})
    n = len(questions)
    return {"hit@1": h1 / n, "hit@3": h3 / n, "mrr@10": round(mrr / n, 4), "misses": misses}


def run_variant(path: Path, embedder, max_chars: int, overlap: int, questions) -> dict:
    with tempfile.TemporaryDirectory(prefix="pm-chunking-") as home:
        engine = Engine(home, embedder)
        opts = IngestOptions(max_chars=max_chars, overlap=overlap)
        t0 = time.perf_counter()
        report = Ingestor(engine, "bench", "bench-agent", opts).run(path)
        seconds = time.perf_counter() - t0
        out = {"max_chars": max_chars, "overlap": overlap, "files": report.files_indexed,
               "chunks": report.chunks_added, "ingest_seconds": round(seconds, 1)}  # fmt: skip
        out.update(evaluate(engine, questions))
        engine.close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("path")
    p.add_argument("--questions", default=str(QUESTIONS))
    p.add_argument("--sizes", default="600,1200,2000")
    p.add_argument("--overlaps", default="0,3")
    p.add_argument("--json")
    args = p.parse_args(argv)
    from retrieval.embedding.embedder import SentenceTransformerEmbedder

    questions = json.loads(Path(args.questions).read_text())
    embedder = CachingEmbedder(SentenceTransformerEmbedder())
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        for overlap in [int(o) for o in args.overlaps.split(",")]:
            row = run_variant(Path(args.path), embedder, size, overlap, questions)
            rows.append(row)
            print(
                f"max_chars={size:5} overlap={overlap}  chunks={row['chunks']:5}  "
                f"hit@1={row['hit@1']:.3f}  hit@3={row['hit@3']:.3f}  mrr@10={row['mrr@10']:.3f}",
                flush=True,
            )
    if args.json:
        write_json(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
