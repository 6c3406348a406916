"""Merge, don't reject, through a real MCP client session: what an agent sees when its
update-memory or delete_observations was made from a stale revision."""

from __future__ import annotations

import json

import pytest

from tests.mcp_util import hash_store_client

TEXT = "Releases are cut on Mondays. The changelog lives in CHANGES.md. Tags are signed."


@pytest.fixture
def client(tmp_path):
    with hash_store_client(tmp_path) as c:
        yield c


def remember(client) -> str:
    out = client.ok("remember", {"content": TEXT, "scope": "team", "category": "decisions",
                                 "metadata": {"tags": ["release"]}})  # fmt: skip
    return out["memoryId"]


def test_a_disjoint_stale_update_merges(client):
    mid = remember(client)
    client.ok("update-memory", {"memoryId": mid, "expectedRevision": 1,
                                "content": TEXT.replace("Mondays", "Tuesdays"),
                                "metadata": {"tags": ["release", "calendar"]}})  # fmt: skip
    out = client.ok("update-memory", {"memoryId": mid, "expectedRevision": 1,
                                      "content": TEXT.replace("signed.", "signed with GPG."),
                                      "metadata": {"tags": ["release", "gpg"]}})  # fmt: skip
    assert out["merged"] is True and out["parents"] == [2, 1] and out["revision"] == 3
    mem = client.ok("recall-context", {"scopes": ["team"]})
    text = json.dumps(mem)
    assert "Tuesdays" in text and "signed with GPG." in text
    page = client.ok("changes", {"cursor": 0})
    last = page["changes"][-1]
    assert last["merged"] is True and last["parents"] == [2, 1]
    assert last["record"]["metadata"]["tags"] == ["release", "calendar", "gpg"]


def test_overlapping_edits_are_a_conflict_the_agent_resolves_in_one_call(client):
    mid = remember(client)
    client.ok("update-memory", {"memoryId": mid, "expectedRevision": 1,
                                "content": TEXT.replace("Mondays", "Tuesdays")})  # fmt: skip
    err = client.error("update-memory", {"memoryId": mid, "expectedRevision": 1,
                                         "content": TEXT.replace("Mondays", "Fridays")})  # fmt: skip
    assert "[conflict]" in err and "expectedRevision=2" in err
    data = json.loads(err[err.index("{") :])
    assert data["reason"] == "overlapping_edits" and data["current_revision"] == 2
    assert "<<<<<<< yours\nFridays. \n=======\nTuesdays. \n>>>>>>> current\n" in data["merge"]
    assert data["current"] == TEXT.replace("Mondays", "Tuesdays")
    assert data["yours"] == TEXT.replace("Mondays", "Fridays")
    out = client.ok("update-memory", {"memoryId": mid, "expectedRevision": data["current_revision"],
                                      "content": data["yours"]})  # fmt: skip
    assert out["revision"] == 3 and out["merged"] is False


def test_delete_observations_keeps_what_the_deleter_did_not_see(client):
    client.ok("create_entities", {"entities": [
        {"name": "ReleaseBot", "entityType": "service", "observations": ["runs nightly"]}]})  # fmt: skip
    seen = client.ok("open_nodes", {"names": ["ReleaseBot"]})["entities"][0]
    assert seen["revision"] == 0
    added = client.ok("add_observations", {"observations": [
        {"entityName": "ReleaseBot", "contents": ["runs hourly"]}]})  # fmt: skip
    assert added["results"][0]["revision"] == 1
    out = client.ok("delete_observations", {"deletions": [
        {"entityName": "ReleaseBot", "observations": ["runs nightly", "runs hourly"],
         "expectedRevision": seen["revision"]}]})  # fmt: skip
    assert out["deleted"] == 1
    assert out["kept"] == [
        {"entityName": "ReleaseBot", "observations": ["runs hourly"], "expectedRevision": None}
    ]
    node = client.ok("open_nodes", {"names": ["ReleaseBot"]})["entities"][0]
    assert node["observations"] == ["runs hourly"] and node["revision"] == 2
