"""The synthetic store of the scale benchmarks (``scale.py``, its curve, start-up, the dashboard
and the hooks' store): memories of realistic length cut from the SciFact abstracts (sentences,
then titles, then runs of 2-5 adjacent sentences when more distinct texts are needed), spread
over 20 agents, 3 projects and the 4 scopes in fixed shares; the SciFact queries asked of them."""

from __future__ import annotations

import json
import random
import re
from datetime import timedelta
from pathlib import Path

from retrieval.records import Record, Scope, utcnow
from retrieval.storage.buckets import bucket_of

DATA = Path("/work/shared/data/scifact")
N_AGENTS = 20
PROJECTS = ["proj-alpha", "proj-beta", "proj-gamma"]
# share of memories per scope, and the categories each scope allows (DESIGN.md)
SCOPES = [(Scope.private, 0.40), (Scope.personal, 0.15), (Scope.team, 0.35), (Scope.public, 0.10)]
CATEGORIES = {
    Scope.private: ["longterm", "recent", "tasks"],
    Scope.personal: ["longterm", "core", "recent", "tasks"],
    Scope.team: ["decisions", "architecture", "learnings"],
    Scope.public: ["decisions", "architecture", "learnings"],
}
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[])")


def agent_name(i: int) -> str:
    return f"agent-{i:02d}"


def agent_project(i: int) -> str:
    return PROJECTS[i % len(PROJECTS)]


def visible_buckets(i: int) -> list[str]:
    a, p = agent_name(i), agent_project(i)
    return [
        bucket_of(Scope.private, p, a),
        bucket_of(Scope.personal, p, a),
        bucket_of(Scope.team, p, a),
        bucket_of(Scope.public, p, a),
    ]


def corpus_texts(n: int, data: Path) -> list[str]:
    """n distinct memory texts: sentences first, then titles, adjacent pairs, triples."""
    abstracts: list[list[str]] = []
    titles: list[str] = []
    with open(data / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            sents = [s.strip() for s in _SENT.split(doc.get("text", "")) if len(s.strip()) >= 25]
            if sents:
                abstracts.append(sents)
            if doc.get("title"):
                titles.append(doc["title"].strip())
    seen: dict[str, None] = {}

    def take(items):
        for t in items:
            if len(seen) >= n:
                return
            seen.setdefault(t, None)

    take(s for a in abstracts for s in a)
    take(titles)
    for width in (2, 3, 4, 5):
        take(" ".join(a[i : i + width]) for a in abstracts for i in range(0, len(a) - width + 1))
    if len(seen) < n:
        raise SystemExit(f"only {len(seen)} distinct texts available, asked for {n}")
    texts = list(seen)
    random.Random(7).shuffle(texts)
    return texts


def make_records(texts: list[str], seed: int = 11) -> list[Record]:
    rng = random.Random(seed)
    scopes, weights = zip(*SCOPES, strict=True)
    now = utcnow()
    out = []
    for i, text in enumerate(texts):
        a = rng.randrange(N_AGENTS)
        scope = rng.choices(scopes, weights)[0]
        category = rng.choice(CATEGORIES[scope])
        created = now - timedelta(minutes=len(texts) - i)
        out.append(
            Record(
                project_id=agent_project(a),
                agent_id=agent_name(a),
                scope=scope,
                category=category,
                content=text,
                metadata={"priority": rng.choice([1, 2, 2, 3]), "tags": [f"t{rng.randrange(50)}"]},
                created_at=created,
                updated_at=created,
                # recent/tasks would expire after 24 h; keep them alive for the benchmark
                expires_at=now + timedelta(days=30) if category in ("recent", "tasks") else None,
            )
        )
    return out


def load_queries(data: Path, n: int) -> list[str]:
    qs = []
    with open(data / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            qs.append(json.loads(line)["text"])
    random.Random(3).shuffle(qs)
    return qs[:n]


def long_queries(data: Path, queries: list[str], words: int = 150) -> list[str]:
    """~``words``-word queries, as a pasted report reads: a claim followed by sentences of
    other abstracts (deterministic)."""
    sents: list[str] = []
    with open(data / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            sents += [s.strip() for s in _SENT.split(json.loads(line).get("text", "")) if s.strip()]
    rng = random.Random(5)
    out = []
    for q in queries:
        text = q
        while len(text.split()) < words:
            text += " " + rng.choice(sents)
        out.append(" ".join(text.split()[:words]))
    return out
