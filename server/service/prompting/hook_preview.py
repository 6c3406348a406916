"""What the UserPromptSubmit hook would inject for a prompt, and why: every candidate of the search
with the gate's relevance, what it was read from, and whether it was kept or why it was dropped
(``pattern-memory hook-preview "PROMPT"``; docs/troubleshooting.md). The selection is the hook's
own (:func:`.hook_context.select_for_prompt`); a preview injects nothing and records nothing in
the session's ledger.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from retrieval.ranking.guard import guarded
from server.service.core.identity import Identity
from server.service.memories.memory import MemoryService
from server.service.prompting import hook_context as ar
from server.service.prompting.ledger import Ledger
from server.service.trust import framing

EXCERPT_CHARS = 100


class PreviewCandidate(BaseModel):
    id: str
    kind: str
    scope: str
    source: str = Field(description="the provenance line the hook would print above it")
    excerpt: str = Field(description="the record's first characters, on one line")
    relevance: float = Field(description="the gate's relevance (with a stale citation's factor)")
    cosine: float | None = Field(description="the best window's cosine (None: lexical only)")
    coverage: float = Field(description="share of the prompt's information its words hold")
    verdict: str = Field(description="'injected', or 'dropped: <why>'")


class HookPreview(BaseModel):
    prompt: str
    threshold: float
    candidates: list[PreviewCandidate]
    injected: list[str] = Field(description="ids injected, in order")
    text: str = Field(description="what the hook would print (empty: nothing)")


def preview(
    svc: MemoryService, who: Identity, prompt: str, *, config: ar.HookConfig | None = None,
    session: str | None = None, pending: bool = True,
) -> HookPreview:  # fmt: skip
    """The hook's decision for ``prompt`` (as ``session`` when given: what it injected before
    is dropped again, its own turns are left out), without injecting anything; ``pending``
    as the hook has it (False under ``PATTERN_AUTO_LESSONS=review``)."""
    config = config or ar.HookConfig()
    ledger = Ledger(svc, session) if session else None
    sel = ar.select_for_prompt(svc, who, prompt, config=config, ledger=ledger, session=session,
                               pending=pending)  # fmt: skip
    rows = []
    for d in sel.decisions:
        rec = d.record
        rows.append(PreviewCandidate(
            id=rec.id, kind=rec.kind.value, scope=rec.scope.value,
            source=guarded("framing", framing.provenance, rec, None, default="?", record=rec.id),
            excerpt=" ".join(rec.content[: 8 * EXCERPT_CHARS].split())[:EXCERPT_CHARS],
            relevance=round(d.relevance, 4), cosine=d.judged.cosine,
            coverage=round(d.judged.coverage, 4), verdict=d.verdict,
        ))  # fmt: skip
    return HookPreview(prompt=prompt, threshold=config.threshold, candidates=rows,
                       injected=sel.ids, text=sel.text)  # fmt: skip
