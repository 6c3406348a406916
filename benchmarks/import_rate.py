"""Import rate: a 10,000-item source of each kind through ``import-from``, against our own
``import`` of a 10,000-memory export file.

    python benchmarks/import_rate.py [--items 10000] [--embedder onnx|hash] [--json OUT]

Each source is generated in its own on-disk format from the layout of its fixture
(``tests/data/import``: the claude-mem and mcp-memory-service databases are copies of the
fixtures with the rows added; mem0 a ``get_all`` JSON; basic-memory a folder of notes, each an
entity with three observations, two relations and a text; memory.jsonl entities and relations;
Claude Code an auto-memory folder of topic files), with distinct synthetic sentences. Each is
imported into a fresh store by :func:`server.service.transfers.import_write.import_source` (read, the
write policy, embedding, SQLite, the vector index), the embedding model loaded and warmed up
once before (loading it is not importing). ``items/s`` counts the source's items, ``records/s``
the records written (a basic-memory note's observations are records too). The baseline is
:func:`server.service.transfers.transfer.import_memories` of a ``pattern-memory export`` file of as many
memories, in the same conditions.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if sys.path[0] != str(ROOT):  # before benchmarks/ (its ingest.py is not the package)
    sys.path.insert(0, str(ROOT))

from benchmarks.harness.report import write_json  # noqa: E402
from retrieval.engine import Engine  # noqa: E402
from server.service.core.identity import Identity  # noqa: E402
from server.service.graphs.graph_services import graph_services  # noqa: E402
from server.service.memories.memory import MemoryService  # noqa: E402
from server.service.transfers.import_write import import_source  # noqa: E402
from server.service.transfers.transfer import import_memories  # noqa: E402

FIXTURES = ROOT / "tests" / "data" / "import"
WHO = Identity(project_id="bench", agent_id="bench-agent")
T0 = datetime(2024, 6, 1, tzinfo=UTC)
WORDS = (
    "checkout payment refund ledger invoice order cart stock webhook retry timeout index query "
    "migration deploy release cache queue worker job schema table column lock transaction api "
    "token session client server latency error log metric alert test fixture mock clock build "
    "branch review merge config flag tenant user admin report export import backup restore"
).split()


def sentence(rng: random.Random, n: int) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(10, 24))]
    return f"Note {n}: " + " ".join(words).capitalize() + "."


def emptied(fixture: str, dest: Path, tables: tuple[str, ...]) -> sqlite3.Connection:
    """A copy of a fixture database at ``dest`` with ``tables`` emptied."""
    shutil.copy(FIXTURES / fixture, dest)
    conn = sqlite3.connect(dest)
    for table in tables:
        conn.execute(f"DELETE FROM {table}")
    return conn


def gen_claude_mem(folder: Path, n: int, rng: random.Random) -> Path:
    db = folder / "claude-mem.db"
    conn = emptied("claude-mem/claude-mem.db", db, ("observations", "session_summaries"))
    types = ["decision", "bugfix", "feature", "refactor", "discovery", "change"]
    obs, summaries = n * 4 // 5, n - n * 4 // 5
    for i in range(obs):
        at = int((T0 + timedelta(minutes=i)).timestamp() * 1000)
        conn.execute(
            "INSERT INTO observations(memory_session_id, project, type, title, subtitle, facts, "
            "narrative, concepts, files_read, files_modified, prompt_number, created_at, "
            "created_at_epoch, content_hash) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            ("m-0001", "shop-api", types[i % 6], sentence(rng, i)[:60], None,
             json.dumps([sentence(rng, i)]), sentence(rng, i), json.dumps(["pattern"]),
             json.dumps(["src/app.py"]), "[]", 1, "", at, f"h{i}"),
        )  # fmt: skip
    for i in range(summaries):
        at = int((T0 + timedelta(minutes=i)).timestamp() * 1000)
        conn.execute(
            "INSERT INTO session_summaries(memory_session_id, project, request, learned, "
            "completed, created_at, created_at_epoch) VALUES (?,?,?,?,?,?,?)",
            ("m-0001", "shop-api", sentence(rng, i), sentence(rng, i), sentence(rng, i), "", at),
        )
    conn.commit()
    conn.close()
    return db


def gen_mcp_memory_service(folder: Path, n: int, rng: random.Random) -> Path:
    db = folder / "sqlite_vec.db"
    conn = emptied("mcp-memory-service/sqlite_vec.db", db, ("memories", "memory_graph"))
    for i in range(n):
        at = (T0 + timedelta(minutes=i)).timestamp()
        conn.execute(
            "INSERT INTO memories(content_hash, content, tags, memory_type, metadata, created_at, "
            "updated_at) VALUES (?,?,?,?,?,?,?)",
            (f"hash{i}", sentence(rng, i), "proj:shop-api,topic:bench", "learning", "{}", at, at),
        )
    conn.commit()
    conn.close()
    return db


def gen_mem0(folder: Path, n: int, rng: random.Random) -> Path:
    path = folder / "get_all.json"
    rows = [{"id": f"m{i}", "memory": sentence(rng, i), "hash": f"h{i}", "metadata": {"n": i},
             "created_at": (T0 + timedelta(minutes=i)).isoformat(), "user_id": "dana",
             "agent_id": "bench", "categories": ["work"]} for i in range(n)]  # fmt: skip
    path.write_text(json.dumps({"results": rows}), encoding="utf-8")
    return path


def note(path: Path, front: str, body: str) -> None:
    path.write_text(f"---\n{front}---\n\n{body}", encoding="utf-8")


def gen_basic_memory(folder: Path, n: int, rng: random.Random) -> Path:
    root = folder / "notes"
    root.mkdir()
    notes = n // 4  # an entity, two relations and a text per note
    for i in range(notes):
        obs = "".join(f"- [fact] {sentence(rng, i * 3 + k)}\n" for k in range(3))
        rel = f"- relates_to [[Note {(i + 1) % notes}]]\n- part_of [[Note {(i + 7) % notes}]]\n"
        note(root / f"note-{i}.md", f"title: Note {i}\ntype: note\ntags: [bench]\n",
             f"# Note {i}\n\n{sentence(rng, i)}\n\n## Observations\n{obs}\n## Relations\n{rel}")  # fmt: skip
    return root


def gen_memory_jsonl(folder: Path, n: int, rng: random.Random) -> Path:
    path = folder / "memory.jsonl"
    ents = n // 2
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(ents):
            fh.write(json.dumps({"type": "entity", "name": f"E{i}", "entityType": "thing",
                                 "observations": [sentence(rng, i)]}) + "\n")  # fmt: skip
        for i in range(n - ents):
            fh.write(json.dumps({"type": "relation", "from": f"E{i}",
                                 "to": f"E{(i + 1) % ents}", "relationType": "next"}) + "\n")  # fmt: skip
    return path


def gen_claude_code(folder: Path, n: int, rng: random.Random) -> Path:
    mem = folder / "memory"
    mem.mkdir()
    (mem / "MEMORY.md").write_text("# Memory\n", encoding="utf-8")
    for i in range(n):
        front = f"name: note {i}\ndescription: {sentence(rng, i)[:60]}\ntype: project\n"
        note(mem / f"project_{i}.md", front, f"{sentence(rng, i)}\n")
    return mem


def gen_export(folder: Path, n: int, rng: random.Random) -> Path:
    path = folder / "export.json"
    mems = [{"id": f"00000000-0000-4000-8000-{i:012d}", "agentId": "x", "projectId": "y",
             "scope": "team", "category": "learnings", "content": sentence(rng, i),
             "metadata": {"tags": ["bench"]},
             "createdAt": (T0 + timedelta(minutes=i)).isoformat(),
             "updatedAt": (T0 + timedelta(minutes=i)).isoformat()} for i in range(n)]  # fmt: skip
    doc = {"format": "pattern-memory", "version": 1, "count": n, "memories": mems}
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


GENERATORS = {
    "claude-mem": gen_claude_mem,
    "mcp-memory-service": gen_mcp_memory_service,
    "mem0": gen_mem0,
    "basic-memory": gen_basic_memory,
    "memory-jsonl": gen_memory_jsonl,
    "claude-code": gen_claude_code,
}


def records(svc: MemoryService) -> int:
    return svc.store.reader.execute("SELECT count(*) FROM records").fetchone()[0]


def run_one(work: Path, name: str, embedder, n: int) -> dict:
    rng = random.Random(name)
    src_dir = work / f"src-{name}"
    src_dir.mkdir()
    svc = MemoryService(Engine(work / f"store-{name}", embedder))
    try:
        if name == "import (baseline)":
            path = gen_export(src_dir, n, rng)
            t0 = time.perf_counter()
            res = import_memories(svc, WHO, [src_dir], str(path))
            seconds = time.perf_counter() - t0
            items, skipped = n, res.skipped
        else:
            path = GENERATORS[name](src_dir, n, rng)
            t0 = time.perf_counter()
            res = import_source(svc, graph_services(svc), WHO, name, path)
            seconds = time.perf_counter() - t0
            items, skipped = res.read, sum(res.skipped.values())
        svc.engine.wait_vectors(timeout=600)
        written = records(svc)
        return {"items": items, "records": written, "skipped": skipped,
                "seconds": round(seconds, 2), "items_per_s": round(items / seconds, 1),
                "records_per_s": round(written / seconds, 1)}  # fmt: skip
    finally:
        svc.engine.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--embedder", choices=["onnx", "hash"], default="onnx")
    ap.add_argument("--only", nargs="*", help="sources to run (default: all and the baseline)")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    if args.embedder == "hash":
        from retrieval.embedding.embedder import HashEmbedder

        embedder = HashEmbedder()
    else:
        from retrieval.embedding.embedder import SentenceTransformerEmbedder

        embedder = SentenceTransformerEmbedder().load()
        embedder.embed_documents(["warm up the model"] * 8)
    names = args.only or ["import (baseline)", *GENERATORS]
    work = Path(tempfile.mkdtemp(prefix="pm-bench-import-"))
    load0 = os.getloadavg()[0]
    out: dict = {"items": args.items, "embedder": getattr(embedder, "model_id", args.embedder),
                 "sources": {}}  # fmt: skip
    try:
        print(f"{'source':<22}{'items':>8}{'records':>9}{'seconds':>9}{'items/s':>9}{'rec/s':>8}")
        for name in names:
            r = run_one(work, name, embedder, args.items)
            out["sources"][name] = r
            print(f"{name:<22}{r['items']:>8}{r['records']:>9}{r['seconds']:>9.1f}"
                  f"{r['items_per_s']:>9.1f}{r['records_per_s']:>8.1f}", flush=True)  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out["loadavg"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    base = out["sources"].get("import (baseline)")
    if base:
        for r in out["sources"].values():
            r["vs_import"] = round(r["items_per_s"] / base["items_per_s"], 2)
    if args.json:
        write_json(args.json, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
