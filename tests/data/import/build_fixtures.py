"""Build the binary import fixtures (SQLite databases, the OpenMemory zip) from the schemas the
sources' own code creates; the text fixtures (notes, memory.jsonl, Claude Code files) are kept
as written. PROVENANCE.md says where each layout comes from.

    python tests/data/import/build_fixtures.py                 # claude-mem, mem0
    SQLITE_VEC=/path/to/vec0.so python tests/data/import/build_fixtures.py   # + mcp-memory-service

mcp-memory-service's database holds a sqlite-vec ``vec0`` table, which this Python's sqlite3
cannot create (no extension loading): the ``sqlite3`` command line loads ``vec0`` (from the
``sqlite-vec`` wheel) to add it. Without SQLITE_VEC that file is left as it is.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import sqlite3
import struct
import subprocess
import zipfile
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


# ---------------------------------------------------------------------- claude-mem
# the tables as claude-mem's SessionStore migrations (schema versions 4 .. 49) leave them
CLAUDE_MEM_SCHEMA = """
CREATE TABLE schema_versions (id INTEGER PRIMARY KEY, version INTEGER UNIQUE NOT NULL,
  applied_at TEXT NOT NULL);
CREATE TABLE sdk_sessions (
  id INTEGER PRIMARY KEY AUTOINCREMENT, content_session_id TEXT NOT NULL,
  memory_session_id TEXT UNIQUE, project TEXT NOT NULL,
  platform_source TEXT NOT NULL DEFAULT 'claude', user_prompt TEXT, started_at TEXT NOT NULL,
  started_at_epoch INTEGER NOT NULL, completed_at TEXT, completed_at_epoch INTEGER,
  status TEXT CHECK(status IN ('active', 'completed', 'failed')) NOT NULL DEFAULT 'active',
  worker_port INTEGER, prompt_counter INTEGER DEFAULT 0, custom_title TEXT);
CREATE TABLE observations (
  id INTEGER PRIMARY KEY AUTOINCREMENT, memory_session_id TEXT NOT NULL, project TEXT NOT NULL,
  text TEXT, type TEXT NOT NULL, title TEXT, subtitle TEXT, facts TEXT, narrative TEXT,
  concepts TEXT, files_read TEXT, files_modified TEXT, prompt_number INTEGER,
  discovery_tokens INTEGER DEFAULT 0, created_at TEXT NOT NULL, created_at_epoch INTEGER NOT NULL,
  metadata TEXT, content_hash TEXT, generated_by_model TEXT, relevance_count INTEGER DEFAULT 0,
  merged_into_project TEXT, agent_type TEXT, agent_id TEXT, synced_at INTEGER,
  origin_device_id TEXT, origin_local_id TEXT, sync_rev TEXT NOT NULL DEFAULT '1',
  FOREIGN KEY(memory_session_id) REFERENCES sdk_sessions(memory_session_id)
    ON DELETE CASCADE ON UPDATE CASCADE);
CREATE UNIQUE INDEX ux_observations_session_hash ON observations(memory_session_id, content_hash);
CREATE TABLE session_summaries (
  id INTEGER PRIMARY KEY AUTOINCREMENT, memory_session_id TEXT NOT NULL, project TEXT NOT NULL,
  request TEXT, investigated TEXT, learned TEXT, completed TEXT, next_steps TEXT,
  files_read TEXT, files_edited TEXT, notes TEXT, prompt_number INTEGER,
  discovery_tokens INTEGER DEFAULT 0, created_at TEXT NOT NULL, created_at_epoch INTEGER NOT NULL,
  merged_into_project TEXT, synced_at INTEGER, origin_device_id TEXT, origin_local_id TEXT,
  sync_rev TEXT NOT NULL DEFAULT '1',
  FOREIGN KEY(memory_session_id) REFERENCES sdk_sessions(memory_session_id)
    ON DELETE CASCADE ON UPDATE CASCADE);
