"""Many daemons, one PostgreSQL: nodes are engines on their own folders sharing one
real PostgreSQL database; every rule is decided there, every node reads its own replica."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.errors import InvalidInput, StoreUnavailable
from retrieval.pg import polling
from retrieval.records import RecordFilter
from server.service.core import scopes as rules
from server.service.core.errors import Conflict, LimitExceeded
from server.service.core.identity import Identity
from server.service.core.models import MemoryInput
from server.service.memories import changes as stream
from server.service.memories.memory import MemoryService
from tests.race_util import race

A = Identity(project_id="p", agent_id="agent-a")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def url(new_pg_database) -> str:
    return new_pg_database()


@pytest.fixture
def nodes(tmp_path, url):
    """Factory: ``nodes("a")`` -> a MemoryService on its own folder (a node of the cluster)."""
    opened: list[MemoryService] = []

    def _node(name: str, embedder=HashEmbedder, **kw) -> MemoryService:
        eng = Engine(tmp_path / name, embedder() if embedder else None, store_url=url, **kw)
        svc = MemoryService(eng)
        opened.append(svc)
        return svc

    yield _node
    for svc in opened:
        svc.engine.close()


def ids(svc: MemoryService) -> set[str]:
    return {r.id for r in svc.store.list(RecordFilter(include_expired=True))}


def wait_for(pred, timeout: float = 10.0) -> float:
    """Seconds until ``pred()`` held (fails after ``timeout``)."""
    start = time.monotonic()
    while not pred():
        assert time.monotonic() - start < timeout, "not visible in time"
        time.sleep(0.01)
    return time.monotonic() - start


# ---------------------------------------------------------------------- rules across nodes
def test_two_nodes_racing_on_one_record_one_wins(nodes):
    a, b = nodes("a"), nodes("b")
    rec = a.remember(A, MemoryInput(content="original"))
    wait_for(lambda: rec.memoryId in ids(b))
    svcs = [a, b] * 4
    got = race(8, lambda i: svcs[i].update_memory(
        A, rec.memoryId, content=f"writer {i}", expected_revision=1))  # fmt: skip
    wins = [g for g in got if not isinstance(g, Exception)]
    conflicts = [g for g in got if isinstance(g, Conflict)]
    assert len(wins) == 1 and len(conflicts) == 7, got
    assert all(c.data["current_revision"] == 2 for c in conflicts)
    b.store.catch_up()
    assert a.store.get_one(rec.memoryId) == b.store.get_one(rec.memoryId)
    assert b.store.get_one(rec.memoryId).revision == 2


def test_without_expected_revision_both_nodes_write_in_turn(nodes):
    """Two daemons updating one record at once, round after round: both succeed (the one that
    read a stale revision re-reads and writes on top), nothing is lost."""
    a, b = nodes("a"), nodes("b")
    rec = a.remember(A, MemoryInput(content="original"))
    for r in range(4):
        got = race(2, lambda i, r=r: (a, b)[i].update_memory(
            A, rec.memoryId, metadata={f"k{r}{i}": i}))  # fmt: skip
        assert not [g for g in got if isinstance(g, Exception)], got
        assert sorted(g.revision for g in got) == [2 + 2 * r, 3 + 2 * r]
    a.store.catch_up()
    final = a.store.get_one(rec.memoryId)
    assert final.revision == 9
    assert all(final.metadata[f"k{r}{i}"] == i for r in range(4) for i in range(2))


def test_limits_hold_under_concurrent_writers_on_two_nodes(nodes, monkeypatch):
    monkeypatch.setitem(rules.MAX_PER_CATEGORY, "core", 10)
    a, b = nodes("a"), nodes("b")
    got = race(16, lambda i: (a, b)[i % 2].core_memory(A, f"core fact {i}"))
    stored = [g for g in got if not isinstance(g, Exception)]
    refused = [g for g in got if isinstance(g, LimitExceeded)]
    assert len(stored) == 10 and len(refused) == 6, got
    a.store.catch_up()
    b.store.catch_up()
    assert len(ids(a)) == len(ids(b)) == 10


def test_an_idempotency_key_holds_across_nodes(nodes):
    a, b = nodes("a"), nodes("b")
    item = MemoryInput(content="sent twice, through two daemons")
    got = race(6, lambda i: (a, b)[i % 2].remember(A, item, idempotency_key="k-1"))
    assert not [g for g in got if isinstance(g, Exception)], got
    assert len({g.memoryId for g in got}) == 1
    a.store.catch_up()
    b.store.catch_up()
    assert len(ids(a)) == len(ids(b)) == 1


def test_unique_entity_names_across_nodes(tmp_path, url):
    from graph.entities import GraphService

    engines = [Engine(tmp_path / n, HashEmbedder(), store_url=url) for n in ("a", "b")]
    try:
        graphs = [GraphService(e) for e in engines]
        who = A

        def create(i: int):
            return graphs[i % 2].create_entities(
                who, [{"name": "Postgres", "entityType": "db", "observations": [f"o{i}"]}]
            )

        got = race(4, create)
        assert not [g for g in got if isinstance(g, Exception)], got
        made = [g for g in got if g.created]
        assert len(made) == 1, got  # the others skipped it, as on one daemon
        assert all(g.skipped == ["Postgres"] for g in got if not g.created)
        for e in engines:
            e.store.catch_up()
            n = e.store.reader.execute("SELECT count(*) FROM entities").fetchone()[0]
            assert n == 1
    finally:
        for e in engines:
            e.close()


# ---------------------------------------------------------------------- replication
def test_read_your_writes_and_other_nodes_within_a_second(nodes):
    a, b = nodes("a"), nodes("b")
    for i in range(5):
        rec = a.remember(A, MemoryInput(content=f"replicated memory {i}", scope="team",
                                        category="decisions"))  # fmt: skip
        assert rec.memoryId in ids(a)  # on the writing node at once
        assert [h.record.id for h in a.engine.search(f"replicated memory {i}", k=1)] == [
            rec.memoryId
        ]
        assert wait_for(lambda r=rec: r.memoryId in ids(b), timeout=5) < 1.0
    wait_for(lambda: b.engine.search("replicated memory 3", k=1)[0].record.content.endswith("3"))
    # the vectors travelled with the log: the other node embedded nothing
    assert b.engine.embedder is not None
    rows = b.store.reader.execute("SELECT count(*) FROM embeddings").fetchone()[0]
    assert rows == a.store.reader.execute("SELECT count(*) FROM embeddings").fetchone()[0]


def test_no_node_re_embeds_another_nodes_write(nodes):
    from tests.conftest import CountingEmbedder

    counting = CountingEmbedder()
    a, b = nodes("a"), nodes("b", embedder=lambda: counting)
    rec = a.remember(A, MemoryInput(content="embedded once, on node a"))
    counting.reset()
    wait_for(lambda: rec.memoryId in ids(b))
    b.engine.sync()
    assert counting.documents == 0
    assert b.engine.search("embedded once", k=1, mode="vector")[0].record.id == rec.memoryId


def test_notify_wakes_a_node_that_would_poll_rarely(nodes, monkeypatch):
    # polling alone would show the write after ~4.5 s, past the 2 s asked for
    monkeypatch.setenv("PATTERN_PG_POLL_MS", "5000")
    a, b = nodes("a"), nodes("b")
    time.sleep(0.3)  # b is listening
    rec = a.remember(A, MemoryInput(content="woken by NOTIFY"))
    assert wait_for(lambda: rec.memoryId in ids(b), timeout=5) < 2.0


def test_a_node_that_would_poll_rarely_closes_at_once(nodes, monkeypatch):
    """Its follower looks at the stop flag between notifications, not at its poll's end."""
    monkeypatch.setenv("PATTERN_PG_POLL_MS", "60000")
    a = nodes("a")
    time.sleep(0.3)  # the follower is waiting for a notification
    start = time.monotonic()
    a.engine.close()
    assert time.monotonic() - start < 2.0


