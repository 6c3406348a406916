"""The review inbox: share-learning proposes under PATTERN_TEAM_REVIEW; reviewers approve,
reject or edit-then-approve; proposals are durable; the MCP tools list-proposals and
review-proposal through real MCP client sessions against the daemon (tokens, envelope)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from server.service.browsing import review as rv
from server.service.core.errors import AccessDenied, Conflict, InvalidInput, NotFound
from server.service.core.identity import Identity
from server.service.core.models import MemoryInput
from server.service.memories.memory import MemoryService
from server.service.trust.secret_scan.secrets import SecretPolicy
from tests.mcp_util import FakeClock, SyncClient

ALICE = Identity(project_id="p1", agent_id="alice")
BOB = Identity(project_id="p1", agent_id="bob")  # token reviewer
OWNER = Identity(project_id="p1", agent_id="owner")
CAROL = Identity(project_id="p2", agent_id="carol")


def policy(setting: str = "on", reviewers=("bob",)) -> rv.ReviewPolicy:
    return rv.ReviewPolicy(setting, "owner", lambda: set(reviewers))


@pytest.fixture
def svc(tmp_path):
    s = MemoryService(Engine(tmp_path / "store", HashEmbedder()), clock=FakeClock())
    yield s
    s.engine.close()


def private(svc, who=ALICE, text="run the linter before pushing") -> str:
    return svc.remember(who, MemoryInput(content=text)).memoryId


def visible(svc, who) -> dict[str, object]:
    from retrieval.records import RecordFilter

    return {r.id: r for r in svc.store.list(RecordFilter(buckets=who.visible_buckets()))}


def test_setting_parses_on_off_and_project_lists():
    assert rv.parse_setting("on") is True and rv.parse_setting("ALL") is True
    assert rv.parse_setting("") is False and rv.parse_setting("off") is False
    assert rv.parse_setting(" p1, p3 ") == frozenset({"p1", "p3"})
    p = policy("p1,p3")
    assert p.enabled("p1") and p.enabled("p3") and not p.enabled("p2")


def test_share_without_review_moves_the_memory(svc):
    mid = private(svc)
    res = rv.share_learning(svc, policy("off"), ALICE, mid)
    assert res.status == "shared" and res.memoryId != mid
    assert svc.store.get([res.memoryId])[res.memoryId].scope.value == "team"
    assert not svc.store.get([mid])


def test_share_under_review_proposes_and_moves_nothing(svc):
    mid = private(svc)
    res = rv.share_learning(svc, policy(), ALICE, mid, "decisions")
    assert res.status == "proposed" and res.memoryId == mid and res.proposalId
    rec = svc.store.get([mid])[mid]
    assert rec.scope.value == "private" and rec.metadata["review"]["status"] == "pending"
    assert rec.revision == 2  # the proposal is an update of the memory (change stream)
    assert not [r for r in visible(svc, BOB).values() if r.scope.value == "team"]
    again = rv.share_learning(svc, policy(), ALICE, mid)  # proposed twice: one proposal
    assert again.proposalId == res.proposalId
    page = rv.list_proposals(svc, policy(), BOB)
    assert [p.id for p in page.proposals] == [res.proposalId] and page.canReview
    assert page.proposals[0].category == "decisions" and page.proposals[0].proposer == "alice"


def test_approve_moves_to_team_with_provenance(svc):
    mid = private(svc)
    pid = rv.share_learning(svc, policy(), ALICE, mid).proposalId
    res = rv.review_proposal(svc, policy(), BOB, pid, "approve", expected_revision=2)
    team = svc.store.get([res.memoryId])[res.memoryId]
    assert team.scope.value == "team" and team.agent_id == "alice"  # the author stays
    assert team.content == "run the linter before pushing"
    prov = team.metadata["review"]
    assert prov["status"] == "approved" and prov["proposer"] == "alice"
    assert prov["reviewer"] == "bob" and prov["reviewedAt"] and prov["edited"] is False
    assert team.metadata["sharedFrom"] == mid and not svc.store.get([mid])
    assert res.memoryId in visible(svc, CAROL.model_copy(update={"project_id": "p1"}))
    p = rv.get_proposal(svc, policy(), ALICE, pid)
    assert p.status == "approved" and p.sharedMemoryId == res.memoryId and p.reviewer == "bob"
    with pytest.raises(Conflict):  # decided once
        rv.review_proposal(svc, policy(), BOB, pid, "reject", reason="too late")


def test_edit_then_approve_uses_the_edited_text_and_category(svc):
    mid = private(svc)
    pid = rv.share_learning(svc, policy(), ALICE, mid, keep_original=True).proposalId
    res = rv.review_proposal(svc, policy(), OWNER, pid, "approve",
                             content="Run `make lint` before pushing.", category="decisions")  # fmt: skip
    team = svc.store.get([res.memoryId])[res.memoryId]
    assert team.content == "Run `make lint` before pushing." and team.category == "decisions"
    assert team.metadata["review"]["edited"] is True
    kept = svc.store.get([mid])[mid]  # keepOriginal: the private copy stays, marked
    assert kept.metadata["review"]["status"] == "approved"
    assert kept.metadata["review"]["sharedMemoryId"] == res.memoryId


def test_reject_keeps_the_memory_private_with_the_reason(svc):
    mid = private(svc)
    pid = rv.share_learning(svc, policy(), ALICE, mid).proposalId
    with pytest.raises(InvalidInput):
        rv.review_proposal(svc, policy(), BOB, pid, "reject", reason="  ")
    rv.review_proposal(svc, policy(), BOB, pid, "reject", reason="only true on your laptop")
    rec = svc.store.get([mid])[mid]
    assert rec.scope.value == "private"
    assert rec.metadata["review"] == {
        "status": "rejected", "reason": "only true on your laptop", "proposalId": pid,
        "reviewer": "bob", "reviewedAt": rec.metadata["review"]["reviewedAt"],
    }  # fmt: skip
    mine = rv.list_proposals(svc, policy(), ALICE, "rejected")
    assert [p.reason for p in mine.proposals] == ["only true on your laptop"]
    # it may be proposed again later (a new proposal)
    again = rv.share_learning(svc, policy(), ALICE, mid)
    assert again.proposalId != pid


def test_who_may_review(svc):
    pid = rv.share_learning(svc, policy(), ALICE, private(svc)).proposalId
    with pytest.raises(AccessDenied):  # the proposer is no reviewer
        rv.review_proposal(svc, policy(), ALICE, pid, "approve")
    with pytest.raises(NotFound):  # another project sees nothing of it
        rv.review_proposal(svc, policy(), CAROL, pid, "approve")
    outsider = Identity(project_id="p1", agent_id="dave")
    with pytest.raises(NotFound):  # nor does a non-reviewer who did not propose it
        rv.get_proposal(svc, policy(), outsider, pid)
    assert rv.list_proposals(svc, policy(), outsider).proposals == []
    sub = Identity(project_id="p1", agent_id="bob.helper", subagent_type="helper",
                   parent_agent_id="bob")  # fmt: skip
    with pytest.raises(NotFound):
        rv.review_proposal(svc, policy(), sub, pid, "approve")
    # a token reviewer does not approve its own proposal; the owner may approve its own
    own = rv.share_learning(svc, policy(), BOB, private(svc, BOB)).proposalId
    with pytest.raises(AccessDenied, match="own proposal"):
        rv.review_proposal(svc, policy(), BOB, own, "approve")
    mine = rv.share_learning(svc, policy(), OWNER, private(svc, OWNER)).proposalId
    assert rv.review_proposal(svc, policy(), OWNER, mine, "approve").proposal.status == "approved"


def test_approving_a_changed_memory_with_its_old_revision_conflicts(svc):
    mid = private(svc)
    pid = rv.share_learning(svc, policy(), ALICE, mid).proposalId
    read = rv.get_proposal(svc, policy(), BOB, pid).revision
    svc.update_memory(ALICE, mid, "run the linter AND the tests before pushing")
    with pytest.raises(Conflict) as err:
        rv.review_proposal(svc, policy(), BOB, pid, "approve", expected_revision=read)
    assert err.value.data["current_content"].startswith("run the linter AND")
    p = rv.get_proposal(svc, policy(), BOB, pid)
    assert p.status == "pending" and p.content.startswith("run the linter AND")  # live text
    res = rv.review_proposal(svc, policy(), BOB, pid, "approve", expected_revision=p.revision)
    assert svc.store.get([res.memoryId])[res.memoryId].content.startswith("run the linter AND")


def test_a_deleted_memory_closes_its_proposal(svc):
    mid = private(svc)
    pid = rv.share_learning(svc, policy(), ALICE, mid).proposalId
    svc.forget(ALICE, mid)
    with pytest.raises(NotFound, match="withdrawn"):
        rv.review_proposal(svc, policy(), BOB, pid, "approve")
    assert rv.get_proposal(svc, policy(), BOB, pid).status == "withdrawn"


def test_two_reviewers_at_once_one_wins(svc):
    pid = rv.share_learning(svc, policy(), ALICE, private(svc)).proposalId
    results, errors = [], []

    def go(who, decision):
        try:
            results.append(rv.review_proposal(svc, policy(), who, pid, decision, reason="no"))
        except Conflict as exc:
            errors.append(exc)

    threads = [threading.Thread(target=go, args=a) for a in ((BOB, "approve"), (OWNER, "reject"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 1 and len(errors) == 1
    teams = [r for r in visible(svc, BOB).values() if r.scope.value == "team"]
    assert len(teams) == (1 if results[0].proposal.status == "approved" else 0)


def test_idempotent_review_and_proposal(svc):
    mid = private(svc)
    a = rv.share_learning(svc, policy(), ALICE, mid, idempotency_key="k1")
    b = rv.share_learning(svc, policy(), ALICE, mid, idempotency_key="k1")
    assert a == b
    r1 = rv.review_proposal(svc, policy(), BOB, a.proposalId, "approve", idempotency_key="r1")
    r2 = rv.review_proposal(svc, policy(), BOB, a.proposalId, "approve", idempotency_key="r1")
    assert r1 == r2
    assert len([r for r in visible(svc, BOB).values() if r.scope.value == "team"]) == 1


def test_an_edited_text_passes_the_secret_policy(tmp_path):
    svc = MemoryService(Engine(tmp_path / "s", HashEmbedder()), secret_policy=SecretPolicy.block)
    try:
        pid = rv.share_learning(svc, policy(), ALICE, private(svc)).proposalId
        with pytest.raises(InvalidInput):
            rv.review_proposal(svc, policy(), BOB, pid, "approve",
                               content="deploy with " + "gh" + "p_" + "x7Kq2mZ9" * 4 + "aBcD")  # fmt: skip
        assert rv.get_proposal(svc, policy(), BOB, pid).status == "pending"
    finally:
        svc.engine.close()


def test_proposals_survive_a_restart(tmp_path):
    home = tmp_path / "store"
    svc = MemoryService(Engine(home, HashEmbedder()))
    pid = rv.share_learning(svc, policy(), ALICE, private(svc)).proposalId
    svc.engine.close()
    again = MemoryService(Engine(home, HashEmbedder()))
    try:
        assert rv.get_proposal(again, policy(), BOB, pid).status == "pending"
        rv.review_proposal(again, policy(), BOB, pid, "approve")
    finally:
        again.engine.close()


def test_list_pages_newest_first(svc):
    ids = [rv.share_learning(svc, policy(), ALICE, private(svc, text=f"note {i}")).proposalId
           for i in range(5)]  # fmt: skip
    svc.clock.advance(seconds=1)
    seen, cursor = [], None
    while True:
        page = rv.list_proposals(svc, policy(), BOB, "all", cursor, limit=2)
        seen += [p.id for p in page.proposals]
        cursor = page.nextCursor
        if cursor is None:
            break
    assert sorted(seen) == sorted(ids) and len(seen) == 5
    with pytest.raises(InvalidInput):
        rv.list_proposals(svc, policy(), BOB, "maybe")


# ---------------------------------------------------------------------- through MCP
def http_client(info: dict, headers: dict) -> SyncClient:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    client = httpx2.AsyncClient(headers=headers, timeout=60)
    return SyncClient(streamable_http_client(info["url"], http_client=client))


@pytest.fixture
def review_daemon(tmp_path):
    from server.http.auth import TokenStore, envelope_headers
    from server.http.daemon import read_info
    from tests.runtime.test_daemon import start_daemon, stop

    home: Path = tmp_path / "store"
    tokens = TokenStore(home)
    alice = tokens.create("alice", "p1")
    bob = tokens.create("bob", "p1", reviewer=True)
    procs = [start_daemon(home, env={"PATTERN_TEAM_REVIEW": "p1"})]
    clients: list[SyncClient] = []

    def connect(who: str, project: str = "p1") -> SyncClient:
        info = read_info(home)
        if who == "owner":
            headers = envelope_headers(OWNER.model_copy(update={"project_id": project}),
                                       info["secret"])  # fmt: skip
        else:
            headers = {"Authorization": f"Bearer {alice if who == 'alice' else bob}"}
        c = http_client(info, headers)
        clients.append(c)
        return c

    def restart() -> None:
        for c in clients:
            c.close()
        clients.clear()
        stop(procs[-1])
        procs.append(start_daemon(home, env={"PATTERN_TEAM_REVIEW": "p1"}))

    yield connect, restart
    for c in clients:
        c.close()
    stop(procs[-1])


def test_review_tools_through_mcp_sessions(review_daemon):
    connect, restart = review_daemon
    alice, bob, owner = connect("alice"), connect("bob"), connect("owner")
    tools = {t.name: t for t in alice.list_tools()}
    assert {"list-proposals", "review-proposal"} <= set(tools)
    assert "reviewer" in tools["review-proposal"].description

    mid = alice.ok("remember", {"content": "CI caches the wheelhouse per lockfile hash"})[
        "memoryId"
    ]
    shared = alice.ok("share-learning", {"memoryId": mid, "category": "architecture"})
    assert shared["status"] == "proposed"
    pid = shared["proposalId"]
    assert "[access_denied]" in alice.error(
        "review-proposal", {"proposalId": pid, "decision": "approve"}
    )
    mine = alice.ok("list-proposals", {})
    assert [p["id"] for p in mine["proposals"]] == [pid] and mine["canReview"] is False

    inbox = bob.ok("list-proposals", {})
    assert inbox["canReview"] and inbox["proposals"][0]["content"].startswith("CI caches")
    stale = bob.error("review-proposal", {"proposalId": pid, "decision": "approve",
                                          "expectedRevision": 1})  # fmt: skip
    assert "[conflict]" in stale and "CI caches the wheelhouse" in stale
    done = bob.ok("review-proposal", {"proposalId": pid, "decision": "approve",
                                      "expectedRevision": inbox["proposals"][0]["revision"]})  # fmt: skip
    team = alice.ok("recall-context", {"scopes": ["team"]})["team"]
    assert [m["id"] for m in team] == [done["memoryId"]]
    assert team[0]["metadata"]["review"]["reviewer"] == "bob"
    assert team[0]["metadata"]["review"]["proposer"] == "alice"
    assert alice.ok("recall-context", {"scopes": ["private"]})["private"] == []

    second = alice.ok("remember", {"content": "the staging DB is wiped every night"})["memoryId"]
    pid2 = alice.ok("share-learning", {"memoryId": second})["proposalId"]
    assert "[invalid_input]" in owner.error(
        "review-proposal", {"proposalId": pid2, "decision": "reject"}
    )
    owner.ok("review-proposal", {"proposalId": pid2, "decision": "reject",
                                 "reason": "not true since March"})  # fmt: skip
    kept = alice.ok("recall-context", {"scopes": ["private"]})["private"]
    assert kept[0]["metadata"]["review"]["reason"] == "not true since March"

    restart()  # proposals are durable
    bob = connect("bob")
    every = bob.ok("list-proposals", {"status": "all"})["proposals"]
    assert {p["id"]: p["status"] for p in every} == {pid: "approved", pid2: "rejected"}


def test_review_only_where_configured(review_daemon):
    """PATTERN_TEAM_REVIEW=p1: in p2 share-learning moves the memory at once."""
    connect, _ = review_daemon
    p2 = connect("owner", "p2")
    mid = p2.ok("remember", {"content": "p2 has no review"})["memoryId"]
    res = p2.ok("share-learning", {"memoryId": mid})
    assert res["status"] == "shared" and res["proposalId"] is None
    assert [m["id"] for m in p2.ok("recall-context", {"scopes": ["team"]})["team"]] == [
        res["memoryId"]
    ]
    p1 = connect("owner")
    mid = p1.ok("remember", {"content": "p1 is reviewed"})["memoryId"]
    assert p1.ok("share-learning", {"memoryId": mid})["status"] == "proposed"
