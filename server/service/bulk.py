"""``remember-bulk`` and ``forget-bulk``.

Better than the seed's "not atomic": the valid items of a call are written in one transaction,
so a crash never leaves half a batch; per-item errors are reported with their index or id.
"""

from __future__ import annotations

from pydantic import ValidationError

from retrieval.errors import InvalidInput, LimitExceeded, PatternError
from retrieval.records import Record

from .identity import Identity
from .memory import MemoryService
from .models import BulkForgetResult, BulkRememberResult, MemoryInput

MAX_BULK = 1000


def _message(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
    return exc.message if isinstance(exc, PatternError) else str(exc)


def remember_bulk(
    svc: MemoryService,
    who: Identity,
    memories: list[dict | MemoryInput],
    stop_on_error: bool = False,
    validate: bool = True,
) -> BulkRememberResult:
    if len(memories) > MAX_BULK:
        raise InvalidInput(f"at most {MAX_BULK} memories per call, got {len(memories)}")
    prepared: list[Record] = []
    errors: list[str] = []
    warnings: list[str] = []
    for i, raw in enumerate(memories):
        try:
            item = raw if isinstance(raw, MemoryInput) else MemoryInput.model_validate(raw)
            rec, warns = svc.prepare(who, item)
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
    stored: list[str] = []
    try:
        svc.store_records(who, prepared)
        stored = [r.id for r in prepared]
    except LimitExceeded:
        for rec in prepared:  # store what fits, report the rest
            try:
                svc.store_records(who, [rec])
                stored.append(rec.id)
            except LimitExceeded as exc:
                errors.append(f"[{rec.id}] {exc.message}")
                if stop_on_error:
                    break
    return BulkRememberResult(
        stored=len(stored),
        failed=len(memories) - len(stored),
        errors=errors,
        memoryIds=stored,
        warnings=warnings,
    )


def forget_bulk(
    svc: MemoryService,
    who: Identity,
    memory_ids: list[str],
    stop_on_error: bool = False,
    force: bool = False,
) -> BulkForgetResult:
    if len(memory_ids) > MAX_BULK:
        raise InvalidInput(f"at most {MAX_BULK} ids per call, got {len(memory_ids)}")
    ok: list[str] = []
    errors: list[str] = []
    with svc._lock:
        for mid in dict.fromkeys(memory_ids):
            try:
                rec = svc.get_visible(who, mid)
                svc.check_forget(who, rec, force)
                ok.append(rec.id)
            except PatternError as exc:
                errors.append(f"{mid}: {exc.message}")
                if stop_on_error:
                    break
        if ok:
            svc.engine.apply(delete=ok)
    return BulkForgetResult(deleted=len(ok), failed=len(errors), errors=errors)
