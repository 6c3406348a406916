"""The change stream: visibility, paging, durable consumer cursors, exactly-once
resume with concurrent writers, compaction and reset_required, and MCP notifications."""

from __future__ import annotations

import json
import random
import threading
import warnings
from datetime import timedelta
from pathlib import Path

import anyio
import mcp
import pytest

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.errors import InvalidInput
from server.mcp.app import create_server
from server.service.core.identity import Identity
from server.service.core.models import MemoryInput
from server.service.core.runtime import Runtime
from server.service.memories import changes as stream
from server.service.memories.memory import MemoryService

A = Identity(project_id="p", agent_id="agent-a")
B = Identity(project_id="p", agent_id="agent-b")
OTHER = Identity(project_id="q", agent_id="agent-c")
A_SUB = Identity(project_id="p", agent_id="agent-a.helper", subagent_type="helper",
                 parent_agent_id="agent-a")  # fmt: skip


pytestmark = pytest.mark.backends("sqlite", "postgres")


@pytest.fixture
def svc(tmp_path, store_url):
    s = MemoryService(Engine(tmp_path / "store", HashEmbedder(), store_url=store_url))
    yield s
    s.engine.close()


def remember(svc, who, content, scope="private", category=None) -> str:
    return svc.remember(who, MemoryInput(content=content, scope=scope, category=category)).memoryId


def drain(svc, who, **kw) -> list[stream.Change]:
    out, cursor = [], kw.pop("cursor", 0)
    while True:
        page = stream.read_changes(svc, who, cursor=cursor, **kw)
        assert not page.reset_required
        out.extend(page.changes)
        cursor = page.next_cursor
        if not page.has_more:
            return out


# ---------------------------------------------------------------------- reading
def test_changes_are_ordered_with_ops_revisions_and_records(svc):
    m1 = remember(svc, A, "first note")
    m2 = remember(svc, A, "second note")
    svc.update_memory(A, m1, content="first note, edited")
    svc.forget(A, m2)
    page = stream.read_changes(svc, A)
    got = [(c.seq, c.op, c.record_id, c.revision, c.scope, c.kind) for c in page.changes]
    assert got == [
        (1, "insert", m1, 1, "private", "memory"),
        (2, "insert", m2, 1, "private", "memory"),
        (3, "update", m1, 2, "private", "memory"),
        (4, "delete", m2, 1, "private", "memory"),
    ]
    # the record as it is now for inserts/updates; none for deletes or deleted records
    assert page.changes[0].record.content == "first note, edited"
    assert page.changes[0].record.revision == 2
    assert page.changes[1].record is None and page.changes[3].record is None
    assert (page.cursor, page.next_cursor, page.has_more, page.head) == (0, 4, False, 4)
    bare = stream.read_changes(svc, A, include_records=False)
    assert all(c.record is None for c in bare.changes)
    # nothing new after the head
    tail = stream.read_changes(svc, A, cursor=4)
    assert tail.changes == [] and tail.next_cursor == 4 and not tail.has_more


def test_paging_with_a_limit(svc):
    ids = [remember(svc, A, f"note {i}") for i in range(7)]
    pages, cursor = [], 0
    while True:
        page = stream.read_changes(svc, A, cursor=cursor, limit=3)
        pages.append([c.record_id for c in page.changes])
        cursor = page.next_cursor
        if not page.has_more:
            break
    assert pages == [ids[0:3], ids[3:6], ids[6:7]]
    assert cursor == 7


def test_argument_validation(svc):
    for bad in (dict(limit=0), dict(limit=1001), dict(cursor=-1), dict(commit=True),
                dict(consumer_id=""), dict(scopes=["everyone"])):  # fmt: skip
        with pytest.raises(InvalidInput):
            stream.read_changes(svc, A, **bad)
    with pytest.raises(InvalidInput):
        stream.ack(svc, A, "c", 99)  # beyond the head


