"""A write no person asked for is screened at least as ``redact``, whatever the store's policy,
and its warnings are collected for review (``trust.policy.unattended``)."""

from __future__ import annotations

import threading

import pytest

from retrieval.errors import InvalidInput
from retrieval.records import Kind, Record, Scope
from server.service.trust.injection_scan.injection import InjectionPolicy
from server.service.trust.policy import WritePolicy, unattended
from server.service.trust.secret_scan.secrets import SecretPolicy

SECRET = "gh" + "p_" + "Xq7Lm2Vt9RkP4sWz8NbC3dF6gH1jK5yTnQ0a"
LEAKY = f"the deploy bot authenticates with {SECRET}"


def _record(text: str) -> Record:
    return Record(kind=Kind.memory, project_id="p", agent_id="a", scope=Scope.team,
                  category="learnings", content=text, metadata={"source": text})  # fmt: skip


@pytest.mark.parametrize("secrets", [SecretPolicy.warn, None])
def test_warn_and_off_become_redact_inside_an_unattended_write(secrets):
    policy = WritePolicy(secrets, InjectionPolicy.warn, detector=None)
    assert policy.screen_text(LEAKY)[0] == LEAKY  # a person's write: as the store says
    with unattended("test") as state:
        text, _ = policy.screen_text(LEAKY)
        rec, _ = policy(_record(LEAKY))
        value, _, _ = policy.screen_value({"diff": LEAKY})
        shown = policy.screen_state({"args": [LEAKY]})
    for out in (text, rec.content, rec.metadata["source"], value["diff"], shown["args"][0]):
        assert SECRET not in out and "[REDACTED:github_token]" in out
    assert state.source == "test" and any("github" in w for w in state.warnings)
    assert policy.screen_text(LEAKY)[0] == LEAKY  # the block ended: back to the store's policy


def test_block_stays_block_inside_an_unattended_write():
    policy = WritePolicy(SecretPolicy.block, InjectionPolicy.warn, detector=None)
    with unattended("test"), pytest.raises(InvalidInput):
        policy.screen_text(LEAKY)


def test_an_unattended_write_on_one_thread_leaves_the_others_alone():
    policy = WritePolicy(SecretPolicy.warn, InjectionPolicy.warn, detector=None)
    seen: list[str] = []
    inside, done = threading.Event(), threading.Event()

    def other() -> None:
        inside.wait(5)
        seen.append(policy.screen_text(LEAKY)[0])
        done.set()

    t = threading.Thread(target=other)
    t.start()
    with unattended("test"):
        inside.set()
        done.wait(5)
        assert SECRET not in policy.screen_text(LEAKY)[0]
    t.join(5)
    assert seen == [LEAKY]


def test_nested_blocks_share_the_outer_warnings():
    policy = WritePolicy(SecretPolicy.warn, InjectionPolicy.warn, detector=None)
    with unattended("outer") as outer:
        with unattended("inner") as inner:
            policy.screen_text(LEAKY)
    assert inner is outer and outer.warnings
