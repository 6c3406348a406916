"""No write links anything by itself (the packaged model, a real MCP client): distinct project
facts and the README's paragraphs remembered one by one in quick succession, and pairs of two
true facts about one subject, quickly and a day apart, leave no link; a pair a day apart is
listed as a candidate, and stays as it is unless someone calls ``supersede``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval.engine import Engine
from server.service.core.demo import paragraphs
from server.service.memories.memory import MemoryService
from tests.mcp_util import FakeClock, identity_env, in_process, runtime_on

ROOT = Path(__file__).resolve().parents[2]
CASES = json.loads((ROOT / "benchmarks/data/update_review_cases.json").read_text("utf-8"))


@pytest.fixture
def world(tmp_path, real_embedder):
    clock = FakeClock()
    svc = MemoryService(Engine(tmp_path / "store", real_embedder), clock=clock)
    yield svc, clock, tmp_path
    svc.engine.close()


def links(svc) -> int:
    return svc.store.reader.execute(
        "SELECT count(*) FROM record_links WHERE how != 'candidate'"
    ).fetchone()[0]


def test_facts_and_the_readme_remembered_one_by_one_make_no_link(world):
    svc, clock, tmp = world
    rt = runtime_on(svc, identity_env(tmp / "store", "shop", "agent-a"), tmp)
    readme = paragraphs((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(readme) > 30
    with in_process(rt) as c:
        for text in [*CASES["facts"], *(p[:30000] for p in readme)]:
            clock.advance(seconds=1)
            res = c.ok("remember", {"content": text, "scope": "team", "category": "architecture"})
            assert res["supersedes"] == []
        out = c.ok("recall", {"query": "how often is the staging database refreshed", "limit": 3})
        assert out["items"][0]["content"] == CASES["facts"][0]
        assert "updated by" not in out["text"]
    assert links(svc) == 0


def test_two_true_facts_about_one_subject_are_listed_a_day_apart_never_linked(world):
    svc, clock, tmp = world
    listed = 0
    for i, (first, second) in enumerate(CASES["same_subject_pairs"]):
        rt = runtime_on(svc, identity_env(tmp / "store", "shop", f"agent-{i}"), tmp)
        with in_process(rt) as c:
            a = c.ok("remember", {"content": first})["memoryId"]
            clock.advance(seconds=1)
            assert "candidates" not in c.ok("remember", {"content": second})  # same sitting
            clock.advance(days=1)
            res = c.ok("remember", {"content": second + " Still true."})
            assert res["supersedes"] == []
            listed += any(line.startswith(a) for line in res.get("candidates", []))
            out = c.ok("recall", {"query": first.rstrip(".") + "?", "limit": 3})
            assert "updated by" not in out["text"]
    assert links(svc) == 0
    assert listed >= 5  # the pairs are listed for the agent to judge
