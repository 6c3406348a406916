"""Any error inside a ranking feature drops that feature, is logged once, and the query
answers: each feature of ``recall``, the prompt hook and ``hook-preview`` is made to raise (an
injected fault, one error type per feature) over a real store (SQLite, Chroma, the hash
embedder); every call still answers, the ordinary record is still found, and the log holds one
line for that feature and error however many records and queries met it."""

from __future__ import annotations

import logging

import pytest

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.ranking import guard
from retrieval.records import Kind, Record, Scope
from server.service.memories.memory import MemoryService
from server.service.prompting.hook_events import HookInput, HookRequest, HookService
from server.service.prompting.hook_preview import preview
from tests.mcp_util import identity_env, in_process, runtime_on

NORMAL = "The deploys moved to Fridays after the incident review with the payments team."
QUERIES = [
    "The deploys failed again yesterday on the release branch and the incident review of the "
    "payments team says the rollback took an hour; what did we change about the deploys since "
    "then, and who reviewed it last week before the Friday release? The pipeline logs show "
    "the same timeout in the payment service twice.",  # a long query
    "what changed about the deploys last week?",  # a window: stated times
    "when did the deploys move to Fridays after the incident review?",  # asks when
    "deploys Fridays incident review",
]
TEXTS = [
    "Yesterday the deploys failed twice; we rolled back on Tuesday.",
    "Last week the payments team reviewed the deploys and the incident.",
    "On 5 May 2024 the deploy pipeline moved to the release branch.",
    "The incident review happened in March; deploys were paused since then.",
    "The deploys, Fridays, the incident review: "
    + "the payments team went through the release notes again " * 30,  # longer than an excerpt
]


def record(content: str, **kw) -> Record:
    base = {"project_id": "proj", "agent_id": "agent-a", "scope": Scope.team,
            "category": "decisions"}  # fmt: skip
    return Record(content=content, **{**base, **kw})


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("faults")
    svc = MemoryService(Engine(root / "store", HashEmbedder()))
    rt = runtime_on(svc, identity_env(root / "store", "proj", "agent-a"), root)
    hooks = HookService(svc, rt.graphs)
    try:
        with in_process(rt) as client:
            normal = client.ok("remember", {"content": NORMAL, "scope": "team",
                                            "category": "decisions"})["memoryId"]  # fmt: skip
            for text in TEXTS:
                client.ok("remember", {"content": text, "scope": "team", "category": "decisions"})
            svc.engine.add([record("def deploy(): the deploys of the incident review run here",
                                   kind=Kind.chunk, category="workspace",
                                   metadata={"path": "tests/test_deploy.py", "title": "def deploy",
                                             "start_line": 1, "end_line": 3})])  # fmt: skip
            yield {"svc": svc, "rt": rt, "hooks": hooks, "client": client, "normal": normal}
    finally:
        hooks.close()
        svc.engine.close()


def _raise(kind: type[Exception]):
    def fail(*args, **kwargs):
        raise kind("injected")

    return fail


# (what fails, how to make it fail) -> the feature name the guard logs
FAULTS = {
    "the time grammar": ("retrieval.timeline.timeexpr", "read"),
    "a record's stated times": ("retrieval.timeline.timeprior", "stated_times"),
    "the mention of a time": ("retrieval.timeline.timeprior", "MENTIONS_TIME"),
    "the time prior's gains": ("retrieval.timeline.timeprior", "gains"),
    "the stemmer": ("server.service.prompting.vocabulary", "stem"),
    "the gate's coverage": ("server.service.prompting.gate", "_coverage"),
    "the prompt's words": ("server.service.prompting.vocabulary.Terms", "of"),
    "an excerpt": ("server.service.recalling.excerpts", "_excerpt"),
    "the citations' check": ("server.service.recalling.citations.CitationService", "states"),
    "the boosts": ("server.service.recalling.recall", "boosts"),
    "the code names": ("retrieval.ranking.grouping", "code_names"),
    "the test-file factor": ("retrieval.ranking.grouping", "is_test_path"),
    "the diversification": ("server.service.recalling.recall", "diversify"),
    "the current version first": ("retrieval.ranking.hybrid", "_current_first"),
    "code in prose": ("retrieval.ranking.modality", "is_prose_query"),
    "the views of a long query": ("retrieval.ranking.longquery", "views"),
    "the framing of an item": ("server.service.trust.framing", "source"),
}


def _target(path: str):
    import importlib

    module, _, attr = path.rpartition(".")
    try:
        return importlib.import_module(path)
    except ModuleNotFoundError:
        return getattr(importlib.import_module(module), attr)


class _Broken:
    """A compiled pattern whose every use raises."""

    def __init__(self, kind):
        self.kind = kind

    def __getattr__(self, name):
        return _raise(self.kind)


@pytest.mark.parametrize("what", list(FAULTS))
def test_a_failing_feature_is_dropped_logged_once_and_the_query_answers(
    world, what, monkeypatch, caplog
):
    where, name = FAULTS[what]
    kind = type(f"Injected{''.join(w.title() for w in what.split())}", (RuntimeError,), {})
    target = _target(where)
    if name == "MENTIONS_TIME":
        monkeypatch.setattr(target, name, _Broken(kind))
    elif isinstance(target, type):
        monkeypatch.setattr(target, name, _raise(kind) if name != "of" else classmethod(
            lambda cls, *a, **k: _raise(kind)()))  # fmt: skip
    else:
        monkeypatch.setattr(target, name, _raise(kind))
    before = sum(n for (_, err), n in guard.dropped_counts().items() if err == kind.__name__)
    client, svc, rt = world["client"], world["svc"], world["rt"]
    with caplog.at_level(logging.WARNING, logger="retrieval.ranking.guard"):
        for q in QUERIES:
            res = client.call("recall", {"query": q})
            assert not res.is_error, (what, q, res)
            req = HookRequest(event="UserPromptSubmit",
                              input=HookInput(prompt=q, session_id=f"{what}-{q}"))  # fmt: skip
            world["hooks"].handle(rt.identity, req)
            assert preview(svc, rt.identity, q).candidates
        found = client.ok("recall", {"query": "deploys Fridays incident review payments team"})
    assert world["normal"] in [i["id"] for i in found["items"]]
    met = sum(n for (_, err), n in guard.dropped_counts().items() if err == kind.__name__)
    assert met - before >= 2, f"{what}: the fault was never met"
    lines = [r.getMessage() for r in caplog.records if kind.__name__ in r.getMessage()]
    per_feature = {line.split(" dropped")[0] for line in lines}
    assert len(lines) == len(per_feature), lines  # one line per feature and error type
    assert all("injected" not in line for line in lines)  # the error's text is not logged


def test_the_log_line_names_feature_error_place_and_record_never_the_text(caplog):
    def read(text):
        raise ValueError(f"cannot read {text}")

    with caplog.at_level(logging.WARNING, logger="retrieval.ranking.guard"):
        for i in range(50):
            assert (
                guard.guarded("a test feature", read, "SECRET-TEXT", default=[], record=f"r{i}")
                == []
            )
    lines = [r.getMessage() for r in caplog.records if "a test feature" in r.getMessage()]
    assert len(lines) == 1
    assert "ValueError" in lines[0] and "record r0" in lines[0] and "in read" in lines[0]
    assert "SECRET-TEXT" not in lines[0]
    assert guard.dropped_counts()[("a test feature", "ValueError")] == 50


def test_an_interrupt_is_not_swallowed():
    with pytest.raises(KeyboardInterrupt):
        guard.guarded("a test feature", _raise(KeyboardInterrupt), default=None)