def test_a_foreign_notification_counts_when_the_node_s_own_comes_in_the_same_batch(
    nodes, monkeypatch
):
    """Notifications that arrive together are all read: another node's, then this node's own,
    still wake the follower (it did not when the last one alone decided)."""
    from psycopg import Notify

    from retrieval.pg.cluster import Cluster

    monkeypatch.setenv("PATTERN_PG_POLL_MS", "60000")
    batches: list[list] = []

    class Listener:  # a real LISTEN connection that delivers the batches the test plants
        def __init__(self, conn) -> None:
            self.conn = conn

        def __getattr__(self, name):
            return getattr(self.conn, name)

        def notifies(self, timeout=None, stop_after=None):
            if batches:
                yield from batches.pop()
                return
            yield from self.conn.notifies(timeout=timeout, stop_after=stop_after)

    connect = Cluster.connect
    monkeypatch.setattr(
        Cluster,
        "connect",
        lambda self, autocommit=False: (
            Listener(connect(self, autocommit)) if autocommit else connect(self, autocommit)
        ),
    )
    b = nodes("b")
    replica = b.engine.cluster.replica
    time.sleep(0.3)  # b's follower has caught up once and is listening
    calls: list[int] = []
    catch_up = replica.catch_up
    monkeypatch.setattr(replica, "catch_up", lambda *a, **kw: calls.append(1) or catch_up(*a, **kw))
    own = b.engine.cluster.node_id
    batches.append(
        [Notify("pattern_log", "1 another-node", 0), Notify("pattern_log", f"2 {own}", 0)]
    )
    assert wait_for(lambda: calls, timeout=3) < 2.0


