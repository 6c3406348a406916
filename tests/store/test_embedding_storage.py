"""Stored vectors on disk: a rowid table, two 384-d vectors per 4 KB page (a WITHOUT ROWID
table spilled each one into an overflow page: 4.5 KB per vector). A store of the earlier
layout is migrated with its vectors. Real SQLite in ``tmp_path``."""

from __future__ import annotations

import sqlite3

import numpy as np

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.records import Record, Scope
from retrieval.storage.store import SQLiteStore

V8_EMBEDDINGS = """CREATE TABLE embeddings(
    record_rowid INTEGER NOT NULL, model_id TEXT NOT NULL, window INTEGER NOT NULL,
    content_hash TEXT NOT NULL, vector BLOB NOT NULL,
    PRIMARY KEY(record_rowid, model_id, window)) WITHOUT ROWID"""


def _records(n: int) -> list[Record]:
    return [
        Record(project_id="p", agent_id="a", scope=Scope.team, category="learnings",
               content=f"note {i}: the indexer reads file {i} before the nightly build")
        for i in range(n)
    ]  # fmt: skip


def _bytes_per_vector(path) -> float:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        (size,) = conn.execute("SELECT sum(pgsize) FROM dbstat WHERE name='embeddings'").fetchone()
        (rows,) = conn.execute("SELECT count(*) FROM embeddings").fetchone()
        return size / rows
    finally:
        conn.close()


def test_a_vector_takes_about_its_own_size_on_disk(tmp_path):
    eng = Engine(tmp_path / "s", HashEmbedder(384))
    try:
        eng.add(_records(600))
        eng.store.checkpoint()
    finally:
        eng.close()
    assert _bytes_per_vector(tmp_path / "s" / "pattern.sqlite3") <= 2100  # 1536 B of floats


def test_a_store_of_the_earlier_layout_keeps_its_vectors(tmp_path):
    eng = Engine(tmp_path / "s", HashEmbedder(384))
    try:
        recs = eng.add(_records(50))
        eng.store.checkpoint()
        before = eng.store.embeddings([r.id for r in recs], eng.embedder.model_id)
    finally:
        eng.close()
    path = tmp_path / "s" / "pattern.sqlite3"
    conn = sqlite3.connect(str(path), isolation_level=None)  # back to v8's WITHOUT ROWID table
    conn.execute("BEGIN")
    conn.execute("ALTER TABLE embeddings RENAME TO embeddings_now")
    conn.execute(V8_EMBEDDINGS)
    conn.execute("INSERT INTO embeddings SELECT * FROM embeddings_now")
    conn.execute("DROP TABLE embeddings_now")
    conn.execute("PRAGMA user_version = 8")
    conn.execute("COMMIT")
    conn.close()
    assert _bytes_per_vector(path) > 4000  # each vector spilled into an overflow page
    store = SQLiteStore(path)  # migrates
    try:
        (sql,) = store.reader.execute(
            "SELECT sql FROM sqlite_master WHERE name='embeddings'"
        ).fetchone()
        assert "WITHOUT ROWID" not in sql.upper()
        after = store.embeddings([r.id for r in recs], HashEmbedder(384).model_id)
        assert after.keys() == before.keys()
        for rid, vec in before.items():
            assert np.array_equal(after[rid], vec)
        with store.transaction() as conn:  # the key is still unique
            (rowid,) = conn.execute(
                "SELECT rowid FROM records WHERE id=?", (recs[0].id,)
            ).fetchone()
            try:
                conn.execute(
                    "INSERT INTO embeddings VALUES (?, ?, 0, 'h', x'00')",
                    (rowid, HashEmbedder(384).model_id),
                )
                raise AssertionError("a second vector for the same window was accepted")
            except sqlite3.IntegrityError:
                pass
    finally:
        store.close()
