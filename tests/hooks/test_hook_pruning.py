"""A session start drops the ledgers (and episode detector states) of sessions idle for days,
at most once an hour: each pruning reads every session's row, which a daemon need not do for
every session that starts."""

from __future__ import annotations

import json
from datetime import timedelta

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.records import utcnow
from server.service.core.identity import Identity
from server.service.graphs.graph_services import graph_services
from server.service.learning.episode_feed import STATE_KEY
from server.service.memories.memory import MemoryService
from server.service.prompting.hook_context import HookConfig
from server.service.prompting.hook_events import HookRequest, HookService
from server.service.prompting.ledger import LEDGER_KEY

WHO = Identity(project_id="proj", agent_id="agent-1")


def stale(svc: MemoryService, session: str) -> None:
    """An idle session's ledger and detector state, last touched 30 days ago."""
    then = (utcnow() - timedelta(days=30)).isoformat()
    with svc.store.transaction() as conn:
        svc.store.set_meta(conn, LEDGER_KEY + session, json.dumps({"ids": ["x"], "at": then}))
        svc.store.set_meta(conn, STATE_KEY + session, json.dumps({"updated": then}))


def kept(svc: MemoryService, session: str) -> tuple[bool, bool]:
    return (svc.store.meta(LEDGER_KEY + session) is not None,
            svc.store.meta(STATE_KEY + session) is not None)  # fmt: skip


def start(hooks: HookService, session: str, source: str = "startup") -> None:
    inp = {"session_id": session, "hook_event_name": "SessionStart", "source": source}
    hooks.handle(WHO, HookRequest(event="SessionStart", input=inp, config=HookConfig()))


def test_a_session_start_prunes_idle_sessions_at_most_once_an_hour(tmp_path):
    now = [utcnow()]
    svc = MemoryService(Engine(tmp_path / "store", HashEmbedder()), clock=lambda: now[0])
    hooks = HookService(svc, graph_services(svc))
    try:
        stale(svc, "idle-1")
        with svc.store.transaction() as conn:  # a session active today
            svc.store.set_meta(conn, LEDGER_KEY + "today",
                               json.dumps({"ids": [], "at": utcnow().isoformat()}))  # fmt: skip
        start(hooks, "s1")
        assert kept(svc, "idle-1") == (False, False)
        assert svc.store.meta(LEDGER_KEY + "today") is not None
        stale(svc, "idle-2")
        now[0] += timedelta(minutes=59)
        start(hooks, "s2")
        assert kept(svc, "idle-2") == (True, True)  # pruned 59 minutes ago: not again yet
        now[0] += timedelta(minutes=2)
        start(hooks, "s3", source="resume")  # only a new session prunes
        assert kept(svc, "idle-2") == (True, True)
        start(hooks, "s4")
        assert kept(svc, "idle-2") == (False, False)
    finally:
        hooks.close()
        svc.engine.close()