@pytest.mark.parametrize("raw", ["0", "-100", "nan", "NaN", "inf", "9", "ten", "1" * 50])
def test_a_polling_period_that_would_spin_is_refused_before_a_connection(
    tmp_path, monkeypatch, raw
):
    """0 or less made the follower catch up against PostgreSQL thousands of times a second;
    NaN spun a core and turned the polling fallback off (``elapsed >= nan`` is never true). The
    URL reaches nothing: the setting is refused before the pool tries it."""
    monkeypatch.setenv("PATTERN_PG_POLL_MS", raw)
    start = time.monotonic()
    with pytest.raises(InvalidInput, match="PATTERN_PG_POLL_MS"):
        Engine(tmp_path / "a", HashEmbedder(), store_url="postgresql://127.0.0.1:1/none")
    assert time.monotonic() - start < 5


@example("\U0002ebe1" * 40)  # quoted with escapes: ten times longer
@given(st.text(max_size=60) | st.floats().map(str))
def test_the_polling_period_is_a_finite_number_of_at_least_ten_ms(raw):
    try:
        seconds = polling.poll_seconds({"PATTERN_PG_POLL_MS": raw})
    except InvalidInput as exc:
        assert "PATTERN_PG_POLL_MS" in str(exc) and len(str(exc)) < 200
    else:
        assert seconds >= polling.MIN_MS / 1000 and seconds < float("inf")
    assert polling.poll_seconds({}) == polling.poll_seconds({"PATTERN_PG_POLL_MS": " "}) == 0.5


def test_polling_alone_still_replicates(nodes, monkeypatch):
    monkeypatch.setenv("PATTERN_PG_LISTEN", "0")
    monkeypatch.setenv("PATTERN_PG_POLL_MS", "200")
    a, b = nodes("a"), nodes("b")
    rec = a.remember(A, MemoryInput(content="found by polling"))
    assert wait_for(lambda: rec.memoryId in ids(b), timeout=5) < 2.0


WRITER = textwrap.dedent(
    """
    import sys
    from retrieval.engine import Engine
    from server.service.core.identity import Identity
    from server.service.memories.memory import MemoryService
    from server.service.core.models import MemoryInput
    home, url, name, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    svc = MemoryService(Engine(home, store_url=url))
    who = Identity(project_id="p", agent_id="agent-" + name)
    for i in range(n):
        svc.remember(who, MemoryInput(content=f"{name} {i}", scope="team", category="decisions"))
    svc.engine.close()
    """
)


