"""``remember-bulk`` and ``forget-bulk``.

Better than the seed's "not atomic": the valid items of a call are written in one transaction,
so a crash never leaves half a batch; per-item errors are reported with their index or id.
When a limit stops some items, the ones that fit (in order) are still written together in one
transaction. Both accept an ``idempotency_key`` (see :mod:`.idempotency`).

No lock: the limits and the existence of what is deleted are checked inside the write
transaction (:mod:`.memory`, "Write coordination"); when a concurrent writer changed what a
call read, the call reads again and retries.
"""

from __future__ import annotations

from pydantic import ValidationError

from retrieval.records import Record
from server.service.core.errors import InvalidInput, LimitExceeded, PatternError, invalid_fields
from server.service.core.identity import Identity
from server.service.core.models import BulkForgetResult, BulkRememberResult, MemoryInput
from server.service.memories import idempotency as idem
from server.service.memories.memory import MemoryService
from server.service.memories.writes import STALE_RETRIES

MAX_BULK = 1000


def _message(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return invalid_fields(exc)
    return exc.message if isinstance(exc, PatternError) else str(exc)


def _content(item: dict | MemoryInput) -> str | None:
    if isinstance(item, MemoryInput):
        return item.content
    return item.get("content") if isinstance(item, dict) else None


def remember_bulk(
    svc: MemoryService,
    who: Identity,
    memories: list[dict | MemoryInput],
    stop_on_error: bool = False,
    validate: bool = True,
    idempotency_key: str | None = None,
) -> BulkRememberResult:
    if len(memories) > MAX_BULK:
        raise InvalidInput(f"at most {MAX_BULK} memories per call, got {len(memories)}")
    request = {
        "memories": [
            m.model_dump(mode="json") if isinstance(m, MemoryInput) else m for m in memories
        ],
        "stopOnError": stop_on_error,
        "validate": validate,
    }
    return svc.once(
        who, idempotency_key, "remember-bulk", request, BulkRememberResult,
        lambda claim: _remember_bulk(svc, who, memories, stop_on_error, validate, claim),
    )  # fmt: skip


def _remember_bulk(
    svc: MemoryService,
    who: Identity,
    memories: list[dict | MemoryInput],
    stop_on_error: bool,
    validate: bool,
    claim: idem.Claim | None,
) -> BulkRememberResult:
    prepared: list[Record] = []
    errors: list[str] = []
    warnings: list[str] = []
    cites = {}  # record id -> its resolved citations
    # the injection model reads every text from one batch, and the engine reuses those
    # vectors for the records it stores (the model runs once per text)
    with svc.policy.batched([_content(m) for m in memories]):
        for i, raw in enumerate(memories):
            try:
                item = raw if isinstance(raw, MemoryInput) else MemoryInput.model_validate(raw)
                rec, warns = svc.prepare(who, item)
                pending = svc.cite(who, item.citations, [rec.content])
                if pending:
                    cites[rec.id] = pending
                prepared.append(rec)
                warnings.extend(f"[{i}] {w}" for w in warns)
            except (PatternError, ValidationError) as exc:
                errors.append(f"[{i}] {_message(exc)}")
                if stop_on_error and not validate:
                    break
        if validate and errors:
            raise InvalidInput(
                f"validation failed for {len(errors)} of {len(memories)} memories; nothing was stored",
                errors=errors,
            )
        vectors = svc.engine.embed(prepared)  # once, even if the limits make us write fewer

    def result(stored: list[Record], errors: list[str]) -> BulkRememberResult:
        return BulkRememberResult(
            stored=len(stored),
            failed=len(memories) - len(stored),
            errors=errors,
            memoryIds=[r.id for r in stored],
            warnings=list(warnings),
        )

    def citations_of(stored: list[Record]):
        def write(conn) -> None:
            for rec in stored:
                if rec.id in cites:
                    cites[rec.id].write(conn, [rec.id])

        return write if cites else None

    fit, over = prepared, []
    for _ in range(STALE_RETRIES):
        done = result(fit, errors + over)
        try:
            done.warnings += svc.store_records(
                who, fit, check=svc.bind(claim, done), vectors=vectors, extra=citations_of(fit)
            )
            return done
        except LimitExceeded:
            # store what fits (in order, one transaction), report the rest; the transaction
            # checks the limits again, so a writer that took the room meanwhile means: again
            fit, over = svc.fitting(who, prepared, stop_on_error)
    raise LimitExceeded("the limits kept changing while the memories were being written; retry")


def forget_bulk(
    svc: MemoryService,
    who: Identity,
    memory_ids: list[str],
    stop_on_error: bool = False,
    force: bool = False,
    idempotency_key: str | None = None,
) -> BulkForgetResult:
    if len(memory_ids) > MAX_BULK:
        raise InvalidInput(f"at most {MAX_BULK} ids per call, got {len(memory_ids)}")
    request = {"memoryIds": list(memory_ids), "stopOnError": stop_on_error, "force": force}
    return svc.once(
        who, idempotency_key, "forget-bulk", request, BulkForgetResult,
        lambda claim: _forget_bulk(svc, who, memory_ids, stop_on_error, force, claim),
    )  # fmt: skip


def _forget_bulk(
    svc: MemoryService,
    who: Identity,
    memory_ids: list[str],
    stop_on_error: bool,
    force: bool,
    claim: idem.Claim | None,
) -> BulkForgetResult:
    def attempt() -> BulkForgetResult:
        ok: list[str] = []
        errors: list[str] = []
        for mid in dict.fromkeys(memory_ids):
            try:
                rec = svc.get_visible(who, mid)
                svc.check_forget(who, rec, force)
                ok.append(rec.id)
            except PatternError as exc:
                errors.append(f"{mid}: {exc.message}")
                if stop_on_error:
                    break
        result = BulkForgetResult(deleted=len(ok), failed=len(errors), errors=errors)
        # one transaction, also when nothing is deleted (the idempotency claim is stored);
        # a record deleted by another writer since it was read: read again
        svc.engine.apply(
            delete=ok, check=svc.checks(svc.bind(claim, result), svc.present_check(ok))
        )
        return result

    return svc.retrying(attempt)
