"""The candidates of ``add_observations``: for each observation a call added, the older
observations of the same entity (in the same graph) it may restate (:mod:`.candidates`).

The graph's write embeds and stores the new observations in one transaction; their
candidates are found afterwards from the vectors that write stored (no second embedding), and
the pairs shown are kept in a transaction of their own. That step is a hint: when it fails,
the call's result simply shows no candidates (logged), the observations stay written.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from graph.common import parse_scope
from graph.models import AddObservationsResult
from retrieval.records import Kind
from server.service.core.identity import Identity
from server.service.core.models import CANDIDATES_HELP, CandidatesNote, is_empty
from server.service.updating import candidates

MAX_OBSERVATIONS = 50  # new observations of one call looked at
NOTE = candidates.NOTE.format(new="<its observationId>")


class ObservationCandidates(BaseModel):
    observationId: str = Field(description="An observation this call added.")
    entityName: str
    observation: str = Field(description="Its first words.")
    candidates: list[str] = Field(description=CANDIDATES_HELP)


class AddObservationsWithCandidates(AddObservationsResult):
    candidates: list[ObservationCandidates] = Field(
        default_factory=list, exclude_if=is_empty,
        description="Added observations that may restate older ones of their entity.",
    )  # fmt: skip
    candidatesNote: CandidatesNote


def _added(svc, bucket: str, result: AddObservationsResult) -> list:
    """The observation records the call added, newest first per entity (matched by text)."""
    out = []
    for group in result.results:
        for text in group.addedObservations:
            row = svc.store.reader.execute(
                "SELECT id FROM records WHERE bucket=? AND kind=? AND entity_name=? AND "
                "content=? ORDER BY created_at DESC LIMIT 1",
                (bucket, Kind.observation.value, group.entityName, text),
            ).fetchone()
            if row:
                out.append(row[0])
            if len(out) == MAX_OBSERVATIONS:
                return out
    return out


def after_observations(
    svc, who: Identity, scope: str | None, result: AddObservationsResult
) -> AddObservationsWithCandidates:
    """``result`` with the candidates of each observation it added."""
    out = AddObservationsWithCandidates(**result.model_dump())
    engine = svc.engine
    if engine.embedder is None:
        return out
    try:
        bucket = who.bucket(parse_scope(scope).value)
        ids = _added(svc, bucket, result)
        recs = svc.store.get(ids)
        vecs = svc.store.embeddings(ids, engine.embedder.model_id)
        now = svc.clock()
        for rid in ids:
            rec = recs.get(rid)
            if rec is None:
                continue
            found = candidates.find(engine, rec, vecs.get(rid), now)
            step = candidates.writer(rec, who, found)
            if step is None:
                continue
            with svc.store.transaction() as conn:
                step(conn)
            out.candidates.append(ObservationCandidates(
                observationId=rid, entityName=rec.entity_name or "",
                observation=candidates.excerpt(rec, 40), candidates=candidates.listed(found),
            ))  # fmt: skip
    except Exception:  # a hint: the observations are written whatever happens here
        candidates.log.exception("candidates of add_observations: not shown")
    out.candidatesNote = NOTE if out.candidates else None
    return out


__all__ = ["AddObservationsWithCandidates", "ObservationCandidates", "after_observations"]