def test_seq_order_under_concurrent_writers_from_two_processes(tmp_path, url, nodes):
    """Two writer processes commit concurrently while a third node samples its replica: every
    sample of the change log must be a prefix of the final log (no seq ever appears below
    one already applied), and the final replica equals PostgreSQL."""
    observer = nodes("observer", embedder=None)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / w), url, w, "60"], env=env)
        for w in ("w1", "w2")
    ]
    samples: list[list[int]] = []
    while any(p.poll() is None for p in procs):
        samples.append([r[0] for r in observer.store.reader.execute("SELECT seq FROM changes")])
        time.sleep(0.01)
    assert [p.returncode for p in procs] == [0, 0]
    observer.store.catch_up()
    final = [r[0] for r in observer.store.reader.execute("SELECT seq FROM changes ORDER BY seq")]
    assert len(final) == 120 and final == sorted(set(final))
    for s in samples:
        if s:
            assert sorted(s) == [q for q in final if q <= max(s)], "a seq appeared late"
    assert len({len(s) for s in samples}) > 3, "the observer should have seen progress"
    import psycopg

    with psycopg.connect(url) as pg:
        canon = [r[0] for r in pg.execute("SELECT seq FROM changes ORDER BY seq")]
    assert canon == final


# ---------------------------------------------------------------------- recovery
@pytest.mark.slow  # PostgreSQL stopped and started under two daemons
def test_database_restart(nodes, pg_admin, url):
    admin, _, server = pg_admin
    if server is None:
        pytest.skip("PATTERN_TEST_POSTGRES_URL is an external server: it is not restarted here")
    from pgserver.postgres_server import pg_ctl

    a, b = nodes("a"), nodes("b")
    first = a.remember(A, MemoryInput(content="before the restart"))
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user)
    try:
        with pytest.raises(StoreUnavailable):
            a.remember(A, MemoryInput(content="while the database is down"))
        assert len(ids(a)) == 1  # nothing half-written
        assert a.engine.search("before the restart", k=1)[0].record.id == first.memoryId
    finally:
        server.ensure_postgres_running()
    started = time.monotonic()
    second = a.remember(A, MemoryInput(content="after the restart"))
    # the pool's reconnection delay stays bounded: a long outage does not make the first
    # write after it wait for the next doubled attempt
    assert time.monotonic() - started < 8
    # b's follower reconnects (backoff) and catches up without being asked
    wait_for(lambda: {first.memoryId, second.memoryId} <= ids(b), timeout=20)
    assert len(ids(b)) == 2


def test_a_replica_behind_the_compaction_horizon_rebuilds_from_a_snapshot(tmp_path, url, nodes):
    a = nodes("a")
    b = nodes("b")
    before = a.remember(A, MemoryInput(content="seen by b before it stopped"))
    wait_for(lambda: before.memoryId in ids(b))
    b.engine.close()
    names = ("Alpha", "Bravo", "Charlie", "Delta", "Echo")  # five subjects: no update links
    written = [a.remember(A, MemoryInput(content=f"{n} was written while b was away")).memoryId
               for n in names]  # fmt: skip
    a.forget(A, before.memoryId)
    horizon = a.engine.cluster.compact_log(before_seq=a.engine.cluster.head() + 1)
    assert horizon == a.engine.cluster.head()
    b = nodes("b")  # the same folder: applied seq < horizon
    assert b.engine.cluster.replica.rebuilds == 1
    assert ids(b) == set(written) == ids(a)
    assert b.engine.search("Delta was written while b was away", k=1)[0].record.id == written[3]
    b.engine.sync()
    assert b.engine.search("seen by b before", k=10, mode="vector")[0].record.id != before.memoryId
    # and it follows the log from the snapshot's seq on
    later = a.remember(A, MemoryInput(content="after the snapshot"))
    wait_for(lambda: later.memoryId in ids(b))


