"""``pattern_health`` names a clock that reads earlier than the store's latest changes (it
was set back): a real store, the service's clock moved by hand."""

from __future__ import annotations

from datetime import UTC, datetime

from server.service.core.identity import Identity
from server.service.core.maintenance import CLOCK_SLACK_S, health
from tests.mcp_util import FakeClock, clocked_service

WHO = Identity(project_id="proj", agent_id="agent")


def _clock_issues(svc) -> list[str]:
    return [i for i in health(svc, WHO).issues if "clock" in i]


def test_health_names_a_clock_set_back(tmp_path, make_record):
    clock = FakeClock(datetime.now(UTC))
    svc = clocked_service(tmp_path, clock)
    try:
        assert _clock_issues(svc) == []  # an empty store: nothing to hold it against
        svc.engine.add([make_record("written at the real time")])  # the change log's time
        assert _clock_issues(svc) == []
        clock.advance(seconds=-CLOCK_SLACK_S / 2)  # skew, not a step
        assert _clock_issues(svc) == []
        clock.advance(days=-2)
        (issue,) = _clock_issues(svc)
        assert (
            issue.startswith("the clock is 172,8") and "behind the store's latest change" in issue
        )
        clock.advance(days=2, seconds=CLOCK_SLACK_S)  # put right
        assert _clock_issues(svc) == []
    finally:
        svc.engine.close()
