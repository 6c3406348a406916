"""The labelled sets as the engine gets them: one team record per BEIR document or LoCoMo turn
(its id in ``metadata.doc_id``), one :class:`Query` per labelled question."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from benchmarks.harness.data import (
    evidence_ids,
    load_beir,
    locomo_date,
    locomo_now,
    locomo_sessions,
)
from benchmarks.harness.ranking import AGENT, Query
from ingest.sessions.turns import DEFAULT_CONTEXT, turn_context, turn_text
from ingest.sessions.turns import context_spec as turns_spec
from retrieval.records import Record, Scope

DEFAULT_LOCOMO_CONTEXT = DEFAULT_CONTEXT


def beir_record(doc: dict, project: str, title_mode: str) -> Record:
    title = (doc.get("title") or "").strip()
    text = (doc.get("text") or "").strip()
    content, context = text, ""
    if title and title_mode == "content":
        content = f"{title}\n{text}" if text else title
    elif title and title_mode == "context":
        context = title
    return Record(
        project_id=project,
        agent_id=AGENT,
        scope=Scope.team,
        category="learnings",
        content=content or title,
        context=context,
        metadata={"doc_id": str(doc["_id"])},
    )


def beir_set(
    folder: Path, split: str | None, title_mode: str = "context", project: str = ""
) -> tuple[list[Record], list[Query], list[dict], str]:
    """(records, queries with qrels, the corpus, the split read) of a BEIR folder, stored in
    ``project`` (default ``beir-<folder name>``)."""
    corpus, queries, qrels, split = load_beir(folder, split)
    records = [beir_record(d, project or f"beir-{folder.name}", title_mode) for d in corpus]
    bucket = records[0].bucket
    qs = [Query(qid, queries[qid], rel, bucket) for qid, rel in qrels.items() if qid in queries]
    return records, qs, corpus, split


def locomo_records(sample: dict, context_spec: str) -> list[Record]:
    spec = turns_spec(context_spec)
    project = f"locomo-{sample['sample_id']}"
    recs = []
    for _n, date, turns in locomo_sessions(sample["conversation"]):
        when = locomo_date(date)
        for i, turn in enumerate(turns):
            extra = {"created_at": when, "updated_at": when} if when else {}
            recs.append(
                Record(
                    project_id=project,
                    agent_id=AGENT,
                    scope=Scope.team,
                    category="learnings",
                    content=turn_text(turn),
                    context=turn_context(turns, i, date, spec),
                    metadata={"doc_id": turn["dia_id"], "session_date": date},
                    **extra,
                )
            )
    return recs


def locomo_set(
    data: list[dict],
    context_spec: str,
    dated: bool = True,
    categories: str = "",
    wrap: Callable[[str, str], str] | None = None,
) -> tuple[list[Record], list[Query]]:
    """(every turn's record, every question with evidence) of LoCoMo conversations; ``dated``:
    each question asked at its conversation's last session date; ``categories``: only these
    (e.g. "1234"); ``wrap(text, qid)``: the text asked instead of the question."""
    records: list[Record] = []
    qs: list[Query] = []
    for sample in data:
        recs = locomo_records(sample, context_spec)
        records.extend(recs)
        known = {r.metadata["doc_id"] for r in recs}
        now = locomo_now(sample) if dated else None
        for i, qa in enumerate(sample.get("qa", [])):
            rel = evidence_ids(qa.get("evidence", []), known)
            cat = str(qa.get("category"))
            if rel and qa.get("question") and (not categories or cat in categories):
                qid = f"{sample['sample_id']}#{i}"
                text = wrap(qa["question"], qid) if wrap else qa["question"]
                qs.append(Query(qid, text, rel, recs[0].bucket, cat, now))
    return records, qs
