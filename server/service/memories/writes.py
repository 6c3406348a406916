"""Write coordination: how concurrent writers of one store stay correct without a lock of the
service's own.

Each write is one :meth:`Engine.apply`, which embeds first (holding no lock, so concurrent
writers embed in parallel) and then runs one SQLite transaction; every rule that depends on what
others wrote runs *inside* that transaction as a check: limits (:meth:`~WriteCoordination.limits_check`),
the revision a change was built from (:meth:`~WriteCoordination.revision_check`), that deleted
records still exist (:meth:`~WriteCoordination.present_check`), that new ids are still free
(:meth:`~WriteCoordination.absent_check`) and idempotency claims (:meth:`~WriteCoordination.once`,
:mod:`.idempotency`). A check that finds the record changed since it was read raises ``_Stale``
and :meth:`~WriteCoordination.retrying` redoes the read-modify-write; an expected revision that
does not match is a ``Conflict``. So concurrent writers can neither overshoot a limit nor lose an
update, and nothing outside the store's transaction coordinates them (bulk, maintenance and
transfer use the same checks).

:class:`WriteCoordination` is the part of :class:`~.memory.MemoryService` that does this; it
uses the service's ``engine``, ``store`` and ``clock``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from retrieval.engine import Engine
from retrieval.records import Record
from server.service.core import scopes as rules
from server.service.core.errors import Conflict, LimitExceeded, NotFound, PatternError
from server.service.core.identity import Identity
from server.service.memories import idempotency as idem

Clock = Callable[[], datetime]
Check = Callable[[Any], None]
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
STALE_RETRIES = 5


class _Stale(Exception):  # noqa: N818 - control flow
    """The record changed between our read and our write transaction (another process wrote
    it); without an expected revision the write is retried on a fresh read."""


# a project's shared memories; the WHERE clause is that of the partial index records_shared
# (retrieval/storage/schema.py), so the count reads that index, not the table
SHARED_COUNT = (
    "SELECT count(*) FROM records WHERE project_id = ? "
    "AND kind = 'memory' AND scope IN ('team', 'public')"
)


class WriteCoordination:
    """The transaction checks and the retry loop of a memory service's writes."""

    engine: Engine
    store: Any  # the engine's store
    clock: Clock

    def limits_check(self, who: Identity, records: list[Record]):
        """A check run inside the write transaction: no limit is ever silently exceeded."""

        def check(conn) -> None:
            now = self.clock()
            own = [who.bucket("private"), who.bucket("personal")]
            new_own = sum(r.bucket in own for r in records)
            if new_own:
                n = self._count(conn, own, now)
                if n + new_own > rules.MAX_PER_AGENT:
                    raise LimitExceeded(
                        f"agent {who.agent_id} has {n} memories; the limit is {rules.MAX_PER_AGENT}",
                        limit=rules.MAX_PER_AGENT,
                    )
            for category, limit in rules.MAX_PER_CATEGORY.items():
                new = sum(r.category == category and r.bucket in own for r in records)
                if new:
                    n = self._count(conn, own, now, category)
                    if n + new > limit:
                        hint = (
                            " (forget some with force=true)"
                            if category == "core"
                            else " (run cleanup)"
                        )
                        raise LimitExceeded(
                            f"{category}: {n} memories already, limit {limit} per agent{hint}",
                            category=category,
                            limit=limit,
                        )
            shared = [who.bucket("team"), who.bucket("public")]
            new_shared = sum(r.bucket in shared for r in records)
            if new_shared:
                n = conn.execute(SHARED_COUNT, (who.project_id,)).fetchone()[0]
                if n + new_shared > rules.MAX_SHARED_PER_PROJECT:
                    raise LimitExceeded(
                        f"project {who.project_id} has {n} shared memories; the limit is "
                        f"{rules.MAX_SHARED_PER_PROJECT}",
                        limit=rules.MAX_SHARED_PER_PROJECT,
                    )

        return check

    @staticmethod
    def _count(conn, buckets: list[str], now: datetime, category: str | None = None) -> int:
        from retrieval.storage.store import ts

        sql = (
            f"SELECT count(*) FROM records WHERE kind='memory' AND bucket IN ({','.join('?' * len(buckets))}) "
            "AND (expires_at IS NULL OR expires_at > ?)"
        )
        params = [*buckets, ts(now)]
        if category:
            sql += " AND category = ?"
            params.append(category)
        return conn.execute(sql, params).fetchone()[0]

    def store_records(
        self,
        who: Identity,
        records: list[Record],
        check: Check | None = None,
        vectors: dict | None = None,
        extra: Check | None = None,
    ) -> list[str]:
        """Insert records in one transaction; ``check`` (e.g. an idempotency claim) runs first,
        then the limits (inside the transaction); ``extra`` (e.g. the records' citations) after
        the records are written. Embedding happens before it, holding no lock (``vectors``:
        made earlier by ``engine.embed``). Returns the write's warnings (the vector index
        catching up)."""
        applied = self.engine.apply(
            add=records,
            check=self.checks(check, self.limits_check(who, records)),
            vectors=vectors,
            extra=extra,
        )
        return applied.warnings

    def fitting(
        self, who: Identity, records: list[Record], stop_on_error: bool = False
    ) -> tuple[list[Record], list[str]]:
        """The records that fit the limits, in order (greedy: as if stored one by one), and an
        error per record that does not, as of now. The write re-checks the limits inside its
        transaction (another writer may take the room meanwhile: ``LimitExceeded`` again)."""
        fit: list[Record] = []
        errors: list[str] = []
        for rec in records:
            try:
                self.limits_check(who, [*fit, rec])(self.store.reader)
                fit.append(rec)
            except LimitExceeded as exc:
                errors.append(f"[{rec.id}] {exc.message}")
                if stop_on_error:
                    break
        return fit, errors

    # ------------------------------------------------------------------ idempotency, revisions
    def once(
        self,
        who: Identity,
        key: str | None,
        tool: str,
        request: Any,
        model: type[M],
        run: Callable[[idem.Claim | None], M],
    ) -> M:
        """Run a write at most once per (agent, idempotency key): a key seen before returns the
        stored result; ``run(claim)`` must put ``self.bind(claim, result)`` into its write
        transaction (see :mod:`.idempotency`)."""
        if key is None:
            return run(None)
        claim = idem.Claim.new(who.agent_id, key, tool, request, self.clock())
        prior = claim.lookup(self.store.reader)
        if prior is not None:
            return model.model_validate(prior)
        try:
            return run(claim)
        except idem.Replay as replay:  # a concurrent call with this key committed first
            return model.model_validate(replay.result)
        except PatternError:
            prior = claim.lookup(self.store.reader)  # e.g. NotFound: that call deleted it
            if prior is not None:
                return model.model_validate(prior)
            raise

    @staticmethod
    def bind(claim: idem.Claim | None, result: BaseModel) -> Check | None:
        """The transaction check that stores ``result`` under the claimed key (None: no key)."""
        if claim is None:
            return None
        claim.result = result.model_dump(mode="json")
        return claim.check

    @staticmethod
    def checks(*fns: Check | None) -> Check:
        """Several transaction checks run in order (None entries skipped)."""
        todo = [f for f in fns if f is not None]

        def check(conn) -> None:
            for fn in todo:
                fn(conn)

        return check

    @staticmethod
    def conflict(memory_id: str, current: int, expected: int, /, **data: Any) -> Conflict:
        """A stale expected revision that could not be merged. With ``data`` from a merge
        attempt (``reason``; for overlapping edits ``merge`` with conflict markers, ``base``,
        ``current``, ``yours``; for a merge over a limit the ``limit`` and the attempt) the
        message says how to resolve it in one call."""
        if data.get("reason") == "overlapping_edits":
            how = (
                f"your edit and the changes made since revision {expected} touch the same "
                f"words; `merge` holds the attempt with conflict markers, `current` the stored "
                f"text, `yours` your text: resolve it and update with expectedRevision={current}"
            )
        elif data.get("reason") == "limit_exceeded":
            how = (
                f"your edit merged with the changes made since revision {expected} breaks a "
                f"limit ({data['limit']['message']}); `merge` and `merge_metadata` hold the "
                f"attempt: trim it and update with expectedRevision={current}"
            )
        else:
            how = "read it again and retry with its current revision"
        return Conflict(
            f"memory {memory_id} is at revision {current}, not {expected}: it changed since you "
            f"read it; {how}",
            memoryId=memory_id,
            current_revision=current,
            expected_revision=expected,
            **data,
        )

    def revision_check(self, memory_id: str, read: int, expected: int | None) -> Check:
        """Inside the write transaction: the record still exists, is at ``expected`` (Conflict
        otherwise) and at the revision the new version was built from (else re-read)."""

        def check(conn) -> None:
            row = conn.execute("SELECT revision FROM records WHERE id=?", (memory_id,)).fetchone()
            if row is None:
                raise NotFound(f"memory {memory_id} not found", memoryId=memory_id)
            if expected is not None and row[0] != expected:
                raise self.conflict(memory_id, row[0], expected)
            if row[0] != read:
                raise _Stale

        return check

    @staticmethod
    def present_check(ids: Sequence[str]) -> Check:
        """Inside the write transaction: every record in ``ids`` still exists (else another
        writer deleted one since it was read: the caller's read-check-write is redone)."""
        wanted = list(dict.fromkeys(ids))

        def check(conn) -> None:
            for i in range(0, len(wanted), 500):
                part = wanted[i : i + 500]
                n = conn.execute(
                    f"SELECT count(*) FROM records WHERE id IN ({','.join('?' * len(part))})",
                    part,
                ).fetchone()[0]
                if n != len(part):
                    raise _Stale

        return check

    @staticmethod
    def absent_check(ids: Sequence[str]) -> Check:
        """Inside the write transaction: no record in ``ids`` exists yet (``Conflict`` when
        another writer created one since the caller looked; nothing is written)."""
        wanted = list(dict.fromkeys(ids))

        def check(conn) -> None:
            for i in range(0, len(wanted), 500):
                part = wanted[i : i + 500]
                row = conn.execute(
                    f"SELECT id FROM records WHERE id IN ({','.join('?' * len(part))}) LIMIT 1",
                    part,
                ).fetchone()
                if row is not None:
                    raise Conflict(
                        f"memory {row[0]} was stored by another writer meanwhile; nothing was "
                        "written: retry (it is then reported as existing)",
                        memoryId=row[0],
                    )

        return check

    def retrying(self, fn: Callable[[], T]) -> T:
        """Run a read-check-write until its transaction checks find nothing changed since the
        read (at most ``STALE_RETRIES`` times)."""
        for _ in range(STALE_RETRIES):
            try:
                return fn()
            except _Stale:
                continue
        raise Conflict("the memory kept changing while it was being written; retry")
