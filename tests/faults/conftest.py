"""The fault tests' daemons: made by ``daemon_at(home, env)``, every one killed at teardown
(a failed test must not leave a daemon running)."""

from __future__ import annotations

import pytest

from tests.faults.harness import Daemon


@pytest.fixture
def daemon_at():
    made: list[Daemon] = []

    def make(home, env: dict[str, str] | None = None) -> Daemon:
        made.append(Daemon(home, env))
        return made[-1]

    yield make
    for d in made:
        d.kill()