def test_a_new_node_catches_up_and_ranks_like_the_others(nodes):
    a = nodes("a")
    for i in range(30):
        a.remember(A, MemoryInput(content=f"topic {i % 7} note {i} about subject {i * 3}"))
    a.engine.cluster.compact_log(before_seq=10)  # part of the log is gone: snapshot, no gap
    c = nodes("c")
    assert ids(c) == ids(a)
    for q in ("topic 3 note", "subject 27", "note 12 about"):
        assert [h.record.id for h in c.engine.search(q, k=10)] == [
            h.record.id for h in a.engine.search(q, k=10)
        ]
    page = stream.read_changes(c, A, cursor=a.engine.cluster.head() + 0)
    assert not page.reset_required


def test_a_standalone_store_seeds_an_empty_cluster(tmp_path, url, nodes):
    solo = MemoryService(Engine(tmp_path / "solo", HashEmbedder()))
    kept = solo.remember(A, MemoryInput(content="from before the cluster")).memoryId
    solo.engine.close()
    first = nodes("solo")  # the same folder, now with PostgreSQL: it seeds the database
    assert kept in ids(first)
    other = nodes("other")
    assert ids(other) == {kept}
    assert other.remember(A, MemoryInput(content="new")).memoryId in ids(other)
    # a second standalone store is refused rather than dropped or merged
    lone = MemoryService(Engine(tmp_path / "lone", HashEmbedder()))
    lone.remember(A, MemoryInput(content="would be lost"))
    lone.engine.close()
    with pytest.raises(StoreUnavailable, match="not a replica"):
        Engine(tmp_path / "lone", store_url=url)


def test_tokens_are_shared_by_every_node(tmp_path, url):
    from server.http.auth import TokenStore

    one, two = TokenStore(tmp_path / "h1", url), TokenStore(tmp_path / "h2", url)
    token = one.create("remote-agent", "p")
    assert two.lookup(token)["agent"] == "remote-agent"
    assert not (tmp_path / "h1" / "tokens.json").exists()
    two.revoke("remote-agent")
    time.sleep(1.1)  # one's cache lives PG_TOKENS_TTL_S
    assert one.lookup(token) is None


def test_reviewer_tokens_of_the_cluster_are_honoured(tmp_path, url, nodes):
    """``token create --reviewer`` in PostgreSQL mode writes the cluster's token table; the
    review policy of every node reads it (not a tokens.json beside the replica)."""
    from server.service.browsing.review import review_policy
    from server.service.core.bearer_tokens import TokenStore
    from tests.mcp_util import identity_env, runtime_on

    TokenStore(tmp_path / "cli", url).create("carol", "p", reviewer=True)
    TokenStore(tmp_path / "cli", url).create("dave", "p")
    env = {**identity_env(tmp_path / "host-a", "p", "owner"), "PATTERN_STORE_URL": url}
    env["PATTERN_TEAM_REVIEW"] = "on"
    rt = runtime_on(nodes("host-a"), env, tmp_path)
    policy = review_policy(rt)
    assert policy.enabled("p")
    assert policy.is_reviewer(Identity(project_id="p", agent_id="carol"))
    assert not policy.is_reviewer(Identity(project_id="p", agent_id="dave"))
    assert policy.is_reviewer(Identity(project_id="p", agent_id="owner"))


class SlowEmbedder(HashEmbedder):
    """The hashing embedder, slowly: a background writer is still embedding at close (its own
    model id: no other node makes its vectors)."""

    def __init__(self) -> None:
        super().__init__()
        self.model_id = "slow-hash"

    def embed_documents(self, texts):
        time.sleep(0.5)
        return super().embed_documents(texts)


def test_a_node_that_left_its_cluster_refuses_writes(nodes):
    a = nodes("a")
    a.remember(A, MemoryInput(content="written while in the cluster"))
    a.engine.cluster.close()
    with pytest.raises(StoreUnavailable, match="left its PostgreSQL cluster"):
        a.remember(A, MemoryInput(content="would reach this replica only"))
    assert [r.content for r in a.store.list(RecordFilter())] == ["written while in the cluster"]


