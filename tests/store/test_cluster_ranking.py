"""Every node of a PostgreSQL cluster ranks alike: the same query, asked at the same instant,
gets the same records in the same order with the same scores from the node that wrote them,
a node that followed the log, and a node that joined later from a snapshot, also where
candidates tie, where update links decide the order and where the query names a time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.records import Record, RecordFilter
from retrieval.storage.buckets import Scope
from retrieval.timeline import links
from server.service.core.identity import Identity
from server.service.core.models import MemoryInput, RecallInput
from server.service.memories.memory import MemoryService
from server.service.recalling.recall import recall

A = Identity(project_id="p", agent_id="agent-a")
B = Identity(project_id="p", agent_id="agent-b")
NOW = datetime(2026, 3, 20, 15, 0, tzinfo=UTC)

QUERIES = (
    "cache size",
    "cache size of the build",
    "what was the cache size last week",
    "what is the cache size now",
    "deploy freeze yesterday",
    "when did the deploy freeze start",
    "what happened on March 12",
    "retry budget for webhooks",
    "webhooks",  # only the tied records hold it
    "quartz zebra lantern",  # no record holds these words: the vector side alone
)


class Clock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


@pytest.fixture
def url(new_pg_database) -> str:
    return new_pg_database()


@pytest.fixture
def cluster(tmp_path, url):
    """Factory: ``node(name, clock)`` -> a MemoryService on its own folder, same database."""
    opened: list[MemoryService] = []

    def node(name: str, clock: Clock) -> MemoryService:
        svc = MemoryService(Engine(tmp_path / name, HashEmbedder(), store_url=url), clock=clock)
        opened.append(svc)
        return svc

    yield node
    for svc in opened:
        svc.engine.close()


def ranking(svc: MemoryService, query: str) -> list[tuple[str, float]]:
    f = RecordFilter(now=NOW, include_expired=False)
    return [(h.record.id, h.score) for h in svc.engine.search(query, f, k=10)]


def recalled(svc: MemoryService, who: Identity, query: str) -> list[tuple[str, float]]:
    got = recall(svc, who, RecallInput(query=query, limit=10))
    return [(i.id, i.score) for i in got.items]


def test_every_node_ranks_ties_links_and_time_phrases_alike(cluster):
    clock = Clock(NOW - timedelta(days=12))
    a = cluster("a", clock)
    b = cluster("b", clock)  # follows the log while a and b write

    def write(svc, who, content, days_ago, **kw):
        clock.at = NOW - timedelta(days=days_ago)
        item = MemoryInput(content=content, scope="team", category="decisions", **kw)
        return svc.remember(who, item).memoryId

    old = write(a, A, "The build cache size is 512 MB.", 9)
    # the same sentence again and again: candidates that tie on every score. Their ids are
    # made where they are written, before the commit: two hosts commit them in another order
    # than their ids sort (here: made first, committed last)
    made = [Record(project_id="p", agent_id=("agent-a", "agent-b")[i % 2], scope=Scope.team,
                   category="decisions", content="Webhooks retry budget: 5 attempts.",
                   created_at=NOW - timedelta(days=8 - i), updated_at=NOW - timedelta(days=8 - i))
            for i in range(6)]  # fmt: skip
    for i, rec in reversed(list(enumerate(made))):
        (a, b)[i % 2].engine.add([rec])
    tied = [r.id for r in made]
    a.forget(A, tied.pop(0))  # its place in a's vector index is taken by the next ones
    for i in range(2):
        tied.append(write((a, b)[i], (A, B)[i], "Webhooks retry budget: 5 attempts.", 2))
    write(b, B, "The deploy freeze starts today, until the release is out.", 1)
    write(a, A, "On March 12 the deploy freeze was lifted early.", 8)
    new = write(b, B, "The build cache size is now 1 GB.", 3, supersedes=[old])
    write(a, A, "The cache of the test runner is separate from the build cache.", 5)
    clock.at = NOW

    b.store.catch_up()
    assert links.updaters(a.store.reader, [old])[old].id == new
    a.engine.cluster.compact_log(before_seq=a.engine.cluster.head() + 1)
    c = cluster("c", clock)  # joins later: a snapshot, nothing embedded again
    assert c.engine.cluster.replica.rebuilds == 1
    for svc in (a, b, c):
        svc.engine.sync()

    for q in QUERIES:
        want = ranking(a, q)
        assert want, q
        assert ranking(b, q) == want, q
        assert ranking(c, q) == want, q
        assert recalled(b, A, q) == recalled(a, A, q) == recalled(c, A, q), q
    # ties are broken by record id, never by the order an index returned them in
    for q in ("webhooks", "quartz zebra lantern"):
        order = [rid for rid, _ in ranking(c, q) if rid in tied]
        assert order and order == sorted(tied)[: len(order)], q
    # the update link decides the order on every node: the current record first
    for svc in (a, b, c):
        top = [rid for rid, _ in ranking(svc, "cache size")]
        assert top.index(new) < top.index(old)


def test_a_link_an_earlier_version_made_is_a_candidate_pair_on_every_node(tmp_path, url):
    """A cluster written by a version that made links by itself: the store that opens it now
    turns them into candidate pairs in PostgreSQL too, so a node joining later ranks from the
    same rows as the others."""
    import psycopg

    clock = Clock(NOW)
    a = MemoryService(Engine(tmp_path / "a", HashEmbedder(), store_url=url), clock=clock)
    older = a.remember(A, MemoryInput(content="The staging database is on port 5432.",
                                      scope="team")).memoryId  # fmt: skip
    newer = a.remember(A, MemoryInput(content="The staging database is on port 6432.",
                                      scope="team")).memoryId  # fmt: skip
    rec = a.store.get_one(newer)
    with a.store.transaction() as conn:  # as the earlier version wrote it, everywhere
        links.write(conn, older, newer, rec.bucket, "detected", "update-detector")
    a.engine.close()
    with psycopg.connect(url, autocommit=True) as pg:  # the cluster's schema before the step
        pg.execute("UPDATE pm_cluster SET value = '14' WHERE key = 'schema'")
    import sqlite3

    local = sqlite3.connect(tmp_path / "a" / "pattern.sqlite3")
    local.execute("PRAGMA user_version = 14")
    local.close()

    a = MemoryService(Engine(tmp_path / "a", HashEmbedder(), store_url=url), clock=clock)
    c = MemoryService(Engine(tmp_path / "c", HashEmbedder(), store_url=url), clock=clock)
    try:
        with psycopg.connect(url) as pg:
            hows = [r[0] for r in pg.execute("SELECT how FROM record_links")]
        assert hows == [links.CANDIDATE]
        for svc in (a, c):
            assert links.updaters(svc.store.reader, [older]) == {}
            assert [p.older for p in links.pairs(svc.store.reader, [older, newer])] == [older]
        for q in ("staging database port", "which port is the staging database on"):
            assert ranking(c, q) == ranking(a, q)
    finally:
        a.engine.close()
        c.engine.close()