# ---------------------------------------------------------------------- visibility
def test_agents_see_only_the_changes_they_may_see(svc):
    a_private = remember(svc, A, "A private")
    a_personal = remember(svc, A, "A core", "personal", "core")
    a_team = remember(svc, A, "A team", "team")
    b_private = remember(svc, B, "B private")
    public = remember(svc, OTHER, "public from project q", "public")
    q_team = remember(svc, OTHER, "team of project q", "team")
    svc.update_memory(A, a_private, content="A private, edited")
    svc.forget(A, a_private)
    svc.forget(A, a_personal, force=True)

    def seen(who):
        return [(c.op, c.record_id) for c in drain(svc, who)]

    assert seen(A) == [("insert", a_private), ("insert", a_personal), ("insert", a_team),
                       ("insert", public), ("update", a_private), ("delete", a_private),
                       ("delete", a_personal)]  # fmt: skip
    # B (same project) never learns of A's private or personal changes, deletes included
    assert seen(B) == [("insert", a_team), ("insert", b_private), ("insert", public)]
    assert seen(OTHER) == [("insert", public), ("insert", q_team)]
    # a sub-agent sees its parent's private changes, never its personal (core) ones
    assert seen(A_SUB) == [("insert", a_private), ("insert", a_team), ("insert", public),
                           ("update", a_private), ("delete", a_private)]  # fmt: skip
    # next_cursor moves past what B may not see: no re-scan
    last = stream.read_changes(svc, B)
    assert last.next_cursor == last.head == 9
    # scopes narrow further
    assert [c.record_id for c in drain(svc, A, scopes=["team"])] == [a_team]


# ---------------------------------------------------------------------- consumers
def test_a_consumer_resumes_from_its_stored_cursor(svc):
    ids = [remember(svc, A, f"n{i}") for i in range(5)]
    first = stream.read_changes(svc, A, consumer_id="indexer", limit=2)
    assert [c.record_id for c in first.changes] == ids[:2]
    # not acked: the same page again (at-least-once)
    again = stream.read_changes(svc, A, consumer_id="indexer", limit=2)
    assert [c.record_id for c in again.changes] == ids[:2]
    ack = stream.ack(svc, A, "indexer", first.next_cursor)
    assert (ack.cursor, ack.previous) == (2, None)
    nxt = stream.read_changes(svc, A, consumer_id="indexer", limit=2, commit=True)
    assert [c.record_id for c in nxt.changes] == ids[2:4] and nxt.committed
    rest = stream.read_changes(svc, A, consumer_id="indexer")
    assert [c.record_id for c in rest.changes] == ids[4:]
    # an explicit cursor wins over the stored one
    assert len(stream.read_changes(svc, A, cursor=0, consumer_id="indexer").changes) == 5
    # cursors are per agent, per project and per scope set
    assert len(stream.read_changes(svc, A_SUB, consumer_id="indexer").changes) == 5
    assert stream.read_changes(svc, A, consumer_id="indexer", scopes=["private"]).cursor == 0


def test_consumer_cursors_survive_a_restart(tmp_path, store_url):
    home = tmp_path / "store"
    svc = MemoryService(Engine(home, HashEmbedder(), store_url=store_url))
    ids = [remember(svc, A, f"n{i}") for i in range(3)]
    stream.read_changes(svc, A, consumer_id="sync", limit=2, commit=True)
    svc.engine.close()
    # a new process (no model needed to read changes); with PostgreSQL another node
    other = home if store_url is None else tmp_path / "node-b"
    svc = MemoryService(Engine(other, store_url=store_url))
    try:
        page = stream.read_changes(svc, A, consumer_id="sync")
        assert page.cursor == 2 and [c.record_id for c in page.changes] == ids[2:]
    finally:
        svc.engine.close()


def test_exactly_once_in_order_with_concurrent_writers(tmp_path, store_url):
    """Writers (threads through MemoryService) insert, update and delete while a consumer pages
    with small limits, acks each page and disconnects every few pages (a new service, as a
    new process, resuming from its stored cursor). It receives every change exactly once.
    With PostgreSQL the consumer is another node: its replica, applied from the log while the
    writers write, must never skip a seq that commits later."""
    home = tmp_path / "store"
    reader_home = home if store_url is None else tmp_path / "consumer-node"
    writer_svc = MemoryService(Engine(home, store_url=store_url))  # lexical only
    writers, per_writer = 4, 100
    done = threading.Event()
    errors: list[BaseException] = []

    def write(w: int) -> None:
        rnd = random.Random(w)
        mine: list[str] = []
        try:
            for i in range(per_writer):
                roll = rnd.random()
                if mine and roll < 0.2:
                    writer_svc.update_memory(A, rnd.choice(mine), content=f"w{w} edit {i}")
                elif mine and roll < 0.3:
                    writer_svc.forget(A, mine.pop(rnd.randrange(len(mine))))
                else:
                    scope = "team" if roll > 0.8 else "private"
                    mine.append(remember(writer_svc, A, f"writer {w} note {i}", scope))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    received: list[stream.Change] = []
    during: list[int] = []  # pages read while the writers were still writing

    def consume() -> None:
        svc = MemoryService(Engine(reader_home, store_url=store_url))
        pages = 0
        try:
            while True:
                finished = done.is_set()  # read the flag before the page: no change left behind
                page = stream.read_changes(svc, A, consumer_id="mirror", limit=7)
                if not finished and page.changes:
                    during.append(page.next_cursor)
                assert not page.reset_required
                received.extend(page.changes)  # "handle" the page, then ack it
                stream.ack(svc, A, "mirror", page.next_cursor)
                pages += 1
                if pages % 5 == 0:  # disconnect and come back as a new process
                    svc.engine.close()
                    svc = MemoryService(Engine(reader_home, store_url=store_url))
                if finished and not page.has_more:
                    return
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)
        finally:
            svc.engine.close()

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    consumer = threading.Thread(target=consume)
    consumer.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    consumer.join(timeout=120)
    writer_svc.store.catch_up()
    try:
        assert not errors, errors
        assert not consumer.is_alive()
        assert len(during) >= 3, "the consumer should have paged while writers wrote"
        all_rows = writer_svc.store.reader.execute(
            "SELECT seq, record_id, op, revision FROM changes ORDER BY seq"
        ).fetchall()
        assert len(all_rows) == writers * per_writer
        seqs = [c.seq for c in received]
        assert seqs == sorted(set(seqs)), "duplicates or out of order"
        assert [(c.seq, c.record_id, c.op, c.revision) for c in received] == [
            tuple(r) for r in all_rows
        ]
        # replaying the stream rebuilds the store's state
        state: dict[str, int] = {}
        for c in received:
            if c.op == "delete":
                state.pop(c.record_id)
            else:
                state[c.record_id] = c.revision
        live = dict(writer_svc.store.reader.execute("SELECT id, revision FROM records").fetchall())
        assert state == live
    finally:
        writer_svc.engine.close()