def test_close_drains_the_vector_writer_before_leaving_the_cluster(tmp_path, url, nodes):
    """The background writer embeds records stored without a model; their embeddings are
    canonical state: closing the engine while it works must still get them to PostgreSQL."""
    a = nodes("a", embedder=None, background_vectors=True)
    mids = [a.remember(A, MemoryInput(content=f"fact number {i}")).memoryId for i in range(6)]
    slow = SlowEmbedder()
    a.engine.set_embedder(slow)  # the writer starts embedding the six records
    a.engine.close()
    b = nodes("b")
    wait_for(lambda: set(mids) <= ids(b))
    assert set(b.store.embeddings(mids, slow.model_id)) == set(mids)


# ---------------------------------------------------------------------- daemons
def test_two_daemons_on_two_folders_share_memory_and_tokens(tmp_path, url):
    """Real daemons (``daemon --store-url``) on two folders: a token made once works on both,
    a write through one is recalled through the other, health shows each replica."""
    from server.http.auth import TokenStore
    from tests.runtime.test_daemon import bearer, call, start_daemon, stop

    token = TokenStore(tmp_path / "cli", url).create("remote-agent", "p1")
    procs = [start_daemon(tmp_path / n, "--store-url", url) for n in ("host-a", "host-b")]
    try:
        from server.http.daemon import read_info

        info_a, info_b = read_info(tmp_path / "host-a"), read_info(tmp_path / "host-b")
        args = {"content": "the billing service retries three times", "scope": "team",
                "category": "decisions"}  # fmt: skip
        status, body = call(info_a, bearer(token), "remember", args)
        assert status == 200 and not body["result"]["isError"], body
        mid = body["result"]["structuredContent"]["memoryId"]

        def found_on_b() -> bool:
            _, got = call(info_b, bearer(token), "recall", {"query": "billing service retries"})
            return mid in [i["id"] for i in got["result"]["structuredContent"]["items"]]

        assert wait_for(found_on_b, timeout=10) < 2.0
        _, health = call(info_b, bearer(token), "pattern_health", {})
        replica = health["result"]["structuredContent"]["replica"]
        assert replica["backend"] == "postgresql" and replica["lag"] == 0
        assert "SECRET" not in json.dumps(replica)
    finally:
        for p in procs:
            stop(p)


def test_compact_changes_by_age_compacts_the_replication_log_too(nodes):
    from datetime import timedelta

    a = nodes("a")
    for i in range(3):
        a.remember(A, MemoryInput(content=f"old {i}"))
    res = stream.compact(a, older_than=timedelta(0))
    assert res.horizon == 3 and res.log_horizon == a.engine.cluster.head()
    c = nodes("c")  # joins from a snapshot: the log before the horizon is gone
    assert ids(c) == ids(a) and c.engine.cluster.replica.rebuilds == 1


def test_a_write_made_without_a_model_is_embedded_once_by_a_node_that_has_one(nodes):
    """Node a has no model yet (it is loading): its write carries no vector. Node b embeds it
    while applying the log (a canonical write from inside b's outbox sync, which applies the
    log again): this used to deadlock b's follower on its own sync lock."""
    a, b = nodes("a", embedder=None), nodes("b")
    rec = a.remember(A, MemoryInput(content="written while the model was loading"))

    def in_chroma() -> bool:
        hit = b.engine.search("while the model was loading", k=1, mode="vector")
        return bool(hit) and hit[0].record.id == rec.memoryId

    wait_for(in_chroma)
    later = b.remember(A, MemoryInput(content="b still writes"))  # no deadlock
    wait_for(lambda: later.memoryId in ids(a))
    import psycopg

    with psycopg.connect(a.engine.cluster.url) as pg:
        n = pg.execute("SELECT count(*) FROM embeddings").fetchone()[0]
    assert n == 2  # one vector set per record, stored canonically


