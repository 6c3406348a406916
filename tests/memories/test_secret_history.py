"""Removing a secret from a memory removes it from the memory's kept versions too.

Under the default ``warn`` policy a secret is stored (with a warning). An update whose new
version no longer holds it redacts it from every kept version of the memory
(``record_revisions``, the bases of three-way merges), so neither the history nor a
conflict's ``base`` gives it back; a secret the new version still holds stays where it is.
Real SQLite (and PostgreSQL) in ``tmp_path``.
"""

from __future__ import annotations

import json

import pytest

from server.service.core.errors import Conflict
from server.service.core.identity import Identity
from server.service.core.models import MemoryInput
from server.service.memories.memory import MemoryService

pytestmark = pytest.mark.backends("sqlite", "postgres")

ME = Identity(project_id="proj", agent_id="agent-a")
# a GitHub token shape (split so this file holds no literal token)
SECRET = "gh" + "p_" + "Xq7Lm2Vt9RkP4sWz8NbC3dF6gH1jK5yTnQ0a"
REDACTED = "[REDACTED:github_token]"
LEAKY = f"The deploy bot authenticates with {SECRET} (rotate it monthly). Owners: ops."
CLEANED = "The deploy bot authenticates with the vault token (rotate it monthly). Owners: ops."


@pytest.fixture
def svc(engine) -> MemoryService:
    return MemoryService(engine)  # the default write policy: secrets warn


def history(svc: MemoryService, mid: str) -> list[tuple[int, str, dict]]:
    rows = svc.store.reader.execute(
        "SELECT revision, content, metadata FROM record_revisions WHERE record_id=? "
        "ORDER BY revision",
        (mid,),
    ).fetchall()
    return [(r[0], r[1], json.loads(r[2])) for r in rows]


def test_an_update_that_removes_a_secret_redacts_it_from_the_history(svc):
    res = svc.remember(ME, MemoryInput(content=LEAKY, metadata={"source": f"{SECRET} notes"}))
    assert res.warnings  # warn: stored, with a warning
    mid = res.memoryId
    svc.update_memory(ME, mid, content=LEAKY.replace("ops", "ops and sre"))
    kept = history(svc, mid)
    assert [r for r, _, _ in kept] == [1, 2] and SECRET in json.dumps(kept)  # still held
    svc.update_memory(ME, mid, content=CLEANED, metadata={"source": "notes"})
    kept = history(svc, mid)
    assert [r for r, _, _ in kept] == [1, 2, 3]  # every version is kept, redacted
    assert SECRET not in json.dumps(kept)
    assert kept[0][1] == LEAKY.replace(SECRET, REDACTED)
    assert kept[0][2]["source"] == f"{REDACTED} notes"
    assert kept[2][1] == CLEANED


def test_a_stale_overlapping_update_never_returns_a_removed_secret(svc):
    mid = svc.remember(ME, MemoryInput(content=LEAKY)).memoryId
    svc.update_memory(ME, mid, content=CLEANED, expected_revision=1)
    with pytest.raises(Conflict) as info:  # made from revision 1, over the same words
        svc.update_memory(ME, mid, content=LEAKY.replace(SECRET, "a key in the wiki"),
                          expected_revision=1)  # fmt: skip
    data = info.value.data
    assert data["reason"] == "overlapping_edits"
    assert SECRET not in json.dumps(info.value.to_dict())
    assert data["base"] == LEAKY.replace(SECRET, REDACTED)
    # an edit elsewhere from the same stale read still merges, without the secret
    res = svc.update_memory(ME, mid, metadata={"priority": 1}, expected_revision=1)
    stored = svc.store.get_one(mid)
    assert res.merged and stored.content == CLEANED and stored.priority == 1


def test_a_base_kept_from_before_never_returns_a_secret_the_memory_no_longer_holds(svc):
    """A version kept before its secret was removed (an older store, or scanning turned off
    at the time) is redacted when a conflict would show it."""
    mid = svc.remember(ME, MemoryInput(content=CLEANED)).memoryId
    svc.update_memory(ME, mid, content=CLEANED.replace("vault", "shared vault"))
    with svc.store.transaction() as conn:
        conn.execute(
            "UPDATE record_revisions SET content=? WHERE record_id=? AND revision=1", (LEAKY, mid)
        )
    with pytest.raises(Conflict) as info:
        svc.update_memory(ME, mid, content=LEAKY.replace(SECRET, "the team vault token"),
                          expected_revision=1)  # fmt: skip
    assert SECRET not in json.dumps(info.value.data["base"])
    assert info.value.data["base"] == LEAKY.replace(SECRET, REDACTED)
