"""The client's model as the judge of a write's candidates, when its client never answers: one
write spends at most the judge's time for a write (``update_judge.TOTAL_S``) however many
observations of an ``add_observations`` call list candidates, and each candidate it could not
judge stays listed."""

from __future__ import annotations

import sys
import time

import anyio
import pytest
from anyio.from_thread import start_blocking_portal
from mcp import Client, types

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from server.mcp.app import create_server
from server.service.memories.memory import MemoryService
from server.service.updating import update_judge
from tests.mcp_util import FakeClock, SyncClient, identity_env, runtime_on

OLD = "The payments queue runs on RabbitMQ in the eu-west cluster."
NEW = "We moved the payments queue from RabbitMQ to SQS"
ADDED = 6


class SilentSamplingClient(SyncClient):
    """The official client, declaring sampling, whose model never answers."""

    def __init__(self, target) -> None:
        self.asked: list[float] = []

        async def sample(context, params: types.CreateMessageRequestParams):
            self.asked.append(time.monotonic())
            await anyio.sleep_forever()

        self._portal_cm = start_blocking_portal()
        self.portal = self._portal_cm.__enter__()
        try:
            self._client_cm = self.portal.wrap_async_context_manager(
                Client(target, read_timeout_seconds=60, sampling_callback=sample, mode="legacy")
            )
            self.client = self._client_cm.__enter__()
        except BaseException:
            self._portal_cm.__exit__(*sys.exc_info())
            raise


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setattr(update_judge, "TIMEOUT_S", 0.3)
    monkeypatch.setattr(update_judge, "TOTAL_S", 0.6)
    clock = FakeClock()
    svc = MemoryService(Engine(tmp_path / "store", HashEmbedder()), clock=clock)
    yield svc, clock, tmp_path
    svc.engine.close()


def test_add_observations_spends_the_judges_time_once_for_the_whole_call(env):
    svc, clock, tmp = env
    rt = runtime_on(
        svc,
        {**identity_env(tmp / "store", "proj", "agent-a"), "PATTERN_UPDATE_JUDGE": "sampling"},
        tmp,
    )
    client = SilentSamplingClient(create_server(runtime=rt))
    with client as c:
        c.ok("create_entities", {"entities": [
            {"name": "payments-queue", "entityType": "service", "observations": [OLD]}]})  # fmt: skip
        clock.advance(days=1)
        added = c.ok("add_observations", {"observations": [{
            "entityName": "payments-queue",
            "contents": [f"{NEW} in week {i}." for i in range(ADDED)]}]})  # fmt: skip
    groups = added["candidates"]
    assert len(groups) == ADDED  # every candidate the judge did not answer stays listed
    budget = update_judge.TOTAL_S / update_judge.TIMEOUT_S + 1
    assert len(client.asked) <= budget, (len(client.asked), budget)