def test_a_failed_apply_leaves_the_replica_at_its_seq_and_the_next_catch_up_completes(
    nodes, monkeypatch
):
    from retrieval.pg import log as pglog

    a, b = nodes("a"), nodes("b")
    b.engine.cluster.replica.stop()  # b applies only when told
    before = b.engine.cluster.replica.applied
    ids_written = [a.remember(A, MemoryInput(content=f"batch {i}")).memoryId for i in range(3)]
    real = pglog.apply
    calls = {"n": 0}

    def crash_on_second(conn, entries):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("power cut")
        return real(conn, entries)

    monkeypatch.setattr(pglog, "apply", crash_on_second)
    with pytest.raises(RuntimeError):
        b.store.catch_up()
    assert b.engine.cluster.replica.applied == before and not set(ids_written) & ids(b)
    monkeypatch.setattr(pglog, "apply", real)
    b.store.catch_up()
    assert set(ids_written) <= ids(b)
    assert b.store.reader.execute("SELECT count(*) FROM changes").fetchone()[0] == 3


def test_catch_up_reads_the_log_in_batches_bounded_by_size(nodes, monkeypatch):
    import retrieval.pg.cluster as cluster_mod

    a, b = nodes("a"), nodes("b")
    b.engine.cluster.replica.stop()
    written = [a.remember(A, MemoryInput(content=f"sized {i}")).memoryId for i in range(4)]
    monkeypatch.setattr(cluster_mod, "BATCH_BYTES", 1)  # one row per batch
    reads = []
    real = b.engine.cluster.log_after
    monkeypatch.setattr(b.engine.cluster, "log_after",
                        lambda *a, **kw: reads.append(1) or real(*a, **kw))  # fmt: skip
    b.store.catch_up()
    assert set(written) <= ids(b) and len(reads) >= 4


@pytest.mark.parametrize("committed", [True, False])
def test_a_connection_lost_during_commit_is_resolved_not_guessed(nodes, monkeypatch, committed):
    """COMMIT's answer is lost: the writer looks for its log row (after taking the lock) and
    reports success only if the transaction did commit."""
    import psycopg

    a = nodes("a")
    canonical = a.engine.cluster.canonical
    real_start = canonical._start

    class LosesCommit:
        def __init__(self, pg) -> None:
            self._pg = pg

        def execute(self, sql, *args, **kw):
            if sql == "COMMIT":
                self._pg.execute("COMMIT" if committed else "ROLLBACK")
                raise psycopg.OperationalError("server closed the connection unexpectedly")
            return self._pg.execute(sql, *args, **kw)

        def __getattr__(self, name):
            return getattr(self._pg, name)

    def start():
        pg, counters = real_start()
        return LosesCommit(pg), counters

    monkeypatch.setattr(canonical, "_start", start)
    monkeypatch.setattr(a.engine.cluster, "putconn", lambda pg, **kw: None)  # wrapped: dropped
    if committed:
        rec = a.remember(A, MemoryInput(content="committed, answer lost"))
        assert rec.memoryId in ids(a)
    else:
        with pytest.raises(StoreUnavailable, match="not stored"):
            a.remember(A, MemoryInput(content="rolled back, answer lost"))
        assert not ids(a)


def test_a_bulk_add_through_postgresql_costs_a_few_statements_per_batch(nodes, monkeypatch):
    """Each statement of a canonical write is a round trip to PostgreSQL: a bulk add runs a
    few per batch of records, never a few per record; a new node takes the stored vectors
    and embeds nothing."""
    from retrieval.pg.canonical import PgConn
    from retrieval.records import Record
    from tests.conftest import CountingEmbedder

    a = nodes("a")
    sent = []
    run = PgConn._run
    monkeypatch.setattr(PgConn, "_run", lambda self, st, many: sent.append(st) or run(
        self, st, many))  # fmt: skip
    recs = [Record(project_id="p", agent_id="agent-a", content=f"bulk note {i} on topic {i % 9}",
                   tags=[f"t{i % 3}"]) for i in range(200)]  # fmt: skip
    a.engine.add(recs)
    assert len(sent) < 40, [s.table for s in sent]
    counting = CountingEmbedder()
    c = nodes("c", embedder=lambda: counting)
    assert ids(c) == {r.id for r in recs}
    assert counting.documents == 0
    assert [h.record.id for h in c.engine.search("bulk note 17", k=5)] == [
        h.record.id for h in a.engine.search("bulk note 17", k=5)
    ]
