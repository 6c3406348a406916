"""The hooks' selection code in-process: relevance, referring back, ledger, framing, packing."""

from __future__ import annotations

import json
from datetime import timedelta

from retrieval.records import Explanation, Hit, Kind, Record, Scope, utcnow
from server.service import autorecall as ar
from server.service.identity import Identity
from server.service.ledger import LEDGER_KEY, Ledger, prune_ledgers
from server.service.memory import MemoryService

WHO = Identity(project_id="proj", agent_id="agent-1")


def hit(cos, bm25) -> Hit:
    rec = Record(project_id="p", agent_id="a", content="x")
    return Hit(record=rec, score=0.5, explanation=Explanation(vector_similarity=cos,
                                                              lexical_score=bm25))  # fmt: skip


def test_relevance_is_absolute_and_works_lexically_while_the_model_loads():
    assert ar.relevance(hit(0.6, None)) == 0.6
    assert abs(ar.relevance(hit(0.6, 10.0)) - (0.6 + 0.4 * (1 - 2.718281828**-1))) < 1e-6
    assert ar.relevance(hit(None, 0.0)) == 0.0
    assert ar.relevance(hit(None, 30.0)) > ar.relevance(hit(None, 5.0)) > 0
    assert ar.relevance(hit(None, 1e9)) <= ar.LEXICAL_ONLY_SCALE


def test_refers_back():
    for p in ("yes, do that", "ok go ahead", "same for the other one", "continue", "no", "sure"):
        assert ar.refers_back(p), p
    for p in ("fix the failing login test in auth/test_login.py",
              "how do we deploy the billing service to staging next week?"):  # fmt: skip
        assert not ar.refers_back(p), p


def test_ledger_add_reset_compacted_and_prune(engine):
    svc = MemoryService(engine)
    led = Ledger(svc, "s1")
    led.add(["a", "b"])
    other = Ledger(svc, "s1")  # a second hook of the same session sees them
    assert other.seen == {"a", "b"}
    other.add(["c"])
    led.add(["d"])  # re-read inside the write: c is kept
    assert Ledger(svc, "s1").ids == ["a", "b", "c", "d"]
    led.set_compacted(12)
    led.reset()
    fresh = Ledger(svc, "s1")
    assert fresh.ids == [] and fresh.compacted == 12
    Ledger(svc, "old").add(["x"])
    old = json.loads(svc.store.meta(LEDGER_KEY + "old"))
    old["at"] = (utcnow() - timedelta(days=30)).isoformat()
    with svc.store.transaction() as conn:
        svc.store.set_meta(conn, LEDGER_KEY + "old", json.dumps(old))
    assert prune_ledgers(svc) == 1
    assert svc.store.meta(LEDGER_KEY + "old") is None and svc.store.meta(LEDGER_KEY + "s1")


def turn(n: int, session: str, text: str) -> Record:
    return Record(kind=Kind.turn, project_id=WHO.project_id, agent_id=WHO.agent_id,
                  scope=Scope.private, category="turn", content=text,
                  metadata={"session": session, "role": "user", "turn": n})  # fmt: skip


def test_own_session_turns_wait_for_compaction(engine):
    svc = MemoryService(engine)
    engine.add([turn(0, "s1", "the flaky test is test_refund_race"),
                turn(1, "s1", "the flaky test also hits test_refund_race locks")])  # fmt: skip
    cfg = ar.HookConfig(threshold=0.0)
    led = Ledger(svc, "s1")
    q = "which test is flaky test_refund_race"
    assert ar.select_for_prompt(svc, WHO, q, config=cfg, ledger=led, session="s1").picked == []
    assert len(ar.select_for_prompt(svc, WHO, q, config=cfg, session="s2").picked) == 2
    led.set_compacted(1)  # the first turn left the client's context
    sel = ar.select_for_prompt(svc, WHO, q, config=cfg, ledger=Ledger(svc, "s1"), session="s1")
    assert [p.record.metadata["turn"] for p in sel.picked] == [0]


def test_frame_quotes_every_line_with_provenance(engine):
    rec = Record(project_id="p", agent_id="bob", scope=Scope.team, category="decisions",
                 content="use postgres\\nnot mongo")  # fmt: skip
    text = ar.frame([(rec, "use postgres\nnot mongo\n\nend")])
    lines = text.splitlines()
    assert lines[0] == ar.FRAME_HEADER
    assert lines[1].startswith("- [memory decisions · team · by bob · ")
    assert lines[2:] == ["  > use postgres", "  > not mongo", "  >", "  > end"]


def test_pack_respects_the_budget():
    recs = [Record(project_id="p", agent_id="a", content="x" * 900) for _ in range(5)]
    kept = ar._pack([(r, r.content) for r in recs], 400)
    text = ar.frame(kept)
    assert len(text) <= 400 * ar.CHARS_PER_TOKEN and 1 <= len(kept) < 5
    assert kept[-1][1].endswith("…") or len(kept[-1][1]) == 900


def test_suspicious_records_are_never_selected(engine):
    svc = MemoryService(engine)
    bad = Record(project_id=WHO.project_id, agent_id=WHO.agent_id, content="deploy with make deploy",
                 metadata={"suspicious": "instruction to the model"})  # fmt: skip
    good = Record(project_id=WHO.project_id, agent_id=WHO.agent_id, content="deploy runs helm")
    engine.add([bad, good])
    sel = ar.select_for_prompt(svc, WHO, "deploy", config=ar.HookConfig(threshold=0.0))
    assert [p.record.id for p in sel.picked] == [good.id]
    assert ar.briefing(svc, WHO).picked == []  # neither is core, a task or a decision
