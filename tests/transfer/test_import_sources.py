"""The importers of other memory servers, on fixtures built from each source's own schema
(``tests/data/import``, PROVENANCE.md there): every field of the source lands in an item, the
units a source marks as gone are left out with their reason, and a source that cannot be read is
one error that says what was expected and what was found."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ingest.importers import basic_memory, claude_code, claude_mem, mcp_memory_service, mem0
from retrieval.errors import InvalidInput
from server.service.transfers.import_from import read_source

DATA = Path(__file__).parents[1] / "data" / "import"


def by_id(read) -> dict:
    return {i.sourceId: i for i in read.items}


def test_claude_mem_every_column_of_observations_and_summaries():
    read = claude_mem.read(DATA / "claude-mem" / "claude-mem.db")
    items = by_id(read)
    assert sorted(items) == [f"observation:{i}" for i in range(1, 6)] + ["summary:1", "summary:2"]
    o = items["observation:1"]
    assert o.category == "decision" and o.title == "Retry card payments three times"
    assert o.content.splitlines()[:2] == ["Retry card payments three times",
                                          "Payment client retry policy"]  # fmt: skip
    assert "retries a declined-for-timeout card" in o.content
    assert "- Backoff starts at 200 ms" in o.content  # facts
    assert o.tags == ["how-it-works", "trade-off"]  # concepts
    assert o.project == "shop-api" and o.author == "claude"  # the session's platform
    assert o.createdAt == datetime(2024, 6, 1, 12, 0, 1, tzinfo=UTC) == o.updatedAt
    assert o.fields == {
        "table": "observations", "subtitle": "Payment client retry policy", "session": "m-0001",
        "sessionTitle": "Checkout retries", "platform": "claude", "project": "shop-api",
        "promptNumber": 1, "filesRead": ["src/payments/client.py"],
        "filesModified": ["src/payments/retry.py"], "model": "claude-sonnet-4-5",
        "contentHash": o.fields["contentHash"], "discoveryTokens": 5120,
    }  # fmt: skip
    sub = items["observation:2"]  # a sub-agent's observation: the sub-agent is the author
    assert sub.author == "agent-7f3a" and sub.fields["agentType"] == "Explore"
    assert items["observation:3"].fields["metadata"] == {"confidence": "high"}
    assert items["observation:3"].author == "cursor"
    assert items["observation:4"].project == "shop"  # merged_into_project wins
    assert "Legacy text column" in items["observation:5"].content  # the pre-narrative column
    s = items["summary:2"]
    assert s.category == "session-summary"
    assert s.content.splitlines() == [
        "Request: Why is the refund job slow?", "Investigated: The job's query plan",
        "Learned: refunds.order_id has no index", "Completed: Added the index in a migration",
        "Next steps: Measure the job tomorrow night",
        "Notes: Migration 0042 must run before the deploy",
    ]  # fmt: skip
    assert s.fields["filesEdited"] == ["db/migrations/0042.sql"]
    assert items["summary:1"].title == "Checkout retries"  # the session's custom title


def test_mcp_memory_service_reads_without_sqlite_vec_and_keeps_tags_types_edges():
    db = DATA / "mcp-memory-service" / "sqlite_vec.db"
    conn = sqlite3.connect(db)  # the vectors are a vec0 table this Python cannot open
    with pytest.raises(sqlite3.OperationalError, match="vec0"):
        conn.execute("SELECT count(*) FROM memory_embeddings").fetchone()
    conn.close()
    read = mcp_memory_service.read(db)
    assert [why for _, why in read.skipped] == ["deleted in the source", "superseded in the source"]
    first = read.items[0]
    assert first.content.startswith("Use PostgreSQL advisory locks")
    assert first.category == "decision" and first.author == "claude-code"
    assert first.project == "shop-api"
    assert first.tags == ["proj:shop-api", "agent:claude-code", "topic:locking"]
    assert first.createdAt == datetime(2024, 7, 1, 12, tzinfo=UTC)
    assert first.updatedAt == datetime(2024, 7, 1, 12, 1, tzinfo=UTC)
    assert first.fields["metadata"] == {"source": "session", "confidence_note": "agreed in review"}
    assert first.sourceId == f"memory:{first.fields['contentHash']}"
    [edge] = first.fields["relations"]
    assert edge["type"] == "fixes" and edge["connections"] == ["causal"]
    assert first.related == [f"memory:{edge['to']}"]
    err = read.items[2]
    assert err.category == "error" and err.author == "cursor"
    assert err.fields["lastAccessed"] == "2024-07-02T06:00:00+00:00"
    assert read.items[1].fields["confidence"] == 0.9
    assert read.items[3].tags == []  # "untagged" is the service's placeholder, not a tag
    latest = read.items[4]
    assert latest.fields["version"] == 2 and latest.fields["parentId"]


def test_mem0_get_all_keeps_ids_metadata_and_times():
    read = mem0.read(DATA / "mem0" / "get_all.json", now=datetime(2025, 1, 1, tzinfo=UTC))
    assert read.skipped == [("memory:f0b2a4c6-8e1d-4f3a-9b5c-7d9e1f3a5c77",
                             "expired in the source")]  # fmt: skip
    a, b = read.items
    assert a.content == "Dana prefers reviews in the morning and asynchronous questions"
    assert a.author == "review-bot" and a.tags == ["preferences", "work"]
    assert a.category == "preferences"
    assert a.createdAt == datetime(2024, 7, 1, 12, tzinfo=UTC)
    assert a.updatedAt == datetime(2024, 7, 5, 15, 30, tzinfo=UTC)
    assert a.fields == {"user_id": "dana", "agent_id": "review-bot",
                        "hash": "9b2f0e7c4d1a6b3e8f5c2a9d7e0b4c61",
                        "metadata": {"type": "preference", "confidence": 0.8}}  # fmt: skip
    assert b.author == "dana"  # the actor, without an agent
    assert {k: b.fields[k] for k in ("run_id", "actor_id", "role", "app_id")} == {
        "run_id": "run-2024-07-02", "actor_id": "dana", "role": "user", "app_id": "shop-team"
    }  # fmt: skip


def test_openmemory_backup_zip_and_its_jsonl_gz_alone(tmp_path):
    read = mem0.read(DATA / "mem0" / "memories_export_dana.zip")
    assert [why for _, why in read.skipped] == ["deleted in the source"]
    a, b = read.items
    assert a.author == "claude" and a.tags == ["preferences", "work"]
    assert a.fields["user_id"] == "dana"  # the external user id, not the internal uuid
    assert a.fields["metadata"] == {"source_app": "openmemory"}
    assert b.fields["state"] == "archived" and b.fields["archivedAt"].startswith("2024-09-01")
    import zipfile

    with zipfile.ZipFile(DATA / "mem0" / "memories_export_dana.zip") as zf:
        (tmp_path / "memories.jsonl.gz").write_bytes(zf.read("memories.jsonl.gz"))
    lines = mem0.read(tmp_path / "memories.jsonl.gz")
    assert [i.content for i in lines.items] == [a.content, b.content]
    assert [i.tags for i in lines.items] == [a.tags, b.tags]


def test_basic_memory_notes_become_entities_observations_relations_and_text():
    read = basic_memory.read(DATA / "basic-memory")
    ents = {i.name: i for i in read.items if i.kind == "entity"}
    rels = {(i.from_, i.relationType, i.to) for i in read.items if i.kind == "relation"}
    mems = {i.title: i for i in read.items if i.kind == "memory"}
    pr = ents["Payment Retries"]
    assert pr.entityType == "decision"
    assert pr.observations == [
        "[decision] Retry timeouts three times with exponential backoff #payments "
        "(agreed in review)",
        "[constraint] Never retry a declined card #payments",
        "[metric] Timeouts are 0.4% of charges",
    ]  # the checkbox "- [ ] Add a dashboard" is not an observation
    assert pr.createdAt == datetime(2024, 5, 2, 10, tzinfo=UTC)
    assert pr.updatedAt == datetime(2024, 5, 20, 16, 30, tzinfo=UTC)
    assert pr.fields == {"permalink": "payment-retries", "path": "notes/payment-retries.md",
                         "tags": ["payments", "reliability"], "status": "accepted",
                         "owner": "dana"}  # fmt: skip
    assert "[Note] Stock is reserved when checkout starts #inventory" in (
        ents["Checkout Flow"].observations
    )  # a tagged list item without a category
    assert ents["Checkout Flow"].fields["permalink"] == "notes/checkout-flow"
    assert ents["shop-api"].entityType == "note"  # no front matter: title from the file name
    assert rels >= {
        ("Payment Retries", "implements", "Checkout Flow"),
        ("Payment Retries", "decided by", "Dana Ortiz"),  # a quoted relation type
        ("Checkout Flow", "links_to", "Payment Retries"),  # a bare [[link]]
        ("Checkout Flow", "links_to", "Order States"),  # a link in prose, a forward reference
        ("Dana Ortiz", "wrote", "Payment Retries"),  # linked by permalink
    }
    text = mems["Payment Retries"]
    assert text.content.startswith("# Payment Retries\n\nWe retry a card charge")
    assert "[decision]" not in text.content and "Observations" not in text.content
    assert text.tags == ["payments", "reliability"] and text.fields["entity"] == "Payment Retries"
    assert "Dana Ortiz" not in mems  # a note of observations only has no text memory


def test_claude_code_project_files_rules_and_auto_memory():
    project = claude_code.read(DATA / "claude-code" / "project")
    kinds = {(i.fields["level"], i.title) for i in project.items}
    assert kinds == {
        ("project", "shop-api"), ("project", "shop-api > Commands"),
        ("project", "shop-api > Code style"), ("project", "shop-api > Architecture"),
        ("project", "Web client"), ("local", "My sandbox"), ("rules", "Testing rules"),
    }  # fmt: skip
    rules = next(i for i in project.items if i.category == "rules")
    assert rules.fields["paths"] == ["tests/**/*.py"]
    assert any("@docs/architecture.md" in i.content for i in project.items)  # kept as written
    home = claude_code.read(DATA / "claude-code" / "home" / ".claude")
    by_title = {i.title: i for i in home.items}
    assert by_title["Preferences"].fields["level"] == "user"
    assert by_title["Writing style"].fields["level"] == "user-rules"
    fb = by_title["small pull requests"]
    assert fb.category == "feedback" and fb.author == "claude-code"
    assert fb.fields["description"] == "one concern per pull request, with its test"
    assert fb.project == "-home-dev-shop-api"
    assert fb.content.startswith("Keep each pull request to one concern")
    assert {by_title[t].category for t in ("Dana's role", "refund job index",
                                           "latency dashboards", "debugging")} == {
        "user", "project", "reference", "topic"}  # fmt: skip
    index = [i for i in home.items if i.category == "memory-index"]
    assert [i.content for i in index] == ["## shop-api\n- Staging is reset every Sunday night"]
    one = claude_code.read(DATA / "claude-code" / "project" / "CLAUDE.md")
    assert len(one.items) == 4


def test_memory_jsonl_is_read_as_import_graph_reads_it():
    read = read_source("memory-jsonl", DATA / "memory-jsonl" / "memory.jsonl")
    assert [i.kind for i in read.items] == ["entity"] * 3 + ["relation"] * 3
    assert read.items[0].observations == ["Handles carts, checkout and refunds",
                                          "Deployed from main twice a week"]  # fmt: skip


# ---------------------------------------------------------------------- unreadable sources
def _damaged_db(tmp_path: Path) -> Path:
    bad = tmp_path / "bad.db"
    data = bytearray((DATA / "claude-mem" / "claude-mem.db").read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # the schema page
    bad.write_bytes(bytes(data))
    return bad


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


@pytest.mark.parametrize(
    "source,make,found",
    [
        ("claude-mem", lambda t: _write(t, "x.db", b"not a database at all"),
         "a file starting with b'not a databa'"),
        ("claude-mem", _damaged_db, "a damaged SQLite file"),
        ("claude-mem", lambda t: shutil.copy(DATA / "mcp-memory-service" / "sqlite_vec.db",
                                             t / "v.db") and t / "v.db",
         "an SQLite database without a observations table"),
        ("mcp-memory-service", lambda t: shutil.copy(DATA / "claude-mem" / "claude-mem.db",
                                                     t / "c.db") and t / "c.db",
         "an SQLite database without a memories table"),
        ("mcp-memory-service", lambda t: t / "missing.db", "nothing at that path"),
        ("mem0", lambda t: _write(t, "m.json", b'{"memories": 3}'),
         "JSON without a results or memories list"),
        ("mem0", lambda t: _write(t, "m.json", b'{"results": [1, 2]}'),
         "memory #0 is not a JSON object"),
        ("mem0", lambda t: _write(t, "m.jsonl.gz", gzip.compress(b'{"id": 1}\n{oops\n')),
         "line 2 is not JSON"),
        ("mem0", lambda t: _write(t, "m.zip", b"PK\x03\x04 truncated"), "text that is not JSON"),
        ("basic-memory", lambda t: _write(t, "notes.txt", b"hello"), "a file starting with"),
        ("basic-memory", lambda t: (t / "empty").mkdir() or t / "empty",
         "a folder without Markdown notes"),
        ("claude-code", lambda t: (t / "proj").mkdir() or t / "proj", "a folder (empty)"),
        ("memory-jsonl", lambda t: _write(t, "memory.jsonl", b'{"type":"entity"}\n{bad'),
         "line 2 is not valid JSON"),
    ],
)  # fmt: skip
def test_a_source_that_cannot_be_read_is_one_clear_error(tmp_path, source, make, found):
    path = make(tmp_path)
    with pytest.raises(InvalidInput) as err:
        read_source(source, path)
    message = err.value.message
    assert message.startswith(f"cannot import {path} as {source}: expected ")
    assert "; found " in message and found in message, message
    assert "\n" not in message
    assert err.value.data["expected"] and err.value.data["found"]


def test_a_note_with_broken_front_matter_is_skipped_not_fatal(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "good.md").write_text("# Good\n\n- [fact] fine\n", encoding="utf-8")
    (folder / "bad.md").write_text("---\ntitle: [unclosed\n---\n# Bad\n", encoding="utf-8")
    read = basic_memory.read(folder)
    assert [i.name for i in read.items if i.kind == "entity"] == ["good"]
    assert read.skipped[0][0] == "note:bad.md" and "YAML" in read.skipped[0][1]


def test_an_unknown_source_names_the_known_ones():
    with pytest.raises(InvalidInput, match="unknown source 'zep': use one of claude-mem"):
        read_source("zep", DATA)
    assert json.dumps(read_source("openmemory", DATA / "mem0" / "get_all.json").items[0].kind)


def test_claude_code_front_matter_written_by_a_model_need_not_be_valid_yaml(tmp_path):
    mem = tmp_path / "memory"
    mem.mkdir()
    (mem / "project_deploys.md").write_text(
        "---\nname: deploys\ndescription: rule: deploy on Tuesdays\ntype: project\n---\n\n"
        "Deploys go out on Tuesdays.\n",
        encoding="utf-8",
    )
    [item] = claude_code.read(mem).items
    assert item.fields["description"] == "rule: deploy on Tuesdays"
    assert item.category == "project" and item.title == "deploys"
