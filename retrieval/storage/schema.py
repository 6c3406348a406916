"""SQLite schema and migrations (``PRAGMA user_version``).

Each migration is a list of statements applied in one transaction; a store opened by a newer
version refuses to be used by an older one instead of guessing.
"""

from __future__ import annotations

import sqlite3

from retrieval.errors import StoreUnavailable
from retrieval.storage.buckets import bucket_token

FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"


MIGRATIONS: list[list[str]] = [
    # v1: records, tags, FTS5, embeddings, change log, vector outbox
    [
        """CREATE TABLE records(
            rowid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            kind TEXT NOT NULL,
            project_id TEXT NOT NULL,
            agent_id TEXT NOT NULL,
            scope TEXT NOT NULL,
            bucket TEXT NOT NULL,
            category TEXT NOT NULL,
            content TEXT NOT NULL,
            context TEXT NOT NULL DEFAULT '',
            metadata TEXT NOT NULL DEFAULT '{}',
            priority INTEGER NOT NULL DEFAULT 2,
            entity_name TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            expires_at TEXT,
            revision INTEGER NOT NULL DEFAULT 1,
            content_hash TEXT NOT NULL,
            embedding_model TEXT
        )""",
        "CREATE INDEX records_bucket ON records(bucket, kind, category)",
        "CREATE INDEX records_updated ON records(updated_at)",
        "CREATE INDEX records_expires ON records(expires_at) WHERE expires_at IS NOT NULL",
        "CREATE INDEX records_entity ON records(project_id, entity_name) WHERE entity_name IS NOT NULL",
        """CREATE TABLE record_tags(
            tag TEXT NOT NULL, record_rowid INTEGER NOT NULL,
            PRIMARY KEY(tag, record_rowid)) WITHOUT ROWID""",
        "CREATE INDEX record_tags_rowid ON record_tags(record_rowid)",
        f"""CREATE VIRTUAL TABLE records_fts USING fts5(
            content, context, terms, tokenize='{FTS_TOKENIZER}')""",
        """CREATE TABLE embeddings(
            record_rowid INTEGER NOT NULL, model_id TEXT NOT NULL, window INTEGER NOT NULL,
            content_hash TEXT NOT NULL, vector BLOB NOT NULL,
            PRIMARY KEY(record_rowid, model_id, window)) WITHOUT ROWID""",
        """CREATE TABLE changes(
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            record_id TEXT NOT NULL, op TEXT NOT NULL, kind TEXT NOT NULL,
            bucket TEXT NOT NULL, revision INTEGER NOT NULL, at TEXT NOT NULL)""",
        """CREATE TABLE vector_outbox(
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            record_id TEXT NOT NULL, op TEXT NOT NULL, bucket TEXT NOT NULL)""",
        """CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)""",
    ],
    # v2: idempotency keys (a retried write returns its first result) and durable change-stream
    # consumer cursors; changes by bucket, so a consumer pages only the buckets it may see
    [
        """CREATE TABLE idempotency_keys(
            agent_id TEXT NOT NULL, key TEXT NOT NULL, tool TEXT NOT NULL,
            request_hash TEXT NOT NULL, result TEXT NOT NULL,
            created_at TEXT NOT NULL, expires_at TEXT NOT NULL,
            PRIMARY KEY(agent_id, key)) WITHOUT ROWID""",
        "CREATE INDEX idempotency_keys_expires ON idempotency_keys(expires_at)",
        """CREATE TABLE consumer_cursors(
            agent_id TEXT NOT NULL, consumer_id TEXT NOT NULL, scope_key TEXT NOT NULL,
            cursor INTEGER NOT NULL, updated_at TEXT NOT NULL,
            PRIMARY KEY(agent_id, consumer_id, scope_key)) WITHOUT ROWID""",
        "CREATE INDEX changes_bucket ON changes(bucket, seq)",
    ],
    # workspace ingestion: one row per file under an ingested root (ingest/workspace/filetable.py)
    [
        """CREATE TABLE IF NOT EXISTS files(
            bucket TEXT NOT NULL, path TEXT NOT NULL, sha256 TEXT NOT NULL,
            size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, chunks INTEGER NOT NULL DEFAULT 0,
            state TEXT NOT NULL, reason TEXT, chunker TEXT NOT NULL, checked_ns INTEGER NOT NULL,
            PRIMARY KEY(bucket, path)) WITHOUT ROWID""",
    ],
    # knowledge graph (graph/): entities and relations per bucket (a graph per scope: team of
    # the project by default), lessons (structured error + fix, with its embedded `lesson`
    # record), an FTS5 index of entity names and types; observations are `observation` records
    [
        """CREATE TABLE entities(
            id INTEGER PRIMARY KEY,
            bucket TEXT NOT NULL, project_id TEXT NOT NULL, name TEXT NOT NULL,
            entity_type TEXT NOT NULL, created_by TEXT NOT NULL,
            created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
            UNIQUE(bucket, name))""",
        """CREATE TABLE relations(
            id INTEGER PRIMARY KEY,
            bucket TEXT NOT NULL, from_name TEXT NOT NULL, to_name TEXT NOT NULL,
            relation_type TEXT NOT NULL, created_by TEXT NOT NULL, created_at TEXT NOT NULL,
            UNIQUE(bucket, from_name, to_name, relation_type))""",
        "CREATE INDEX relations_to ON relations(bucket, to_name)",
        """CREATE TABLE lessons(
            id INTEGER PRIMARY KEY,
            bucket TEXT NOT NULL, name TEXT NOT NULL,
            error_type TEXT NOT NULL, message TEXT NOT NULL, context TEXT NOT NULL,
            stack_trace TEXT, severity TEXT NOT NULL, environment TEXT NOT NULL DEFAULT '{}',
            frequency INTEGER NOT NULL DEFAULT 1, success_rate REAL NOT NULL DEFAULT 1.0,
            observations TEXT NOT NULL DEFAULT '[]', verification_steps TEXT NOT NULL DEFAULT '[]',
            extra TEXT NOT NULL DEFAULT '{}', record_id TEXT NOT NULL,
            created_by TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
            UNIQUE(bucket, name))""",
        f"""CREATE VIRTUAL TABLE entities_fts USING fts5(
            name, entity_type, terms, tokenize='{FTS_TOKENIZER}')""",
        "CREATE INDEX records_bucket_entity ON records(bucket, entity_name) "
        "WHERE entity_name IS NOT NULL",
    ],
    # v5: records_fts gets an indexed `bucket` column (one token per record, bucket_token): a
    # filtered recall ANDs `bucket : (...)` into the MATCH, so FTS5 intersects doclists and
    # scores only the visible rows, without a records lookup per matching row (at 100k records
    # a SciFact question matched 19k rows, 4.7k of them visible to one agent; docs/benchmarks.md
    # "Scale"). FTS5 cannot add a column: the table is rebuilt from the old one.
    [
        f"""CREATE VIRTUAL TABLE records_fts_v5 USING fts5(
            content, context, terms, bucket, tokenize='{FTS_TOKENIZER}')""",
        """INSERT INTO records_fts_v5(rowid, content, context, terms, bucket)
            SELECT f.rowid, f.content, f.context, f.terms, pm_bucket_token(r.bucket)
            FROM records_fts f JOIN records r ON r.rowid = f.rowid""",
        "DROP TABLE records_fts",
        "ALTER TABLE records_fts_v5 RENAME TO records_fts",
    ],
    # v6: citations of code (server/service/recalling/citations.py, retrieval/cite.py): one row per cited
    # file or line range of a record. The anchor (as written or last confirmed): the file's
    # sha256/size/mtime, the range, the exact lines' hash, the normalized fingerprint and the
    # cited text (<= 4 KB); the last check: status, where the lines are now, the file's stat
    # and sha as seen then. Deleted with their record (SQLiteStore.delete).
    [
        """CREATE TABLE IF NOT EXISTS citations(
            record_id TEXT NOT NULL, idx INTEGER NOT NULL,
            path TEXT NOT NULL, root TEXT NOT NULL, abs_path TEXT NOT NULL,
            start_line INTEGER, end_line INTEGER,
            sha256 TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
            lines_hash TEXT, fingerprint TEXT, n_norm INTEGER NOT NULL DEFAULT 0,
            lead INTEGER NOT NULL DEFAULT 0, trail INTEGER NOT NULL DEFAULT 0,
            text TEXT NOT NULL DEFAULT '', source TEXT NOT NULL,
            status TEXT NOT NULL, cur_start INTEGER, cur_end INTEGER,
            seen_sha TEXT, seen_size INTEGER, seen_mtime_ns INTEGER,
            checked_ns INTEGER NOT NULL, created_at TEXT NOT NULL,
            PRIMARY KEY(record_id, idx)) WITHOUT ROWID""",
        "CREATE INDEX IF NOT EXISTS citations_file ON citations(abs_path)",
    ],
    # v7: the dashboard and the review inbox (server/service/browsing/review.py, server/ui/).
    # - proposals: share-learning under PATTERN_TEAM_REVIEW proposes a memory for the team
    #   scope; a reviewer approves (the memory moves, with its provenance) or rejects it.
    # - ingest_runs: each ingested root with its last report (the workspace page lists the
    #   roots, their files and the files the walk skipped, with reasons).
    # - per-bucket orderings of records, so a paginated table (newest / oldest / by priority)
    #   reads one page from an index instead of sorting a bucket of 100k records.
    # - session turns (kind 'turn', metadata.session / metadata.turn) by session, in order.
    [
        """CREATE TABLE IF NOT EXISTS proposals(
            id TEXT PRIMARY KEY, project_id TEXT NOT NULL, memory_id TEXT NOT NULL,
            proposer TEXT NOT NULL, category TEXT NOT NULL, keep_original INTEGER NOT NULL,
            content TEXT NOT NULL, revision INTEGER NOT NULL, status TEXT NOT NULL,
            reason TEXT, reviewer TEXT, reviewed_at TEXT, shared_memory_id TEXT,
            edited INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS proposals_project ON proposals(project_id, status, created_at)",
        "CREATE INDEX IF NOT EXISTS proposals_memory ON proposals(memory_id, status)",
        """CREATE TABLE IF NOT EXISTS ingest_runs(
            bucket TEXT NOT NULL, root TEXT NOT NULL, finished_at TEXT NOT NULL,
            report TEXT NOT NULL, PRIMARY KEY(bucket, root)) WITHOUT ROWID""",
        "CREATE INDEX IF NOT EXISTS records_bucket_updated ON records(bucket, kind, updated_at)",
        "CREATE INDEX IF NOT EXISTS records_bucket_created ON records(bucket, kind, created_at)",
        "CREATE INDEX IF NOT EXISTS records_bucket_priority ON records(bucket, kind, priority)",
        "CREATE INDEX IF NOT EXISTS records_turns ON records(bucket, json_extract(metadata, '$.session'), "
        "CAST(json_extract(metadata, '$.turn') AS INTEGER)) WHERE kind = 'turn'",
    ],
    # v8: merge, don't reject (server/service/memories/merge.py).
    # - record_revisions: the recent versions of each memory (content, metadata, category), the
    #   base of a three-way merge when an update's expected revision is stale; ``parents`` (JSON)
    #   is set on a merged revision: the revision it was written over and the one its edit was
    #   made from. Written by the store when a memory is updated (SQLiteStore.replace: the
    #   version replaced and the new one), pruned to the last HISTORY_DEPTH versions, deleted
    #   with the record.
    # - entities.revision: goes up with every change of the entity's observations; each
    #   observation records the revision that added it (metadata.addedAt), so a deletion made
    #   from a read of revision R removes only observations its writer saw (add wins).
    [
        """CREATE TABLE IF NOT EXISTS record_revisions(
            record_id TEXT NOT NULL, revision INTEGER NOT NULL, content TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}', category TEXT NOT NULL, parents TEXT,
            at TEXT NOT NULL, PRIMARY KEY(record_id, revision)) WITHOUT ROWID""",
        "ALTER TABLE entities ADD COLUMN revision INTEGER NOT NULL DEFAULT 0",
    ],
    # v9: embeddings in a rowid table (same columns, same primary key, now a separate index).
    # A WITHOUT ROWID table keeps at most ~1 KB of a row in its b-tree page (4 KB pages): each
    # 1.5 KB vector spilled into an overflow page of its own, 4.5 KB on disk per vector. A
    # rowid table keeps two vectors per page: 2 KB each.
    [
        """CREATE TABLE embeddings_v9(
            record_rowid INTEGER NOT NULL, model_id TEXT NOT NULL, window INTEGER NOT NULL,
            content_hash TEXT NOT NULL, vector BLOB NOT NULL,
            PRIMARY KEY(record_rowid, model_id, window))""",
        "INSERT INTO embeddings_v9(record_rowid, model_id, window, content_hash, vector) "
        "SELECT record_rowid, model_id, window, content_hash, vector FROM embeddings",
        "DROP TABLE embeddings",
        "ALTER TABLE embeddings_v9 RENAME TO embeddings",
    ],
    # v10: the shared memories of a project, indexed for the per-project limit counted inside
    # every write that shares one (server/service/memories/writes.py, SHARED_COUNT). Without it that
    # count scanned the whole table: 76 ms at 300k records, in every such write transaction.
    [
        "CREATE INDEX IF NOT EXISTS records_shared ON records(project_id) "
        "WHERE kind = 'memory' AND scope IN ('team', 'public')",
    ],
    # v11: update links (retrieval/timeline/links.py): a newer record updates an older one of the same
    # bucket (the same subject, a new value); both are kept, ranking puts the newer first and
    # quoting marks the older. An undone link keeps its row (undone_at), so a pair a person
    # unlinked is never detected again.
    [
        """CREATE TABLE IF NOT EXISTS record_links(
            older_id TEXT NOT NULL, newer_id TEXT NOT NULL, bucket TEXT NOT NULL,
            how TEXT NOT NULL, similarity REAL, created_at TEXT NOT NULL,
            created_by TEXT NOT NULL, undone_at TEXT, undone_by TEXT,
            PRIMARY KEY(older_id, newer_id)) WITHOUT ROWID""",
        "CREATE INDEX IF NOT EXISTS record_links_newer ON record_links(newer_id)",
    ],
    # v12: lessons learned from episodes (graph/learned.py). An error signature (its digest)
    # names the lesson it was learned into, so a later episode with the same signature adds an
    # occurrence to that lesson instead of a duplicate; a merge points the merged lesson's
    # signatures at the lesson it went into; a rejected lesson leaves its signatures with
    # status 'rejected', so the same error is not learned again.
    [
        """CREATE TABLE IF NOT EXISTS lesson_signatures(
            bucket TEXT NOT NULL, signature TEXT NOT NULL, name TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'active', reason TEXT, updated_at TEXT NOT NULL,
            PRIMARY KEY(bucket, signature)) WITHOUT ROWID""",
        "CREATE INDEX IF NOT EXISTS lesson_signatures_name ON lesson_signatures(bucket, name)",
    ],
    # v13: the warnings of writes no person asked for (server/service/browsing/unattended_warnings.py):
    # a learned lesson, an indexed exchange, a progress row. One row per project and distinct
    # warning (its digest: source, subject, text, writer), counted when it comes again; the
    # review inbox lists them (a private write's to its agent only) until a person dismisses
    # them; the newest 500 per project are kept.
    [
        """CREATE TABLE IF NOT EXISTS write_warnings(
            project_id TEXT NOT NULL, digest TEXT NOT NULL, agent_id TEXT NOT NULL,
            scope TEXT NOT NULL, source TEXT NOT NULL, subject TEXT NOT NULL,
            warning TEXT NOT NULL, count INTEGER NOT NULL DEFAULT 1,
            first_at TEXT NOT NULL, at TEXT NOT NULL,
            PRIMARY KEY(project_id, digest)) WITHOUT ROWID""",
        "CREATE INDEX IF NOT EXISTS write_warnings_at ON write_warnings(project_id, at)",
    ],
    # v14: relations waiting for an entity (graph/pending.py): a relation an import brings
    # whose endpoint is in neither the graph nor the source (a forward reference) is kept here,
    # out of every read of the graph, and moves to `relations` in the transaction that creates
    # that entity.
    [
        """CREATE TABLE IF NOT EXISTS pending_relations(
            bucket TEXT NOT NULL, from_name TEXT NOT NULL, to_name TEXT NOT NULL,
            relation_type TEXT NOT NULL, created_by TEXT NOT NULL, created_at TEXT NOT NULL,
            PRIMARY KEY(bucket, from_name, to_name, relation_type)) WITHOUT ROWID""",
        "CREATE INDEX IF NOT EXISTS pending_relations_to ON pending_relations(bucket, to_name)",
    ],
    # v15: no link the agent did not make. The update links an earlier version made by itself
    # (how = 'detected': a guess from a cosine and a subject rule, sometimes false) become
    # candidate pairs: recall marks them and the review inbox lists them until an agent or a
    # person links or dismisses them. A detected link a person had undone stays dismissed.
    ["UPDATE record_links SET how = 'candidate' WHERE how = 'detected'"],
]

SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the database to :data:`SCHEMA_VERSION`; returns the version found before."""
    found = conn.execute("PRAGMA user_version").fetchone()[0]
    if found > SCHEMA_VERSION:
        raise StoreUnavailable(
            f"store schema v{found} is newer than this pattern-memory (v{SCHEMA_VERSION}); upgrade",
            found=found,
            supported=SCHEMA_VERSION,
        )
    if found < SCHEMA_VERSION:
        conn.create_function("pm_bucket_token", 1, bucket_token, deterministic=True)
    for version in range(found, SCHEMA_VERSION):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in MIGRATIONS[version]:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version + 1}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return found