# ---------------------------------------------------------------------- compaction
def test_compaction_sets_a_horizon_and_lagging_consumers_must_reset(svc):
    ids = [remember(svc, A, f"n{i}") for i in range(10)]
    stream.ack(svc, A, "slow", 3)
    stream.ack(svc, A, "fast", 8)
    res = stream.compact_changes(svc.store, before_seq=7)  # deletes seq 1..6
    assert (res.deleted, res.horizon, res.head) == (6, 6, 10)
    slow = stream.read_changes(svc, A, consumer_id="slow")
    assert slow.reset_required and slow.changes == [] and slow.next_cursor == 10
    assert "compacted" in slow.reason and not slow.committed
    # resetting is explicit: the stored cursor did not move
    assert stream.read_changes(svc, A, consumer_id="slow", commit=True).reset_required
    fast = stream.read_changes(svc, A, consumer_id="fast")
    assert not fast.reset_required and [c.record_id for c in fast.changes] == ids[8:]
    # a new consumer from the beginning must reset too (its changes 1..6 are gone)
    assert stream.read_changes(svc, A).reset_required
    # exactly at the horizon is fine: nothing it had not seen was deleted
    at = stream.read_changes(svc, A, cursor=6)
    assert not at.reset_required and [c.record_id for c in at.changes] == ids[6:]
    # the consumer snapshots, acks the head it was given, and follows on
    stream.ack(svc, A, "slow", slow.next_cursor)
    new = remember(svc, A, "after the reset")
    page = stream.read_changes(svc, A, consumer_id="slow")
    assert not page.reset_required and [c.record_id for c in page.changes] == [new]
    assert page.changes[0].seq == 11  # sequence numbers are never reused
    # the horizon never moves back
    assert stream.compact_changes(svc.store, before_seq=3).horizon == 6


def test_compacting_everything_keeps_the_head(svc):
    for i in range(3):
        remember(svc, A, f"n{i}")
    res = stream.compact_older_than(svc.store, age=timedelta(0))
    assert res.deleted == 3 and res.horizon == 3 == res.head
    page = stream.read_changes(svc, A, cursor=3)
    assert not page.reset_required and page.next_cursor == 3
    assert stream.read_changes(svc, A, cursor=2).reset_required


def test_a_cursor_ahead_of_the_store_requires_a_reset(svc):
    remember(svc, A, "only one")
    page = stream.read_changes(svc, A, cursor=50)
    assert page.reset_required and "ahead" in page.reason and page.next_cursor == 1


def test_latest_changes(svc):
    ids = [remember(svc, A, f"n{i}") for i in range(5)]
    remember(svc, B, "invisible to A")
    res = stream.latest_changes(svc, A, limit=3)
    assert [c.record_id for c in res.changes] == ids[2:]
    assert res.next_cursor == res.head == 6


