"""No text written through any tool reaches the vector index's files.

Fifty distinctive secrets and fifty distinctive plain texts are written through every write tool
and the workspace ingester, by agents of several projects in several scopes (so new buckets,
and new Chroma collections, are made after the process has handled texts: HNSW blocks are
written to disk before they are filled), each one also asked for by a recall first. Under
``warn`` the store keeps them (the test checks that it keeps most), yet no file of the Chroma folder
holds any of them; under ``redact`` no file of the whole store holds a secret.
"""

from __future__ import annotations

import copy
import json
import random
import sqlite3
import string
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from server.service.memories.memory import MemoryService
from server.service.trust.policy import WritePolicy
from tests.lessons.test_graph_lessons import SEED
from tests.mcp_util import SyncClient, identity_env, in_process, runtime_on

pytestmark = pytest.mark.usefixtures("vector_index")  # tests of the vector index itself

N = 50
SCOPES = ("private", "personal", "team", "public")
AGENTS = [(project, agent) for project in ("harbour", "ledger", "atlas")
          for agent in ("dev-agent", "ops-agent")]  # fmt: skip


def _secrets(n: int) -> list[tuple[str, str]]:
    """(secret, what must never be found: its random body), three providers' formats."""
    rng = random.Random(20261206)
    alnum = string.ascii_letters + string.digits
    out = []
    for i in range(n):
        body = "".join(rng.choice(alnum) for _ in range(40))
        prefix = ("gh" + "p_", "glp" + "at-", "sk-" + "proj-")[i % 3]
        out.append((prefix + body, body[:36] if i % 3 == 0 else body))
    return out


SECRETS = _secrets(N)
PLAIN = [f"The quayside crane zorvik{i:02d}plenth lifts {i} containers" for i in range(N)]


class Agent:
    """One identity's client over the shared store."""

    def __init__(self, svc: MemoryService, home: Path, proj: Path, project: str, name: str):
        env = {**identity_env(home, project, name, allowed=proj)}
        self.proj = proj
        self.rt = runtime_on(svc, env, proj)
        self.client: SyncClient = in_process(self.rt)
        self.entity = f"{project}-{name}-service"
        self.client.ok("create_entities", {"entities": [
            {"name": self.entity, "entityType": "service"}]})  # fmt: skip
        self.memory = self.client.ok("remember", {"content": "The build runs make test."})
        self.n = 0

    def task(self) -> str:
        return self.client.ok("remember-task", {"content": "Rotate the keys."})["memoryId"]

    def fresh(self, stem: str) -> str:
        self.n += 1
        return f"{stem}-{self.rt.identity.agent_id}-{self.rt.identity.project_id}-{self.n}"

    def folder(self, text: str) -> str:
        folder = self.proj / self.fresh("docs")
        folder.mkdir()
        (folder / "notes.md").write_text(f"# Notes\n\n{text}\n", encoding="utf-8")
        return str(folder)

    def backup(self, text: str, scope: str) -> str:
        path = self.proj / (self.fresh("backup") + ".json")
        entry = {
            "id": str(uuid.uuid4()), "agentId": "x", "projectId": "y",
            "scope": scope, "content": text, "metadata": {},
            "category": "longterm" if scope in ("private", "personal") else "learnings",
            "createdAt": "2030-01-01T00:00:00Z", "updatedAt": "2030-01-01T00:00:00Z",
        }  # fmt: skip
        path.write_text(json.dumps({"version": 1, "memories": [entry]}), encoding="utf-8")
        return str(path)

    def lesson(self, text: str) -> dict:
        lesson = copy.deepcopy(SEED)
        lesson["name"] = self.fresh("LESSON")
        lesson["errorPattern"]["message"] = text
        return lesson


