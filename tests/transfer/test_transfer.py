"""export-memories / import-memories: round trip, duplicates, invalid files, allowed directories."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest

from retrieval.records import RecordFilter
from server.service.core.errors import AccessDenied, InvalidInput
from server.service.core.identity import Identity
from server.service.core.models import MemoryInput, MemoryMetadata
from server.service.transfers import transfer
from tests.mcp_util import FakeClock, clocked_service, write_json

ME = Identity(project_id="proj", agent_id="agent-a")
ROUND_TRIP_FIELDS = ("id", "scope", "category", "content", "metadata", "createdAt", "updatedAt",
                     "expiresAt", "revision")  # fmt: skip


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def dirs(tmp_path):
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    allowed.mkdir()
    outside.mkdir()
    return allowed, outside


@pytest.fixture
def open_service(tmp_path, clock):
    """Factory: a fresh store (``name``) per call, closed at teardown."""
    opened = []

    def _open(name: str = "store"):
        svc = clocked_service(tmp_path / name, clock)
        opened.append(svc)
        return svc

    yield _open
    for svc in opened:
        svc.engine.close()


@pytest.fixture
def svc(open_service):
    return open_service("store")


def export(svc, allowed, name="backup.json", who=ME, **kw) -> dict:
    kw.setdefault("force", True)  # one file exported again and again (each kept as a backup)
    res = transfer.export_memories(svc, who, [allowed], output_path=name, **kw)
    doc = json.loads(Path(res.filepath).read_text(encoding="utf-8"))
    assert res.exported == doc["count"] == len(doc["memories"])
    assert res.bytes == Path(res.filepath).stat().st_size
    return doc


def do_import(svc, allowed, path, who=ME, **kw):
    return transfer.import_memories(svc, who, [allowed], input_path=str(path), **kw)


def all_records(svc) -> dict:
    return {r.id: r for r in svc.store.list(RecordFilter(include_expired=True))}


def memory(mid: str, **kw) -> dict:
    base = {"id": mid, "agentId": "x", "projectId": "y", "scope": "private", "category": "longterm",
            "content": f"memory {mid}", "metadata": {}, "createdAt": "2030-01-01T00:00:00Z",
            "updatedAt": "2030-01-01T00:00:00Z"}  # fmt: skip
    return {**base, **kw}


def uid(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


def populate(svc, clock) -> list[str]:
    meta = MemoryMetadata(tags=["api", "billing"], priority=1, source="design review",
                          relatedTo=["doc-7"], reviewer="sam")  # fmt: skip
    ids = [
        svc.remember(ME, MemoryInput(content="The billing API uses REST", metadata=meta)).memoryId,
        svc.core_memory(ME, "I prefer small, reviewed commits").memoryId,
        svc.remember(
            ME, MemoryInput(content="We chose Postgres", scope="team", category="decisions")
        ).memoryId,
        svc.remember(
            ME, MemoryInput(content="PEP 8 everywhere", scope="public", category="architecture")
        ).memoryId,
        svc.remember_task(ME, "Fix the login bug").memoryId,
        svc.remember_learning(ME, "pgvector needs an ivfflat index").memoryId,
    ]
    clock.advance(hours=2)
    insight = svc.remember_task(ME, "retry with jitter").memoryId
    clock.advance(hours=3)
    svc.commit_insight(ME, insight, "Retries use exponential backoff with jitter")
    return [*ids, insight]


# ---------------------------------------------------------------------------- round trip
def test_export_import_round_trips_every_field(svc, open_service, clock, dirs):
    allowed, _ = dirs
    ids = populate(svc, clock)
    doc = export(svc, allowed)
    assert (doc["format"], doc["version"], doc["agentId"], doc["projectId"]) == (
        "pattern-memory", 1, ME.agent_id, ME.project_id)  # fmt: skip
    assert [m["id"] for m in doc["memories"]] == ids  # oldest first
    by_id = {m["id"]: m for m in doc["memories"]}
    assert by_id[ids[0]]["metadata"] == {"tags": ["api", "billing"], "priority": 1,
                                         "source": "design review", "relatedTo": ["doc-7"],
                                         "reviewer": "sam"}  # fmt: skip
    assert by_id[ids[4]]["expiresAt"] is not None and by_id[ids[6]]["revision"] == 2
    assert by_id[ids[6]]["updatedAt"] != by_id[ids[6]]["createdAt"]

    fresh = open_service("fresh")
    res = do_import(fresh, allowed, allowed / "backup.json")
    assert (res.imported, res.skipped, res.errors) == (7, 0, [])
    again = export(fresh, allowed, "again.json")
    assert again["memories"] == doc["memories"]  # every field, byte for byte
    before, after = all_records(svc), all_records(fresh)
    for mid in ids:
        a, b = before[mid], after[mid]
        assert (a.scope, a.category, a.content, a.metadata, a.created_at, a.updated_at,
                a.expires_at, a.revision, a.agent_id, a.project_id) == (
                b.scope, b.category, b.content, b.metadata, b.created_at, b.updated_at,
                b.expires_at, b.revision, b.agent_id, b.project_id)  # fmt: skip
    # searchable after import
    from server.service.core.models import RecallInput
    from server.service.recalling.recall import recall

    hits = recall(fresh, ME, RecallInput(query="exponential backoff jitter")).items
    assert hits[0].id == ids[6]


def test_imported_memories_belong_to_the_importer(svc, open_service, clock, dirs):
    allowed, _ = dirs
    populate(svc, clock)
    doc = export(svc, allowed)
    other = Identity(project_id="other-proj", agent_id="agent-b")
    fresh = open_service("fresh")
    assert do_import(fresh, allowed, allowed / "backup.json", who=other).imported == 7
    mine = export(fresh, allowed, "b.json", who=other)
    assert {(m["agentId"], m["projectId"]) for m in mine["memories"]} == {("agent-b", "other-proj")}
    strip = lambda ms: [{k: m[k] for k in ROUND_TRIP_FIELDS} for m in ms]  # noqa: E731
    assert strip(mine["memories"]) == strip(doc["memories"])
    # A (another project) sees only B's public memory
    assert [m["scope"] for m in export(fresh, allowed, "a.json")["memories"]] == ["public"]


def test_export_filters_and_expired(svc, clock, dirs):
    allowed, _ = dirs
    ids = populate(svc, clock)
    assert {m["id"] for m in export(svc, allowed, scope="team")["memories"]} == {ids[2]}
    assert {m["id"] for m in export(svc, allowed, category="core")["memories"]} == {ids[1]}
    since = clock.now - timedelta(hours=1)
    assert {m["id"] for m in export(svc, allowed, since=since)["memories"]} == {ids[6]}
    clock.advance(hours=25)
    live = {m["id"] for m in export(svc, allowed)["memories"]}
    assert live == set(ids) - {ids[4], ids[5]}
    assert {m["id"] for m in export(svc, allowed, include_expired=True)["memories"]} == set(ids)
    with pytest.raises(InvalidInput, match="invalid scope"):
        transfer.export_memories(svc, ME, [allowed], output_path="x.json", scope="galaxy")


def test_default_export_name_is_timestamped_inside_the_first_allowed_dir(svc, clock, dirs):
    allowed, _ = dirs
    svc.remember(ME, MemoryInput(content="one"))
    res = transfer.export_memories(svc, ME, [allowed])
    assert Path(res.filepath) == allowed / "memories-backup-20300301T120000Z.json"
    assert res.exported == 1
    assert [p.name for p in allowed.iterdir()] == [Path(res.filepath).name]  # no temp file left


# ---------------------------------------------------------------------------- duplicates
def test_duplicate_ids_are_reported_and_skipped_without_overwrite(svc, clock, dirs):
    allowed, _ = dirs
    ids = populate(svc, clock)
    doc = export(svc, allowed)
    for m in doc["memories"]:
        m["content"] = "changed: " + m["content"]
    path = write_json(allowed / "changed.json", doc)
    before = all_records(svc)
    res = do_import(svc, allowed, path)
    assert (res.imported, res.skipped) == (0, 7)
    assert res.errors == [
        f"Memory {i} already exists (use overwriteExisting to replace)" for i in ids
    ]
    assert all_records(svc) == before
    res = do_import(svc, allowed, path, overwrite_existing=True)
    assert (res.imported, res.skipped, res.errors) == (7, 0, [])
    assert all(r.content.startswith("changed: ") for r in all_records(svc).values())


def test_overwrite_never_takes_another_agents_memory(svc, clock, dirs):
    allowed, _ = dirs
    b = Identity(project_id="proj", agent_id="agent-b")
    theirs = svc.remember(
        b, MemoryInput(content="B's team decision", scope="team", category="decisions")
    )
    path = write_json(allowed / "steal.json", {"version": 1, "memories": [
        memory(theirs.memoryId, scope="team", category="decisions", content="hijacked")]})  # fmt: skip
    res = do_import(svc, allowed, path, overwrite_existing=True)
    assert res.imported == 0 and "belongs to another agent" in res.errors[0]
    assert all_records(svc)[theirs.memoryId].content == "B's team decision"


def test_the_same_id_twice_in_one_file(svc, dirs):
    allowed, _ = dirs
    path = write_json(
        allowed / "twice.json", {"version": 1, "memories": [memory(uid(1)), memory(uid(1))]}
    )
    res = do_import(svc, allowed, path)
    assert (res.imported, res.skipped) == (1, 1) and "appears twice" in res.errors[0]


# ---------------------------------------------------------------------------- invalid files
def test_skip_invalid_false_stops_and_imports_nothing(svc, dirs):
    allowed, _ = dirs
    path = write_json(allowed / "mixed.json", {"version": 1, "memories": [
        memory(uid(1)),
        memory(uid(2), scope="team", category="core"),
        memory(uid(3)),
    ]})  # fmt: skip
    with pytest.raises(InvalidInput, match="stopped at entry 1") as err:
        do_import(svc, allowed, path, skip_invalid=False)
    assert "nothing was imported" in err.value.message and uid(2) in err.value.message
    assert all_records(svc) == {}
    res = do_import(svc, allowed, path)  # skipInvalid defaults to true
    assert (res.imported, res.skipped) == (2, 1)
    assert set(all_records(svc)) == {uid(1), uid(3)}


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            memory(uid(5), scope="team", category="core"),
            "category 'core' is not allowed in scope 'team'",
        ),
        (
            memory(uid(5), scope="private", category="decisions"),
            "category 'decisions' is not allowed in scope 'private'",
        ),
        (memory(uid(5), scope="galaxy"), "Invalid memory structure"),
        ({k: v for k, v in memory(uid(5)).items() if k != "content"}, "content: Field required"),
        (memory(uid(5), content="x" * (32 * 1024 + 1)), "32 KB"),
        (
            memory(uid(5), metadata={"tags": ["t"] * 3 + [f"t{i}" for i in range(11)]}),
            "at most 10 tags",
        ),
        (memory(uid(5), metadata={"priority": 7}), "priority must be 1, 2 or 3"),
        (memory(uid(5), kind="chunk"), "kind 'chunk'"),
    ],
    ids=[
        "team-core",
        "private-decisions",
        "bad-scope",
        "no-content",
        "too-big",
        "tags",
        "priority",
        "kind",
    ],
)
def test_invalid_entries_are_reported_with_their_id(svc, dirs, entry, message):
    allowed, _ = dirs
    path = write_json(allowed / "bad.json", {"version": 1, "memories": [entry, memory(uid(6))]})
    res = do_import(svc, allowed, path)
    assert (res.imported, res.skipped) == (1, 1)
    assert len(res.errors) == 1 and message in res.errors[0]
    assert uid(5) in res.errors[0], f"the error does not say which memory: {res.errors[0]!r}"
    assert set(all_records(svc)) == {uid(6)}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"version": 1, "memories": [', "not a valid JSON export"),
        ("memories,version\n1,2\n", "not a valid JSON export"),
        (b"\xff\xfe\x00garbage", "not a valid JSON export"),
        ('{"version": 2, "memories": []}', "unsupported export version 2"),
        ('{"version": "0.9", "memories": []}', "unsupported export version '0.9'"),
        ('{"memories": []}', "unsupported export version None"),
        ('{"version": 1, "memories": {"a": 1}}', "no 'memories' list"),
        ("[1, 2, 3]", "no 'memories' list"),
        ('{"version": [1], "memories": []}', "unsupported export version [1]"),
    ],
    ids=[
        "truncated",
        "csv",
        "binary",
        "version-2",
        "version-0.9",
        "no-version",
        "memories-dict",
        "list",
        "version-list",
    ],  # fmt: skip
)
def test_unreadable_files_are_rejected_clearly_and_import_nothing(svc, dirs, content, message):
    allowed, _ = dirs
    path = allowed / "broken.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(InvalidInput, match=re.escape(message)) as err:
        do_import(svc, allowed, path)
    assert str(path) in err.value.message
    assert all_records(svc) == {}


def test_entries_that_are_not_memories_are_reported(svc, dirs):
    allowed, _ = dirs
    path = write_json(allowed / "odd.json", {"version": 1, "memories": [
        7, "text", None, memory(5), memory(uid(6))]})  # fmt: skip
    res = do_import(svc, allowed, path)
    assert (res.imported, res.skipped) == (1, 4)
    assert [e.split(" (")[0] for e in res.errors] == [
        "Invalid memory structure: #0", "Invalid memory structure: #1",
        "Invalid memory structure: #2", "Invalid memory structure: #3",
    ]  # fmt: skip
    assert set(all_records(svc)) == {uid(6)}


def test_an_id_that_is_not_a_uuid_is_refused_and_never_stored_or_echoed(tmp_path, clock, dirs):
    """An imported id is stored and indexed as it is: one that is not a UUID (a pasted token,
    a path) is refused by its position, and no file of the store holds it."""
    allowed, _ = dirs
    token = "gh" + "p_" + "Xq7Lm2Vt9RkP4sWz8NbC3dF6gH1jK5yTnQ0a"
    svc = clocked_service(tmp_path / "ids", clock)
    path = write_json(allowed / "ids.json", {"version": 1, "memories": [
        memory(token), memory("../../etc/passwd"), memory(uid(1).upper()), memory(uid(2))]})  # fmt: skip
    res = do_import(svc, allowed, path)
    assert res.imported == 2 and len(res.errors) == 2
    assert all(e.startswith(("Invalid memory structure: #0", "Invalid memory structure: #1"))
               for e in res.errors)  # fmt: skip
    assert not any(token in e or "passwd" in e for e in res.errors)
    svc.engine.close()
    held = [p for p in (tmp_path / "ids").rglob("*") if p.is_file() and token.encode() in
            p.read_bytes()]  # fmt: skip
    assert held == []


def test_pattern_seed_export_files_are_accepted(svc, dirs):
    allowed, _ = dirs
    seed_doc = {"version": "1.0", "exportedAt": "2025-01-01T00:00:00.000Z", "agentId": "old",
                "projectId": "old", "memories": [memory(uid(9), version=1, createdAt="2025-01-01T00:00:00.000Z",
                                                        updatedAt="2025-01-02T00:00:00.000Z")]}  # fmt: skip
    res = do_import(svc, allowed, write_json(allowed / "seed.json", seed_doc))
    assert (res.imported, res.errors) == (1, [])
    assert all_records(svc)[uid(9)].updated_at.isoformat() == "2025-01-02T00:00:00+00:00"


# ---------------------------------------------------------------------------- allowed directories
def test_paths_outside_the_allowed_dirs_are_refused(svc, dirs):
    allowed, outside = dirs
    svc.remember(ME, MemoryInput(content="secret plans"))
    for target in (outside / "x.json", "../outside/x.json", "/etc/passwd"):
        with pytest.raises(AccessDenied, match="outside the allowed directories"):
            transfer.export_memories(svc, ME, [allowed], output_path=str(target))
    assert list(outside.iterdir()) == []
    valid = write_json(outside / "valid.json", {"version": 1, "memories": [memory(uid(1))]})
    with pytest.raises(AccessDenied, match="outside the allowed directories"):
        do_import(svc, allowed, valid)
    with pytest.raises(AccessDenied, match="PATTERN_ALLOWED_DIRS"):
        transfer.import_memories(svc, ME, [], input_path=str(valid))
    assert uid(1) not in all_records(svc)


def test_symlinks_escaping_the_allowed_dir_are_refused(svc, dirs):
    allowed, outside = dirs
    svc.remember(ME, MemoryInput(content="secret plans"))
    valid = write_json(outside / "valid.json", {"version": 1, "memories": [memory(uid(1))]})
    (allowed / "link.json").symlink_to(valid)
    (allowed / "dirlink").symlink_to(outside, target_is_directory=True)
    with pytest.raises(AccessDenied, match="outside the allowed directories"):
        do_import(svc, allowed, allowed / "link.json")
    with pytest.raises(AccessDenied):
        do_import(svc, allowed, "dirlink/valid.json")
    assert uid(1) not in all_records(svc)
    # writing through a symlinked file or folder would land outside too
    (allowed / "out.json").symlink_to(outside / "written.json")
    for name in ("out.json", "dirlink/x.json", str(allowed / "dirlink" / "y.json")):
        with pytest.raises(AccessDenied):
            transfer.export_memories(svc, ME, [allowed], output_path=name)
    assert sorted(p.name for p in outside.iterdir()) == ["valid.json"]
    # a symlink that stays inside is fine
    real = write_json(allowed / "real.json", {"version": 1, "memories": [memory(uid(2))]})
    (allowed / "inside.json").symlink_to(real)
    assert do_import(svc, allowed, allowed / "inside.json").imported == 1
