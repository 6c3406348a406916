"""A write whose JSON holds secrets as keys (an environment map keyed by a token, a lesson's
``environment``): the keys are redacted, and two keys that redact alike both keep their values
(the second replaced the first while the write reported success)."""

from __future__ import annotations

import pytest

from server.service.core.identity import Identity
from server.service.core.models import MemoryInput
from server.service.graphs.graph_services import graph_services
from server.service.memories.memory import MemoryService
from server.service.trust.policy import WritePolicy
from server.service.trust.secret_scan.secrets import SecretPolicy

GHP = "ghp_" + "Xq7Lm2Vt9RkP4sWz8NbC3dF6gH1jK5yTnQ0a"
OTHER = "ghp_" + "Lm2Vt9RkP4sWz8NbC3dF6gH1jK5yTnQ0aXq7"
ME = Identity(project_id="proj", agent_id="agent-a")
KEYED = {GHP: "first value", OTHER: "second value", "plain": "third value"}


@pytest.fixture
def svc(open_engine) -> MemoryService:
    from retrieval.embedding.embedder import HashEmbedder

    return MemoryService(open_engine(HashEmbedder()),
                         policy=WritePolicy(secrets=SecretPolicy.redact))  # fmt: skip


def kept(value: dict) -> None:
    assert GHP not in repr(value) and OTHER not in repr(value)
    assert sorted(value.values()) == ["first value", "second value", "third value"]


def test_a_lessons_environment_keyed_by_tokens_keeps_every_value(svc):
    lessons = graph_services(svc).lessons
    lessons.create_lesson(ME, {
        "name": "NoCredentialsError-upload", "entityType": "lesson", "observations": ["x"],
        "errorPattern": {"type": "NoCredentialsError", "message": "Unable to locate credentials",
                         "context": "tests/test_upload.py"},
        "metadata": {"severity": "low", "frequency": 1, "successRate": 1.0,
                     "environment": dict(KEYED)},
        "verificationSteps": [],
    }, "team")  # fmt: skip
    [lesson] = lessons.all_lessons(ME.bucket("team"))
    kept(lesson.metadata.environment)


def test_a_memorys_metadata_keyed_by_tokens_keeps_every_value(svc):
    res = svc.remember(ME, MemoryInput(content="ordinary text", scope="team",
                                       metadata={"env": dict(KEYED)}))  # fmt: skip
    kept(svc.store.get([res.memoryId])[res.memoryId].metadata["env"])


@pytest.mark.parametrize("policy", [SecretPolicy.warn, SecretPolicy.redact])
def test_a_warning_about_a_value_under_a_secret_key_names_the_key_redacted(policy):
    value = {"env": {GHP: "password = 'Zq8#wLp2!vR'"}}
    _out, warnings, _reason = WritePolicy(secrets=policy).screen_value(value, "metadata")
    assert len(warnings) == 2 and any("[REDACTED:" in w for w in warnings)
    assert not any(GHP in w or GHP[:12] in w for w in warnings)
