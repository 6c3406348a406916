"""``import-from``: each source's items written through the service (real SQLite, the hashing
embedder): every field lands on the record, a second run is a no-op, an interrupted run resumes,
secrets under ``block`` are refused and counted, ``--dry-run`` writes nothing; the same through
the CLI, and through a daemon that owns the store; ``export-to basic-memory`` and back."""

from __future__ import annotations

import json
import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.records import Kind, RecordFilter
from server.cli import main
from server.service.core.identity import Identity
from server.service.graphs.graph_services import graph_services
from server.service.memories.memory import MemoryService
from server.service.transfers import import_write
from server.service.transfers.export_to import export_basic_memory
from server.service.transfers.import_write import import_source, record_id
from server.service.trust.policy import WritePolicy
from server.service.trust.secret_scan.secrets import SecretPolicy

DATA = Path(__file__).parents[1] / "data" / "import"
ME = Identity(project_id="proj", agent_id="agent")
SECRET = "gh" + "p_" + "Xq7Lm2Vt9RkP4sWz8NbC3dF6gH1jK5yTnQ0a"
SOURCES = {
    "claude-mem": DATA / "claude-mem" / "claude-mem.db",
    "mcp-memory-service": DATA / "mcp-memory-service" / "sqlite_vec.db",
    "mem0": DATA / "mem0" / "get_all.json",
    "basic-memory": DATA / "basic-memory",
    "memory-jsonl": DATA / "memory-jsonl" / "memory.jsonl",
    "claude-code": DATA / "claude-code" / "home" / ".claude",
}


@pytest.fixture
def store(tmp_path):
    """Factory: (service, graphs) over a fresh store, with a write policy."""
    opened = []

    def make(policy: WritePolicy | None = None, name: str = "store"):
        svc = MemoryService(Engine(tmp_path / name, HashEmbedder()), policy=policy)
        opened.append(svc)
        return svc, graph_services(svc)

    yield make
    for svc in opened:
        svc.engine.close()


def memories(svc, who=ME, scope="team") -> dict:
    recs = svc.store.list(RecordFilter(buckets=[who.bucket(scope)], kinds=[Kind.memory]))
    return {r.metadata["sourceId"]: r for r in recs}


def counts(svc) -> dict:
    conn = svc.store.reader
    return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("records", "entities", "relations", "changes")}  # fmt: skip


# ---------------------------------------------------------------------- fields
def test_claude_mem_fields_land_on_the_record(store):
    svc, graphs = store()
    res = import_source(svc, graphs, ME, "claude-mem", SOURCES["claude-mem"])
    assert res.created == {"memory": 7} and not res.skipped
    assert res.categories == {"team/decisions": 1, "team/learnings": 5, "team/architecture": 1}
    rec = memories(svc)["observation:1"]
    assert rec.id == record_id("claude-mem", "observation:1", ME.bucket("team"))
    assert (rec.scope.value, rec.category, rec.agent_id) == ("team", "decisions", "agent")
    assert rec.created_at == rec.updated_at == datetime(2024, 6, 1, 12, 0, 1, tzinfo=UTC)
    meta = rec.metadata
    assert meta["source"] == "imported from claude-mem, id observation:1"
    assert meta["importedFrom"] == "claude-mem" and meta["sourceKind"] == "decision"
    assert meta["title"] == "Retry card payments three times"
    assert meta["tags"] == ["how-it-works", "trade-off"]
    assert meta["author"] == "claude" and meta["sourceProject"] == "shop-api"
    assert meta["sourceFields"]["filesModified"] == ["src/payments/retry.py"]
    assert meta["sourceFields"]["session"] == "m-0001"
    assert memories(svc)["observation:4"].category == "architecture"  # a refactor
    assert memories(svc)["summary:1"].category == "learnings"


