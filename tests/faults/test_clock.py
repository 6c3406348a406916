"""The daemon's wall clock steps back two days while it runs (tests/faults/shim shifts what
``time.time`` and ``datetime.now`` return in the daemon's processes; the machine's clock is
left alone): writes are acknowledged and kept, ids still sort in write order, the change stream
stays in commit order, a memory's TTL is not cut short, and health names the clock."""

from __future__ import annotations

import pytest

from tests.faults.harness import issues_naming

pytestmark = pytest.mark.slow

DEADLINE = 3.5
TWO_DAYS = 2 * 86_400


def test_a_clock_step_back(tmp_path, daemon_at):
    clock = tmp_path / "clock-offset"
    clock.write_text("0")
    env = {"FAULTS_CLOCK_FILE": str(clock), "PATTERN_EMBEDDER": "none"}  # lexical is enough
    d = daemon_at(tmp_path / "home", env).start()
    recent = d.ok("remember", {"content": "the staging database is being restored today",
                               "scope": "private", "category": "recent"})  # fmt: skip
    before = d.remember("the release train leaves on Thursdays")
    assert not issues_naming(d.health(), "clock")
    clock.write_text(str(-TWO_DAYS))  # the step
    after = d.remember("the release train now leaves on Wednesdays")
    assert after > before  # ids still sort in write order (time-ordered, never backwards)

    issues = d.health()["issues"]
    assert [i for i in issues if "the clock is 172,8" in i and "behind" in i], issues
    ids = {i["id"] for i in d.recall("release train leaves", DEADLINE)["items"]}
    assert {before, after} <= ids
    # the recent memory (24 h TTL) is not expired by the step, nor lost
    seen = d.ok("recall-context", {"scopes": ["private"], "categories": ["recent"]})
    assert [m["id"] for m in seen["private"]] == [recent["memoryId"]]
    # the change stream: every change, in commit order, whatever their times say
    page = d.ok("changes", {"cursor": 0, "includeRecords": False})
    got = [(c["record_id"], c["seq"]) for c in page["changes"]]
    assert [rid for rid, _ in got] == [recent["memoryId"], before, after]
    assert [s for _, s in got] == sorted(s for _, s in got)
    assert page["changes"][2]["at"] < page["changes"][1]["at"]  # its time went back

    clock.write_text("0")  # the clock is put right
    assert not issues_naming(d.health(), "clock")
    assert d.stop() == 0
    d.start()
    assert {before, after} <= d.visible_ids()
    assert d.stop() == 0
