"""The PostgreSQL translation of the project's SQL and the catalog derived from the SQLite
schema (no database needed: these are the parts that decide what PostgreSQL runs)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval.pg import log
from retrieval.pg.catalog import LOCAL_TABLES, Catalog
from retrieval.pg.dialect import Dialect, UnsupportedSQL, to_pg
from retrieval.storage.schema import migrate

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dialect() -> Dialect:
    return Dialect(Catalog())


def test_every_sqlite_table_is_canonical_or_named_local():
    """A table added by a later migration is canonical without code of its own; only the
    listed node-local tables (and FTS5's shadow tables) stay out of PostgreSQL."""
    cat = Catalog()
    conn = sqlite3.connect(":memory:")
    migrate(conn)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    virtual = {r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL%'")}  # fmt: skip
    shadows = {n for n in names for v in virtual if n.startswith(v + "_")}
    assert names - shadows - {"sqlite_sequence"} == set(cat.tables) | LOCAL_TABLES
    for t in cat.tables.values():
        assert t.pk, f"{t.name} needs a primary key to be replicated"
    assert cat.tables["records"].auto_pk == "rowid" and not cat.tables["records"].autoincrement
    assert cat.tables["changes"].autoincrement and cat.tables["entities"].auto_pk == "id"
    assert cat.tables["records_fts"].fts and cat.tables["records_fts"].pk == ["rowid"]
    assert cat.tables["record_tags"].auto_pk is None  # WITHOUT ROWID, composite key


def test_placeholders_literals_and_null_safe_comparisons():
    assert to_pg("SELECT 1 FROM t WHERE a = ? AND b LIKE '50%?'") == (
        "SELECT 1 FROM t WHERE a = %s AND b LIKE '50%?'"
    )
    assert to_pg("SELECT a FROM t WHERE b IS NOT ? AND c IS ? AND d IS NOT NULL") == (
        "SELECT a FROM t WHERE b IS DISTINCT FROM %s AND c IS NOT DISTINCT FROM %s "
        "AND d IS NOT NULL"
    )
    assert to_pg("SELECT x % 2 FROM t") == "SELECT x %% 2 FROM t"


def test_inserts_get_their_key_conflict_clause_and_row_images(dialect):
    st = dialect.statement(
        "INSERT INTO changes(record_id, op, kind, bucket, revision, at) VALUES (?,?,?,?,?,?)"
    )
    assert st.inject_pk == "seq" and st.table == "changes" and not st.local
    assert st.pg.startswith('INSERT INTO "changes" ("seq", "record_id"')
    assert "VALUES (%s, %s,%s" in st.pg and st.pg.endswith("RETURNING *")
    ign = dialect.statement("INSERT OR IGNORE INTO record_tags(tag, record_rowid) VALUES (?,?)")
    assert "ON CONFLICT DO NOTHING RETURNING *" in ign.pg and ign.inject_pk is None
    rep = dialect.statement("INSERT OR REPLACE INTO meta(key, value) VALUES (?,?)")
    assert 'ON CONFLICT ("key") DO UPDATE SET "value" = EXCLUDED."value"' in rep.pg


def test_reserved_column_names_are_quoted(dialect):
    st = dialect.statement(
        "INSERT INTO embeddings(record_rowid, model_id, window, content_hash, vector) "
        "VALUES (?,?,?,?,?)"
    )
    assert '"window"' in st.pg
    sel = dialect.statement("SELECT e.window FROM embeddings e ORDER BY e.window")
    assert sel.pg == 'SELECT e."window" FROM embeddings e ORDER BY e."window"'


def test_deletes_return_keys_and_local_tables_are_not_run(dialect):
    d = dialect.statement("DELETE FROM record_tags WHERE record_rowid=?")
    assert d.pg.endswith('RETURNING "tag", "record_rowid"')
    out = dialect.statement("INSERT INTO vector_outbox(record_id, op, bucket) VALUES (?,?,?)")
    assert out.local and out.pg is None


def test_what_the_translation_cannot_do_is_refused(dialect):
    with pytest.raises(UnsupportedSQL, match="key"):
        dialect.statement("UPDATE records SET rowid = ? WHERE id = ?")
    with pytest.raises(UnsupportedSQL, match="node-local"):
        dialect.statement("SELECT count(*) FROM vector_outbox")
    with pytest.raises(UnsupportedSQL, match="no canonical table"):
        dialect.statement("INSERT INTO nowhere(a) VALUES (?)")
    with pytest.raises(UnsupportedSQL, match="one VALUES row"):
        dialect.statement("INSERT INTO entities(bucket, name) SELECT bucket, name FROM lessons")


def test_log_entries_round_trip_with_bytes_and_apply_to_sqlite():
    conn = sqlite3.connect(":memory:")
    migrate(conn)
    vec = bytes(range(256)) * 6
    entries = [
        ["r", "records_fts", ["rowid", "content", "context", "terms", "bucket"],
         [[7, "hello world", "", "", "b"]]],
        ["r", "embeddings", ["record_rowid", "model_id", "window", "content_hash", "vector"],
         [[7, "m", 0, "h", vec]]],
        ["s", "INSERT INTO vector_outbox(record_id, op, bucket) VALUES (?,?,?)", ["x", "upsert", "b"]],
    ]  # fmt: skip
    back = log.decode(log.encode(entries))
    assert back == entries
    log.apply(conn, back)
    assert conn.execute("SELECT vector FROM embeddings").fetchone()[0] == vec
    assert conn.execute("SELECT rowid FROM records_fts WHERE records_fts MATCH 'hello'").fetchall()
    log.apply(conn, [["d", "records_fts", ["rowid"], [[7]]]])
    assert conn.execute("SELECT count(*) FROM records_fts").fetchone()[0] == 0


def test_the_sqlite_path_never_imports_psycopg(tmp_path):
    code = (
        "import sys; from server.service.core.runtime import Runtime; "
        f"rt = Runtime.start({{'PATTERN_HOME': {str(tmp_path)!r}, 'PATTERN_EMBEDDER': 'hash'}}, "
        "background=False); rt.service.remember(rt.identity, __import__('server.service.core.models', "
        "fromlist=['MemoryInput']).MemoryInput(content='x')); rt.close(); "
        "print('psycopg' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                         timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_a_later_migration_is_canonical_without_code(monkeypatch, new_pg_database, tmp_path):
    """A table, a column and an expression index (SQLite-only functions) added by a new
    migration: the table and column appear in PostgreSQL, the index is left out, and a write
    to the new table replicates to another node."""
    from retrieval.engine import Engine
    from retrieval.storage import schema

    extra = [
        """CREATE TABLE IF NOT EXISTS later_things(
            id TEXT PRIMARY KEY, memory_id TEXT NOT NULL, status TEXT NOT NULL,
            n INTEGER NOT NULL DEFAULT 0)""",
        "CREATE INDEX IF NOT EXISTS later_things_status ON later_things(status)",
        "CREATE INDEX IF NOT EXISTS records_later_session ON records(bucket, "
        "json_extract(metadata, '$.session')) WHERE kind = 'turn'",
    ]
    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, extra])
    monkeypatch.setattr(schema, "SCHEMA_VERSION", len(schema.MIGRATIONS))
    import retrieval.pg.catalog as catalog_mod

    monkeypatch.setattr(catalog_mod, "SCHEMA_VERSION", schema.SCHEMA_VERSION)
    url = new_pg_database()
    a = Engine(tmp_path / "a", store_url=url)
    b = Engine(tmp_path / "b", store_url=url)
    try:
        assert "later_things" in a.cluster.catalog.tables
        with a.store.transaction() as conn:
            conn.execute(
                "INSERT INTO later_things(id, memory_id, status) VALUES (?,?,?)",
                ("p1", "m1", "open"),
            )
        b.store.catch_up()
        row = b.store.reader.execute("SELECT id, status, n FROM later_things").fetchone()
        assert tuple(row) == ("p1", "open", 0)
    finally:
        a.close()
        b.close()