def test_mcp_memory_service_edges_become_related_to(store):
    svc, graphs = store()
    res = import_source(svc, graphs, ME, "mcp-memory-service", SOURCES["mcp-memory-service"])
    assert res.created == {"memory": 5}
    assert res.skipped == {"deleted in the source": 1, "superseded in the source": 1}
    recs = memories(svc)
    first = next(r for r in recs.values() if r.content.startswith("Use PostgreSQL"))
    target = next(r for r in recs.values() if r.content.startswith("The refund job timed out"))
    assert first.metadata["relatedTo"] == [target.id]  # a link to the imported record
    assert first.metadata["sourceFields"]["relations"][0]["type"] == "fixes"
    assert first.metadata["author"] == "claude-code" and first.category == "decisions"
    assert first.updated_at == datetime(2024, 7, 1, 12, 1, tzinfo=UTC)


def test_personal_and_private_scopes_use_longterm(store):
    svc, graphs = store()
    res = import_source(svc, graphs, ME, "mem0", SOURCES["mem0"], "personal")
    assert res.categories == {"personal/longterm": 2}
    rec = memories(svc, scope="personal")["memory:3c5e9f7a-2b41-4d8e-9c1a-7f0e2d4b6a81"]
    assert rec.expires_at is None and rec.metadata["author"] == "review-bot"
    assert rec.metadata["sourceFields"]["user_id"] == "dana"


def test_basic_memory_graph_keeps_note_dates_and_provenance(store):
    svc, graphs = store()
    res = import_source(svc, graphs, ME, "basic-memory", SOURCES["basic-memory"])
    assert res.created == {"memory": 3, "entity": 4, "observation": 10, "relation": 7}
    assert res.skipped == {} and res.pending == 2  # links to notes that are not in the folder
    graph = graphs.graph.read_graph(ME, "team")
    names = {e.name for e in graph.entities}
    assert names == {"Payment Retries", "Checkout Flow", "Dana Ortiz", "shop-api"}
    obs = svc.store.list(RecordFilter(buckets=[ME.bucket("team")], kinds=[Kind.observation]))
    retry = next(o for o in obs if o.content.startswith("[constraint] Never retry"))
    assert retry.entity_name == "Payment Retries"
    assert retry.created_at == datetime(2024, 5, 2, 10, tzinfo=UTC)  # the note's date
    assert retry.metadata["source"] == "imported from basic-memory, id note:payment-retries"
    assert retry.metadata["sourceFields"]["status"] == "accepted"
    text = memories(svc)["note:payment-retries:text"]
    assert text.category == "decisions" and text.metadata["tags"] == ["payments", "reliability"]


# ---------------------------------------------------------------------- repeat, resume
@pytest.mark.parametrize("source", list(SOURCES))
def test_a_second_run_is_a_no_op(store, source):
    svc, graphs = store()
    first = import_source(svc, graphs, ME, source, SOURCES[source])
    assert first.imported > 0
    before = counts(svc)
    again = import_source(svc, graphs, ME, source, SOURCES[source])
    assert again.created == {} and again.imported == 0
    assert again.alreadyImported == first.read - sum(first.skipped.values()) - first.pending
    assert again.pending == first.pending  # still waiting for their entity
    assert again.skipped == first.skipped  # the same reasons, nothing new
    assert counts(svc) == before  # not a row, not a change-log entry


def test_dry_run_writes_nothing_and_reports_what_the_run_does(store):
    svc, graphs = store()
    before = counts(svc)
    dry = import_source(svc, graphs, ME, "basic-memory", SOURCES["basic-memory"], dry_run=True)
    assert counts(svc) == before
    real = import_source(svc, graphs, ME, "basic-memory", SOURCES["basic-memory"])
    for key in ("created", "byKind", "categories", "skipped", "alreadyImported", "pending"):
        assert getattr(dry, key) == getattr(real, key), key
    assert dry.dryRun and set(dry.samples) == set(dry.byKind)
    assert dry.samples["relation"] == "shop-api -links_to-> Checkout Flow"


