"""The ``make run`` demo as a service call: a folder's README and docs paragraphs become team
``architecture`` memories (each once: a re-run stores only new paragraphs), then recall."""

from __future__ import annotations

from pathlib import Path

from retrieval.records import Kind, Record, Scope, content_hash
from server.service.core.identity import Identity
from server.service.core.models import RecallInput, RecallItem
from server.service.memories.memory import MemoryService
from server.service.recalling.recall import recall

MAX_PARAGRAPH_CHARS = 30_000


def paragraphs(text: str, min_chars: int = 40) -> list[str]:
    """Blank-line separated paragraphs (code fences kept whole), skipping tiny ones."""
    out, buf, fence = [], [], False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            fence = not fence
        if not line.strip() and not fence:
            if buf:
                out.append("\n".join(buf).strip())
                buf = []
            continue
        buf.append(line)
    if buf:
        out.append("\n".join(buf).strip())
    return [p for p in out if len(p) >= min_chars]


def doc_files(root: Path) -> list[Path]:
    """``README.md`` and every Markdown file under ``docs/`` that exists."""
    return [
        p for p in [root / "README.md", *sorted((root / "docs").glob("**/*.md"))] if p.is_file()
    ]


def store_docs(svc: MemoryService, who: Identity, root: Path) -> int:
    """Store the paragraphs of ``root``'s docs not stored yet; returns how many were new."""
    bucket = who.bucket("team")
    have = {
        r[0]
        for r in svc.store.reader.execute(
            "SELECT content_hash FROM records WHERE bucket=?", (bucket,)
        )
    }
    new = []
    for path in doc_files(root):
        for para in paragraphs(path.read_text(encoding="utf-8", errors="replace")):
            rec = Record(
                project_id=who.project_id, agent_id=who.agent_id, scope=Scope.team,
                category="architecture", content=para[:MAX_PARAGRAPH_CHARS],
                metadata={"source": str(path.relative_to(root)), "tags": ["docs"]},
            )  # fmt: skip
            if rec.content_hash not in have and content_hash(rec.content + "\x00") not in have:
                have.add(rec.content_hash)
                new.append(rec)
    for i in range(0, len(new), 500):  # one transaction per 500, limits checked in each
        svc.store_records(who, new[i : i + 500])
    return len(new)


def ask(svc: MemoryService, who: Identity, query: str, k: int) -> list[tuple[RecallItem, str]]:
    """The ``k`` memories most relevant to ``query`` (recall's ranking, memories only), each
    with the file its paragraph came from."""
    args = RecallInput(query=query, kinds=[Kind.memory.value], limit=k, budget=200_000)
    items = recall(svc, who, args).items
    recs = svc.store.get([i.id for i in items])
    return [(i, str(recs[i.id].metadata.get("source", "-"))) for i in items if i.id in recs]