def test_compact_changes_command(tmp_path, monkeypatch, capsys, store_url):
    from server.cli import main

    home = tmp_path / "home"
    svc = MemoryService(Engine(home, store_url=store_url))
    for i in range(4):
        remember(svc, A, f"n{i}")
    svc.engine.close()
    monkeypatch.setenv("PATTERN_HOME", str(home))
    if store_url:
        monkeypatch.setenv("PATTERN_STORE_URL", store_url)
    assert main(["compact-changes", "--before-seq", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["deleted"] == 2 and out["horizon"] == 2 and out["head"] == 4
    assert main(["compact-changes", "--older-than-days", "0"]) == 0
    assert json.loads(capsys.readouterr().out)["horizon"] == 4


# ---------------------------------------------------------------------- MCP
@pytest.fixture
def runtime(tmp_path, store_url):
    env = {"PATTERN_HOME": str(tmp_path / "home"), "PATTERN_EMBEDDER": "hash",
           "PATTERN_PROJECT_ID": "p", "PATTERN_AGENT_ID": "agent-a",
           "PATTERN_STORE_URL": store_url or ""}  # fmt: skip
    rt = Runtime.start(env, Path(tmp_path), background=False)
    yield rt
    rt.close()


def test_changes_tools_resource_and_listen_notifications(runtime):
    server = create_server(runtime=runtime)

    async def main():
        async with mcp.Client(server) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"changes", "changes-ack", "update-memory"} <= names
            async with client.listen(resource_subscriptions=["pattern://changes"]) as sub:
                res = await client.call_tool(
                    "remember", {"content": "notify me", "idempotencyKey": "k"}
                )
                mid = res.structured_content["memoryId"]
                with anyio.fail_after(10):
                    event = await sub.__anext__()
                assert event.uri == "pattern://changes"
                # a replayed call writes nothing: the head does not move, no notification
                again = await client.call_tool(
                    "remember", {"content": "notify me", "idempotencyKey": "k"}
                )
                assert again.structured_content["memoryId"] == mid
                upd = await client.call_tool(
                    "update-memory", {"memoryId": mid, "content": "edited", "expectedRevision": 1}
                )
                assert upd.structured_content["revision"] == 2
                with anyio.fail_after(10):
                    assert (await sub.__anext__()).uri == "pattern://changes"
            bad = await client.call_tool(
                "update-memory", {"memoryId": mid, "content": "late", "expectedRevision": 1}
            )
            assert bad.is_error and "[conflict]" in bad.content[0].text
            assert '"current_revision": 2' in bad.content[0].text
            page = (
                await client.call_tool("changes", {"consumerId": "ui", "limit": 1})
            ).structured_content
            assert [c["op"] for c in page["changes"]] == ["insert"] and page["has_more"]
            ack = await client.call_tool(
                "changes-ack", {"consumerId": "ui", "cursor": page["next_cursor"]}
            )
            assert ack.structured_content["cursor"] == 1
            page = (await client.call_tool("changes", {"consumerId": "ui"})).structured_content
            assert [(c["op"], c["revision"]) for c in page["changes"]] == [("update", 2)]
            assert page["changes"][0]["record"]["content"] == "edited"
            read = await client.read_resource("pattern://changes")
            doc = json.loads(read.contents[0].text)
            assert [c["op"] for c in doc["changes"]] == ["insert", "update"] and doc[
                "next_cursor"
            ] == 2
            paged = json.loads(
                (await client.read_resource("pattern://changes?cursor=1")).contents[0].text
            )
            assert [c["seq"] for c in paged["changes"]] == [2]

    anyio.run(main)


def test_resources_subscribe_notifications_for_2025_clients(runtime):
    """No sleeping: the in-process dispatcher runs the client's notification handler inline,
    before the call's answer, so what a call announces has arrived when ``call_tool`` returns
    (the first write checks exactly that), and "nothing arrived" is final, not "not yet"."""
    server = create_server(runtime=runtime)
    received = []

    async def on_message(message):
        received.append(message)

    async def main():
        with anyio.fail_after(30):  # the deadline of the whole exchange
            await exchange()

    async def exchange():
        async with mcp.Client(server, mode="legacy", message_handler=on_message) as client:
            assert client.session.server_capabilities.resources.subscribe
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # deprecated at 2026-07-28, still what clients use
                await client.subscribe_resource("pattern://changes")
            await client.call_tool("pattern_health", {})  # a read: no notification
            assert received == []
            await client.call_tool("remember", {"content": "tell the subscribers"})
            assert [m.params.uri for m in received] == ["pattern://changes"]  # already here
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await client.unsubscribe_resource("pattern://changes")
            await client.call_tool("remember", {"content": "nobody listens"})
            assert len(received) == 1
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await client.subscribe_resource("pattern://changes")
            await client.call_tool("remember", {"content": "a listener again"})
            assert len(received) == 2

    anyio.run(main)