def test_an_interrupted_run_resumes(store, monkeypatch):
    svc, graphs = store()
    monkeypatch.setattr(import_write, "BATCH", 2)
    calls = {"n": 0}
    real_apply = svc.engine.apply

    def crash_on_third(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt  # Ctrl-C (or a crash) in the middle of the run
        return real_apply(*args, **kwargs)

    monkeypatch.setattr(svc.engine, "apply", crash_on_third)
    with pytest.raises(KeyboardInterrupt):
        import_source(svc, graphs, ME, "claude-mem", SOURCES["claude-mem"])
    assert len(memories(svc)) == 4  # two batches committed, the third rolled back
    monkeypatch.setattr(svc.engine, "apply", real_apply)
    res = import_source(svc, graphs, ME, "claude-mem", SOURCES["claude-mem"])
    assert res.alreadyImported == 4 and res.created == {"memory": 3}
    assert len(memories(svc)) == 7


def test_a_stop_request_ends_the_run_after_the_batch_in_flight(store, monkeypatch):
    import threading

    svc, graphs = store()
    monkeypatch.setattr(import_write, "BATCH", 3)
    stop = threading.Event()
    res = import_source(svc, graphs, ME, "claude-mem", SOURCES["claude-mem"],
                        progress=lambda p: stop.set() if p.chunks >= 3 else None,
                        stop=stop)  # fmt: skip
    assert res.interrupted and res.created == {"memory": 3}
    rest = import_source(svc, graphs, ME, "claude-mem", SOURCES["claude-mem"])
    assert not rest.interrupted and rest.created == {"memory": 4} and rest.alreadyImported == 3


# ---------------------------------------------------------------------- the write policy
def _with_secret(tmp_path: Path) -> tuple[Path, Path]:
    db = tmp_path / "claude-mem.db"
    shutil.copy(SOURCES["claude-mem"], db)
    conn = sqlite3.connect(db)
    for n in (1, 2):
        conn.execute(
            "INSERT INTO observations(memory_session_id, project, type, title, narrative, "
            "created_at, created_at_epoch, content_hash) VALUES (?,?,?,?,?,?,?,?)",
            ("m-0001", "shop-api", "discovery", f"Deploy token {n}",
             f"The deploy job authenticates with {SECRET} (rotate it)", "2024-06-02T00:00:00Z",
             1_717_286_400_000 + n, f"secret-{n}"),
        )  # fmt: skip
    conn.commit()
    conn.close()
    notes = tmp_path / "notes"
    shutil.copytree(SOURCES["basic-memory"], notes)
    with open(notes / "shop-api.md", "a", encoding="utf-8") as fh:
        fh.write(f"- [secret] the staging token is {SECRET}\n")
    return db, notes


def test_secrets_under_block_are_refused_and_counted(store, tmp_path):
    db, notes = _with_secret(tmp_path)
    svc, graphs = store(WritePolicy(secrets=SecretPolicy.block))
    res = import_source(svc, graphs, ME, "claude-mem", db)
    assert res.skipped == {"secret (PATTERN_SECRET_POLICY=block)": 2}
    assert res.created == {"memory": 7}
    graph = import_source(svc, graphs, ME, "basic-memory", notes)
    assert graph.skipped["secret (PATTERN_SECRET_POLICY=block)"] == 1  # the entity "shop-api"
    assert graph.created["entity"] == 3
    rows = svc.store.reader.execute("SELECT content, metadata FROM records").fetchall()
    assert not any(SECRET in r[0] or SECRET in r[1] for r in rows)


def test_secrets_under_redact_are_stored_redacted_with_a_warning(store, tmp_path):
    db, _ = _with_secret(tmp_path)
    svc, graphs = store(WritePolicy(secrets=SecretPolicy.redact))
    res = import_source(svc, graphs, ME, "claude-mem", db)
    assert res.created == {"memory": 9} and res.warningCount >= 2
    rec = next(r for r in memories(svc).values() if "Deploy token 1" in r.content)
    assert SECRET not in rec.content and "[REDACTED:" in rec.content


@pytest.mark.parametrize("policy", [SecretPolicy.warn, None])
def test_an_import_stores_secrets_redacted_whatever_the_store_policy(store, tmp_path, policy):
    """Nobody reads an import item by item: under warn (the default) or with the secret scan
    off, a secret is stored redacted, in the memories and the graph alike, and the report
    tells the person who ran it."""
    db, notes = _with_secret(tmp_path)
    svc, graphs = store(WritePolicy(secrets=policy))
    res = import_source(svc, graphs, ME, "claude-mem", db)
    graph = import_source(svc, graphs, ME, "basic-memory", notes)
    assert res.created == {"memory": 9} and graph.created["entity"] == 4
    assert res.warningCount >= 2 and any("observation:" in w for w in res.warnings)
    rows = svc.store.reader.execute("SELECT content, metadata FROM records").fetchall()
    assert not any(SECRET in r[0] or SECRET in r[1] for r in rows)
    assert sum("[REDACTED:" in r[0] for r in rows) >= 3  # two memories, one observation
    assert svc.policy.secret_policy is policy  # after the import: the store's own policy again


def test_too_long_empty_and_duplicate_items_are_skipped_with_their_reason(store, tmp_path):
    big = "word " * 7000
    doc = {"results": [
        {"id": "a", "memory": big, "created_at": "2024-01-01T00:00:00Z"},
        {"id": "b", "memory": "Releases go out on Tuesdays", "created_at": "2024-01-01T00:00:00Z"},
        {"id": "c", "memory": "Releases go out on Tuesdays", "created_at": "2024-01-02T00:00:00Z"},
        {"id": "d", "memory": "   "},
    ]}  # fmt: skip
    path = tmp_path / "mem0.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    svc, graphs = store()
    res = import_source(svc, graphs, ME, "mem0", path)
    assert res.created == {"memory": 1}
    assert res.skipped == {"too long": 1, "duplicate": 1, "no text in the source": 1}
    assert any("35000 bytes" in s for s in res.skippedItems)


def test_source_project_keeps_one_project_of_a_shared_database(store):
    svc, graphs = store()
    res = import_source(svc, graphs, ME, "claude-mem", SOURCES["claude-mem"],
                        source_project="shop-api")  # fmt: skip
    assert res.created == {"memory": 5} and res.filtered == 2  # blog, and the merged "shop"


# ---------------------------------------------------------------------- export, and back
def test_export_to_basic_memory_and_back(store, tmp_path):
    svc, graphs = store()
    import_source(svc, graphs, ME, "basic-memory", SOURCES["basic-memory"])
    import_source(svc, graphs, ME, "claude-mem", SOURCES["claude-mem"])
    out = export_basic_memory(svc, graphs, ME, tmp_path / "out")
    assert (out.entities, out.relations, out.memories) == (4, 7, 10)
    assert out.notes == 4 + 7  # a note per entity (their texts inside), one per other memory
    note = (tmp_path / "out" / "notes" / "payment-retries.md").read_text(encoding="utf-8")
    assert "type: decision" in note and "- implements [[Checkout Flow]]" in note
    assert '- "decided by" [[Dana Ortiz]]' in note and "We retry a card charge" in note
    assert "- [constraint] Never retry a declined card #payments" in note
    svc2, graphs2 = store(name="other")
    again = import_source(svc2, graphs2, ME, "basic-memory", tmp_path / "out")
    g1, g2 = graphs.graph.read_graph(ME, "team"), graphs2.graph.read_graph(ME, "team")
    assert {(e.name, e.entityType, tuple(sorted(e.observations))) for e in g2.entities} >= {
        (e.name, e.entityType, tuple(sorted(e.observations))) for e in g1.entities
    }
    assert {r.key() for r in g1.relations} <= {r.key() for r in g2.relations}
    texts = {r.content for r in memories(svc2).values()}
    assert any("Retry card payments three times" in t for t in texts)
    assert again.skippedItems == [] and again.pending == 2  # the forward references kept


# ---------------------------------------------------------------------- the command
@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    for key, value in {"PATTERN_HOME": str(tmp_path / "home"), "PATTERN_EMBEDDER": "hash",
                       "PATTERN_PROJECT_ID": "proj", "PATTERN_AGENT_ID": "agent"}.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("PATTERN_SECRET_POLICY", raising=False)

    def run(*argv: str, code: int = 0) -> tuple[str, str]:
        capsys.readouterr()
        assert main(list(argv)) == code
        out = capsys.readouterr()
        return out.out, out.err

    return run


def test_cli_imports_reports_and_repeats_as_a_no_op(cli):
    out, err = cli("import-from", "claude-mem", str(SOURCES["claude-mem"]), "--dry-run")
    assert "dry run: nothing was written" in out and "would create: 7 memories" in out
    assert "decision" in out and "e.g. Retry card payments" in out
    out, err = cli("import-from", "claude-mem", str(SOURCES["claude-mem"]), "--json")
    res = json.loads(out)
    assert res["created"] == {"memory": 7} and res["path"] == str(SOURCES["claude-mem"])
    out, err = cli("import-from", "claude-mem", str(SOURCES["claude-mem"]))
    assert "created: nothing" in out and "already imported: 7" in out
    assert "import: 7/7 items" in err  # the progress line


def test_cli_a_damaged_source_is_one_line(cli, tmp_path):
    bad = tmp_path / "claude-mem.db"
    bad.write_bytes(b"\x00" * 64)
    out, err = cli("import-from", "claude-mem", str(bad), code=2)
    assert out == "" and err.count("\n") == 1
    assert err.startswith(f"error [invalid_input]: cannot import {bad} as claude-mem: expected ")
    assert "found a file starting with" in err


def test_cli_export_to_basic_memory(cli, tmp_path):
    cli("import-from", "memory-jsonl", str(SOURCES["memory-jsonl"]))
    out, _ = cli("export-to", "basic-memory", str(tmp_path / "notes"))
    assert json.loads(out)["entities"] == 3
    assert "- leads [[shop_api]]" in (tmp_path / "notes" / "dana-ortiz.md").read_text()


# ---------------------------------------------------------------------- through a daemon
def test_cli_under_a_daemon_sends_the_items_to_it(tmp_path, monkeypatch, capsys):
    """The CLI reads the source itself (a path the daemon's allowed folders would refuse) and
    the daemon writes the items, as this shell's agent; a second run writes nothing."""
    from tests.runtime.test_daemon import start_daemon, stop

    home = tmp_path / "home"
    home.mkdir()
    proc = start_daemon(home)
    try:
        for k, v in {"PATTERN_HOME": str(home), "PATTERN_EMBEDDER": "hash",
                     "PATTERN_PROJECT_ID": "p1", "PATTERN_AGENT_ID": "shell"}.items():  # fmt: skip
            monkeypatch.setenv(k, v)
        monkeypatch.delenv("PATTERN_ALLOWED_DIRS", raising=False)
        monkeypatch.chdir(tmp_path)
        monkeypatch.setattr("server.cli.migrate_commands.DAEMON_BATCH", 5)  # several batches
        capsys.readouterr()
        assert main(["import-from", "basic-memory", str(SOURCES["basic-memory"]), "--json",
                     "--dry-run"]) == 0  # fmt: skip
        dry = json.loads(capsys.readouterr().out)
        assert main(["import-from", "basic-memory", str(SOURCES["basic-memory"]), "--json"]) == 0
        res = json.loads(capsys.readouterr().out)
        assert res["created"] == {"memory": 3, "entity": 4, "observation": 10, "relation": 7}
        assert dry["created"] == res["created"] and dry["dryRun"]
        assert main(["import-from", "basic-memory", str(SOURCES["basic-memory"]), "--json"]) == 0
        again = json.loads(capsys.readouterr().out)
        assert again["created"] == {} and again["alreadyImported"] == 14
        with sqlite3.connect(f"file:{home / 'pattern.sqlite3'}?mode=ro", uri=True) as conn:
            agents = conn.execute(
                "SELECT DISTINCT agent_id, project_id FROM records WHERE kind='memory'"
            ).fetchall()
        assert agents == [("shell", "p1")]
    finally:
        stop(proc)