CREATE TABLE user_prompts (
  id INTEGER PRIMARY KEY AUTOINCREMENT, session_db_id INTEGER, content_session_id TEXT NOT NULL,
  prompt_number INTEGER NOT NULL, prompt_text TEXT NOT NULL, created_at TEXT NOT NULL,
  created_at_epoch INTEGER NOT NULL, synced_at INTEGER, origin_device_id TEXT,
  origin_local_id TEXT, sync_rev TEXT NOT NULL DEFAULT '1',
  FOREIGN KEY(session_db_id) REFERENCES sdk_sessions(id) ON DELETE CASCADE);
CREATE VIRTUAL TABLE observations_fts USING fts5(title, subtitle, narrative, text, facts,
  concepts, content='observations', content_rowid='id');
CREATE TRIGGER observations_ai AFTER INSERT ON observations BEGIN
  INSERT INTO observations_fts(rowid, title, subtitle, narrative, text, facts, concepts)
  VALUES (new.id, new.title, new.subtitle, new.narrative, new.text, new.facts, new.concepts);
END;
"""

T0 = 1_717_243_200_000  # 2024-06-01T12:00:00Z, in milliseconds as claude-mem stores them

CLAUDE_MEM_SESSIONS = [
    # content session, memory session, project, platform, prompt, title
    ("c-0001", "m-0001", "shop-api", "claude", "Fix the flaky checkout test", "Checkout retries"),
    ("c-0002", "m-0002", "shop-api", "cursor", "Why is the refund job slow?", None),
    ("c-0003", "m-0003", "blog", "claude", "Set up the static site", None),
]
CLAUDE_MEM_OBSERVATIONS = [
    # session, type, title, subtitle, narrative, facts, concepts, read, modified, extra
    (
        "m-0001",
        "decision",
        "Retry card payments three times",
        "Payment client retry policy",
        "The payment client now retries a declined-for-timeout card "
        "charge three times with exponential backoff before giving up.",
        ["Backoff starts at 200 ms", "Only timeouts are retried, never declines"],
        ["how-it-works", "trade-off"],
        ["src/payments/client.py"],
        ["src/payments/retry.py"],
        {"prompt_number": 1, "generated_by_model": "claude-sonnet-4-5", "discovery_tokens": 5120},
    ),
    (
        "m-0001",
        "bugfix",
        "Checkout test waited on the wall clock",
        "Flaky test fixed with a fake clock",
        "test_checkout_timeout slept for real; it now drives a "
        "fake clock, so it no longer fails under load.",
        ["The flake rate was about 1 in 30 runs"],
        ["problem-solution", "gotcha"],
        ["tests/test_checkout.py"],
        ["tests/test_checkout.py", "tests/conftest.py"],
        {"prompt_number": 2, "agent_type": "Explore", "agent_id": "agent-7f3a"},
    ),
    (
        "m-0002",
        "discovery",
        "Refund job scans every order",
        None,
        "The nightly refund job reads the whole orders table because refunds.order_id has "
        "no index.",
        [],
        ["pattern"],
        ["jobs/refunds.py", "db/schema.sql"],
        [],
        {"prompt_number": 1, "metadata": {"confidence": "high"}},
    ),
    (
        "m-0002",
        "refactor",
        "Ledger writes moved into one transaction",
        "Ledger module",
        "Refund and ledger rows are written in one transaction.",
        ["Removes the double-refund race"],
        ["what-changed"],
        [],
        ["src/ledger.py"],
        {"prompt_number": 3, "merged_into_project": "shop"},
    ),
    (
        "m-0003",
        "feature",
        "Site builds with the static generator",
        None,
        None,
        [],
        [],
        [],
        ["site/config.toml"],
        {
            "prompt_number": 1,
            "text": "Legacy text column: the blog is built by the static site "
            "generator and deployed from main.",
        },
    ),
]
CLAUDE_MEM_SUMMARIES = [
    (
        "m-0001",
        "Fix the flaky checkout test",
        "Why test_checkout_timeout fails under load",
        "The test slept on the wall clock",
        "Replaced the sleep with a fake clock",
        "Run the suite 100 times in CI to confirm",
        None,
        ["tests/test_checkout.py"],
        ["tests/test_checkout.py"],
        2,
    ),
    (
        "m-0002",
        "Why is the refund job slow?",
        "The job's query plan",
        "refunds.order_id has no index",
        "Added the index in a migration",
        "Measure the job tomorrow night",
        "Migration 0042 must run before the deploy",
        ["jobs/refunds.py"],
        ["db/migrations/0042.sql"],
        1,
    ),
]


def build_claude_mem(target: Path) -> None:
    target.unlink(missing_ok=True)
    conn = sqlite3.connect(target)
    conn.executescript(CLAUDE_MEM_SCHEMA)
    for v in (4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 20, 21, 22, 23, 24, 26, 27, 29, 30, 39, 41, 49):
        conn.execute(
            "INSERT INTO schema_versions(version, applied_at) VALUES (?,?)",
            (v, iso(T0 - 86_400_000)),
        )
    for i, (cs, ms, proj, platform, prompt, title) in enumerate(CLAUDE_MEM_SESSIONS):
        at = T0 + i * 3_600_000
        conn.execute(
            "INSERT INTO sdk_sessions(content_session_id, memory_session_id, project, "
            "platform_source, user_prompt, started_at, started_at_epoch, completed_at, "
            "completed_at_epoch, status, prompt_counter, custom_title) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                cs,
                ms,
                proj,
                platform,
                prompt,
                iso(at),
                at,
                iso(at + 600_000),
                at + 600_000,
                "completed",
                3,
                title,
            ),
        )
        conn.execute(
            "INSERT INTO user_prompts(session_db_id, content_session_id, prompt_number, "
            "prompt_text, created_at, created_at_epoch) VALUES (?,?,?,?,?,?)",
            (i + 1, cs, 1, prompt, iso(at), at),
        )
    for i, (ms, typ, title, sub, narr, facts, concepts, read, mod, extra) in enumerate(
        CLAUDE_MEM_OBSERVATIONS
    ):
        at = T0 + i * 60_000 + 1_000
        project = next(p for _, m, p, *_ in CLAUDE_MEM_SESSIONS if m == ms)
        digest = hashlib.sha256(f"{ms}\x00{title or ''}\x00{narr or ''}".encode()).hexdigest()
        conn.execute(
            "INSERT INTO observations(memory_session_id, project, text, type, title, subtitle, "
            "facts, narrative, concepts, files_read, files_modified, prompt_number, "
            "discovery_tokens, created_at, created_at_epoch, metadata, content_hash, "
            "generated_by_model, merged_into_project, agent_type, agent_id) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                ms,
                project,
                extra.get("text"),
                typ,
                title,
                sub,
                json.dumps(facts),
                narr,
                json.dumps(concepts),
                json.dumps(read),
                json.dumps(mod),
                extra.get("prompt_number"),
                extra.get("discovery_tokens", 0),
                iso(at),
                at,
                json.dumps(extra["metadata"]) if "metadata" in extra else None,
                digest[:16],
                extra.get("generated_by_model"),
                extra.get("merged_into_project"),
                extra.get("agent_type"),
                extra.get("agent_id"),
            ),
        )
    for i, (ms, req, inv, learned, done, nxt, notes, read, edited, pn) in enumerate(
        CLAUDE_MEM_SUMMARIES
    ):
        at = T0 + 3_600_000 * i + 900_000
        project = next(p for _, m, p, *_ in CLAUDE_MEM_SESSIONS if m == ms)
        conn.execute(
            "INSERT INTO session_summaries(memory_session_id, project, request, investigated, "
            "learned, completed, next_steps, files_read, files_edited, notes, prompt_number, "
            "discovery_tokens, created_at, created_at_epoch) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                ms,
                project,
                req,
                inv,
                learned,
                done,
                nxt,
                json.dumps(read),
                json.dumps(edited),
                notes,
                pn,
                800,
                iso(at),
                at,
            ),
        )
    conn.commit()
    conn.execute("VACUUM")
    conn.close()


# ---------------------------------------------------------------------- mcp-memory-service
MMS_SCHEMA = """
CREATE TABLE metadata (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE memories (
  id INTEGER PRIMARY KEY AUTOINCREMENT, content_hash TEXT UNIQUE NOT NULL, content TEXT NOT NULL,
  tags TEXT, memory_type TEXT, metadata TEXT, created_at REAL, updated_at REAL,
  created_at_iso TEXT, updated_at_iso TEXT, deleted_at REAL DEFAULT NULL,
  parent_id TEXT, version INTEGER DEFAULT 1, confidence REAL DEFAULT 1.0, last_accessed INTEGER,
  superseded_by TEXT);
CREATE INDEX idx_content_hash ON memories(content_hash);
CREATE INDEX idx_created_at ON memories(created_at);
CREATE INDEX idx_memory_type ON memories(memory_type);
CREATE INDEX idx_deleted_at ON memories(deleted_at);
CREATE VIRTUAL TABLE memory_content_fts USING fts5(content, content='memories',
  content_rowid='id', tokenize='trigram');
CREATE TABLE memory_graph (
  source_hash TEXT NOT NULL, target_hash TEXT NOT NULL, similarity REAL NOT NULL,
  connection_types TEXT NOT NULL, metadata TEXT, created_at REAL NOT NULL,
  relationship_type TEXT DEFAULT 'related', PRIMARY KEY (source_hash, target_hash));
CREATE INDEX idx_graph_source ON memory_graph(source_hash);
CREATE INDEX idx_graph_target ON memory_graph(target_hash);
CREATE INDEX idx_graph_relationship ON memory_graph(relationship_type);
"""
S0 = 1_719_835_200.0  # 2024-07-01T12:00:00Z, in seconds as mcp-memory-service stores them
MMS_MEMORIES = [
    # content, tags, type, metadata, extra columns
    (
        "Use PostgreSQL advisory locks for the nightly jobs; Redis locks expired under load.",
        ["proj:shop-api", "agent:claude-code", "topic:locking"],
        "decision",
        {"source": "session", "confidence_note": "agreed in review"},
        {},
    ),
    (
        "pytest -x -n 2 runs the suite in about 40 seconds on the CI runners.",
        ["proj:shop-api", "t:ci", "testing"],
        "learning",
        {},
        {"confidence": 0.9},
    ),
    (
        "The refund job timed out because refunds.order_id had no index.",
        ["proj:shop-api", "agent:cursor", "q:perf"],
        "error",
        {"severity": "high"},
        {"last_accessed": 1_719_900_000},
    ),
    ("Bulk imports go through a staging table, then one INSERT ... SELECT.", [], "pattern", {}, {}),
    ("An old note that was deleted.", ["obsolete"], "note", {}, {"deleted_at": S0 + 500}),
    (
        "The retry limit was two.",
        ["proj:shop-api"],
        "decision",
        {},
        {"superseded_by": "placeholder", "version": 1},
    ),
    (
        "The retry limit is three, with exponential backoff.",
        ["proj:shop-api"],
        "decision",
        {},
        {"version": 2},
    ),
]


def mms_hash(text: str) -> str:  # its utils/hashing.py: SHA-256 of the stripped, lower-cased text
    return hashlib.sha256(text.strip().lower().encode("utf-8")).hexdigest()


def build_mcp_memory_service(target: Path, vec0: str) -> None:
    target.unlink(missing_ok=True)
    conn = sqlite3.connect(target)
    conn.executescript(MMS_SCHEMA)
    conn.execute("INSERT INTO metadata VALUES ('distance_metric', 'cosine')")
    hashes = [mms_hash(c) for c, *_ in MMS_MEMORIES]
    for i, (content, tags, mtype, meta, extra) in enumerate(MMS_MEMORIES):
        at = S0 + i * 3600
        extra = dict(extra)
        if extra.get("superseded_by") == "placeholder":
            extra["superseded_by"] = hashes[i + 1]
            extra["parent_id"] = None
        if extra.get("version") == 2:
            extra["parent_id"] = hashes[i - 1]
        conn.execute(
            "INSERT INTO memories(content_hash, content, tags, memory_type, metadata, created_at, "
            "updated_at, created_at_iso, updated_at_iso, deleted_at, parent_id, version, "
            "confidence, last_accessed, superseded_by) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                hashes[i],
                content,
                ",".join(tags),
                mtype,
                json.dumps(meta),
                at,
                at + 60,
                datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z"),
                datetime.fromtimestamp(at + 60, UTC).isoformat().replace("+00:00", "Z"),
                extra.get("deleted_at"),
                extra.get("parent_id"),
                extra.get("version", 1),
                extra.get("confidence", 1.0),
                extra.get("last_accessed"),
                extra.get("superseded_by"),
            ),
        )
    conn.execute("INSERT INTO memory_content_fts(memory_content_fts) VALUES ('rebuild')")
    edges = [
        (0, 2, "fixes", ["causal"]),
        (2, 3, "related", ["semantic", "thematic"]),
        (3, 2, "related", ["semantic", "thematic"]),
    ]
    for a, b, kind, conns in edges:
        conn.execute(
            "INSERT INTO memory_graph VALUES (?,?,?,?,?,?,?)",
            (
                hashes[a],
                hashes[b],
                0.62,
                json.dumps(conns),
                json.dumps({"discovery_date": "2024-07-02"}),
                S0 + 7200,
                kind,
            ),
        )
    conn.commit()
    conn.close()
    # the vectors: a vec0 table, as the service creates it (384-d, cosine)
    rows = []
    for i, (content, *_rest) in enumerate(MMS_MEMORIES):
        seed = hashlib.sha256(content.encode()).digest()
        vec = [((seed[j % 32] / 255.0) - 0.5) for j in range(384)]
        rows.append(
            f"INSERT INTO memory_embeddings(rowid, content_embedding) VALUES "
            f"({i + 1}, X'{struct.pack('384f', *vec).hex()}');"
        )
    script = "\n".join(
        [
            f".load {vec0}",
            "CREATE VIRTUAL TABLE memory_embeddings USING vec0("
            "content_embedding FLOAT[384] distance_metric=cosine);",
            *rows,
        ]
    )
    subprocess.run(["sqlite3", str(target)], input=script, text=True, check=True)


# ---------------------------------------------------------------------- mem0 / OpenMemory
OPENMEMORY = {
    "user": {
        "id": "6f1c2b9e-0000-4000-8000-000000000001",
        "user_id": "dana",
        "name": "Dana",
        "email": None,
        "metadata": {},
        "created_at": "2024-08-01T09:00:00+00:00",
        "updated_at": "2024-08-01T09:00:00+00:00",
    },
    "apps": [
        {
            "id": "a0000000-0000-4000-8000-000000000001",
            "owner_id": "6f1c2b9e-0000-4000-8000-000000000001",
            "name": "claude",
            "description": None,
            "metadata": {},
            "is_active": True,
            "created_at": "2024-08-01T09:00:00+00:00",
            "updated_at": "2024-08-01T09:00:00+00:00",
        },
        {
            "id": "a0000000-0000-4000-8000-000000000002",
            "owner_id": "6f1c2b9e-0000-4000-8000-000000000001",
            "name": "cursor",
            "description": None,
            "metadata": {},
            "is_active": True,
            "created_at": "2024-08-01T09:00:00+00:00",
            "updated_at": "2024-08-01T09:00:00+00:00",
        },
    ],
    "categories": [
        {
            "id": "c0000000-0000-4000-8000-000000000001",
            "name": "preferences",
            "description": None,
            "created_at": "2024-08-01T09:00:00+00:00",
            "updated_at": "2024-08-01T09:00:00+00:00",
        },
        {
            "id": "c0000000-0000-4000-8000-000000000002",
            "name": "work",
            "description": None,
            "created_at": "2024-08-01T09:00:00+00:00",
            "updated_at": "2024-08-01T09:00:00+00:00",
        },
    ],
    "memories": [
        {
            "id": "e0000000-0000-4000-8000-000000000001",
            "user_id": "6f1c2b9e-0000-4000-8000-000000000001",
            "app_id": "a0000000-0000-4000-8000-000000000001",
            "content": "Prefers small pull requests with a test for every fix",
            "metadata": {"source_app": "openmemory"},
            "state": "active",
            "created_at": "2024-08-02T10:00:00+00:00",
            "updated_at": "2024-08-03T10:00:00+00:00",
            "archived_at": None,
            "deleted_at": None,
            "category_ids": [
                "c0000000-0000-4000-8000-000000000001",
                "c0000000-0000-4000-8000-000000000002",
            ],
        },
        {
            "id": "e0000000-0000-4000-8000-000000000002",
            "user_id": "6f1c2b9e-0000-4000-8000-000000000001",
            "app_id": "a0000000-0000-4000-8000-000000000002",
            "content": "Works on the shop-api service in Python 3.12",
            "metadata": {},
            "state": "archived",
            "created_at": "2024-08-04T10:00:00+00:00",
            "updated_at": "2024-08-04T10:00:00+00:00",
            "archived_at": "2024-09-01T00:00:00+00:00",
            "deleted_at": None,
            "category_ids": ["c0000000-0000-4000-8000-000000000002"],
        },
        {
            "id": "e0000000-0000-4000-8000-000000000003",
            "user_id": "6f1c2b9e-0000-4000-8000-000000000001",
            "app_id": "a0000000-0000-4000-8000-000000000001",
            "content": "Used to deploy on Fridays",
            "metadata": {},
            "state": "deleted",
            "created_at": "2024-08-05T10:00:00+00:00",
            "updated_at": "2024-08-06T10:00:00+00:00",
            "archived_at": None,
            "deleted_at": "2024-08-06T10:00:00+00:00",
            "category_ids": [],
        },
    ],
    "memory_categories": [],
    "status_history": [],
    "access_controls": [],
    "export_meta": {
        "app_id_filter": None,
        "from_date": None,
        "to_date": None,
        "version": "1",
        "generated_at": "2024-09-10T12:00:00+00:00",
    },
}


def build_openmemory(target: Path) -> None:
    doc = json.loads(json.dumps(OPENMEMORY))
    doc["memory_categories"] = [
        {"memory_id": m["id"], "category_id": c} for m in doc["memories"] for c in m["category_ids"]
    ]
    apps = {a["id"]: a["name"] for a in doc["apps"]}
    cats = {c["id"]: c["name"] for c in doc["categories"]}
    lines = [
        {
            "id": m["id"],
            "content": m["content"],
            "metadata": m["metadata"],
            "created_at": m["created_at"],
            "updated_at": m["updated_at"],
            "state": m["state"],
            "app": apps.get(m["app_id"]),
            "categories": [cats[c] for c in m["category_ids"]],
        }
        for m in doc["memories"]
    ]
    gz = io.BytesIO()
    with gzip.GzipFile(fileobj=gz, mode="wb", mtime=0) as fh:
        for line in lines:
            fh.write((json.dumps(line) + "\n").encode("utf-8"))
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in (
            ("memories.json", json.dumps(doc, indent=2).encode()),
            ("memories.jsonl.gz", gz.getvalue()),
        ):
            info = zipfile.ZipInfo(name, date_time=(2024, 9, 10, 12, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)


def main() -> None:
    build_claude_mem(HERE / "claude-mem" / "claude-mem.db")
    build_openmemory(HERE / "mem0" / "memories_export_dana.zip")
    vec0 = os.environ.get("SQLITE_VEC")
    if vec0:
        build_mcp_memory_service(HERE / "mcp-memory-service" / "sqlite_vec.db", vec0)
    else:
        print("SQLITE_VEC not set: mcp-memory-service/sqlite_vec.db left as it is")


if __name__ == "__main__":
    main()