# tool -> the arguments that write ``text`` in ``scope``
WRITES: list[tuple[str, Callable[[Agent, str, str], dict]]] = [
    ("remember", lambda a, t, s: {"content": t, "scope": s}),
    ("remember-task", lambda a, t, s: {"content": t, "scope": s}),
    ("remember-learning", lambda a, t, s: {"content": t, "scope": s}),
    ("core-memory", lambda a, t, s: {"content": t}),
    ("remember-bulk", lambda a, t, s: {"memories": [{"content": t, "scope": s}]}),
    ("update-memory", lambda a, t, s: {"memoryId": a.memory["memoryId"], "content": t}),
    ("commit-insight", lambda a, t, s: {"memoryId": a.task(), "newContent": t}),
    ("create_entities", lambda a, t, s: {"entities": [
        {"name": a.fresh("svc"), "entityType": "service", "observations": [t]}]}),
    ("add_observations", lambda a, t, s: {"observations": [
        {"entityName": a.entity, "contents": [t]}]}),
    ("create_lesson", lambda a, t, s: {"lesson": a.lesson(t)}),
    ("ingest_workspace", lambda a, t, s: {"path": a.folder(t)}),
    ("import-memories", lambda a, t, s: {"inputPath": a.backup(t, s)}),
    ("import-from", lambda a, t, s: {"source": "mem0", "items": [
        {"kind": "memory", "sourceId": a.fresh("m"), "content": t}]}),
]  # fmt: skip


def walk(tmp_path: Path, policy: str) -> Path:
    """Every write of the module's docstring under ``policy``; the store closed. Its folder."""
    home, proj = tmp_path / "home", tmp_path / "proj"
    (proj / ".git").mkdir(parents=True)
    env = {"PATTERN_SECRET_POLICY": policy, "PATTERN_INJECTION_POLICY": "warn"}
    svc = MemoryService(Engine(home, HashEmbedder()), policy=WritePolicy.from_env(env))
    agents: list[Agent] = []
    try:
        for i, ((secret, _), plain) in enumerate(zip(SECRETS, PLAIN, strict=True)):
            if i < len(AGENTS) * 2 and i % 2 == 0:  # a new agent: new buckets, after texts
                agents.append(Agent(svc, home, proj, *AGENTS[i // 2]))
            agent = agents[i % len(agents)]
            tool, args = WRITES[i % len(WRITES)]
            scope = SCOPES[i % len(SCOPES)]
            agent.client.call("recall", {"query": f"{secret} {plain}"})  # asked, never stored
            agent.client.ok(tool, args(agent, f"{plain}; the deploy key is {secret}", scope))
        for agent in agents:
            agent.rt.citations.wait_idle()
    finally:
        for agent in agents:
            agent.client.close()
            agent.rt.citations.close()
        svc.engine.close()
    return home


def found(folder: Path, markers: list[str]) -> dict[str, list[str]]:
    """{marker: the files under ``folder`` holding it (case-insensitively)}."""
    out: dict[str, list[str]] = {}
    files = [(p, p.read_bytes().lower()) for p in sorted(folder.rglob("*")) if p.is_file()]
    for marker in markers:
        needle = marker.lower().encode()
        hits = [str(p.relative_to(folder)) for p, data in files if needle in data]
        if hits:
            out[marker] = hits
    return out


def chroma_metadata_keys(home: Path) -> tuple[set[str], set[str]]:
    """(the keys of every vector's metadata, of every collection's metadata) in Chroma's
    own database."""
    db = sqlite3.connect(f"file:{home / 'chroma' / 'chroma.sqlite3'}?mode=ro", uri=True)
    try:
        vectors = {r[0] for r in db.execute("SELECT DISTINCT key FROM embedding_metadata")}
        collections = {r[0] for r in db.execute("SELECT DISTINCT key FROM collection_metadata")}
    finally:
        db.close()
    return vectors, collections


def test_no_text_written_through_any_tool_reaches_the_vector_index_files(tmp_path):
    home = walk(tmp_path, "warn")
    bodies = [body for _, body in SECRETS]
    # the store keeps them (but what an automatic write redacts: imports, the older versions
    # of a memory whose secret a later edit removed)
    assert len(found(home, PLAIN)) == N and len(found(home, bodies)) >= 40
    assert len(list((home / "chroma").glob("*/data_level0.bin"))) >= 12  # many new collections
    assert found(home / "chroma", bodies + PLAIN) == {}
    assert chroma_metadata_keys(home) == ({"record_id"}, {"bucket", "model_id"})


def test_under_redact_no_file_of_the_store_holds_a_secret_written_through_any_tool(tmp_path):
    home = walk(tmp_path, "redact")
    assert found(home, [body for _, body in SECRETS]) == {}
    assert len(found(home, PLAIN)) == N  # the texts around them are kept
