"""The memory service: Pattern's tools as plain Python, on top of the retrieval engine.

Every method takes the caller's :class:`Identity` (from the environment or an authenticated
connection, never from tool arguments) and either returns a pydantic result or raises an
error of ``retrieval.errors``.

Write coordination: the service holds no lock; every write's rules run as checks inside the
store's transaction (:mod:`.writes`, the :class:`~.writes.WriteCoordination` base class);
``update-memory`` with its merge of a stale edit is in :mod:`.updates` (:class:`~.updates.MemoryUpdates`).

A write that committed returns success; if the vector index could not be updated afterwards,
its result carries the engine's warning (the index catches up in the background).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from retrieval.engine import Engine
from retrieval.records import Kind, Record, Scope, content_hash, utcnow
from retrieval.timings import timings
from server.service.core import scopes as rules
from server.service.core.errors import AccessDenied, CoreProtected, InvalidInput, NotFound
from server.service.core.identity import Identity
from server.service.core.models import (
    CommitInsightResult,
    ForgetResult,
    MemoryInput,
    RememberResult,
    ShareLearningResult,
)
from server.service.memories import idempotency as idem
from server.service.memories.updates import MemoryUpdates
from server.service.trust import framing
from server.service.trust.injection_scan.injection import InjectionPolicy
from server.service.trust.policy import WritePolicy
from server.service.trust.secret_scan.secrets import SecretPolicy
from server.service.updating import candidates, supersede

if TYPE_CHECKING:
    from server.service.recalling.citations import CitationService, Pending

Clock = Callable[[], datetime]


class MemoryService(MemoryUpdates):
    def __init__(
        self,
        engine: Engine,
        *,
        clock: Clock = utcnow,
        secret_policy: SecretPolicy | None = SecretPolicy.warn,
        injection_policy: InjectionPolicy | None = InjectionPolicy.warn,
        policy: WritePolicy | None = None,
    ) -> None:
        """``policy`` (else the two policies given) becomes the engine's write policy: every
        record stored through this engine passes it (see :mod:`.policy`)."""
        self.engine = engine
        self.store = engine.store
        self.clock = clock
        policy = policy or WritePolicy(secret_policy, injection_policy)
        if policy.embedder is None:  # the injection model reads the engine's embedder
            policy = policy.with_embedder(lambda: engine.embedder)
        self.policy = policy
        engine.screen = self.policy
        # citations of code (server/service/recalling/citations.py), attached by the runtime
        self.citations: CitationService | None = None

    # ------------------------------------------------------------------ helpers
    def visible(self, who: Identity, rec: Record) -> bool:
        return rec.bucket in who.visible_buckets()

    def get_visible(self, who: Identity, memory_id: str) -> Record:
        """The record if the caller may see it (invisible and missing look the same)."""
        found = self.store.get([memory_id]).get(memory_id)
        if found is None and self.store.cluster is not None:
            # PostgreSQL mode: another node may have written it an instant ago
            self.store.catch_up()
            found = self.store.get([memory_id]).get(memory_id)
        if found is None or not self.visible(who, found):
            shown = framing.field(memory_id, 100)  # any id is echoed as one short line
            raise NotFound(f"memory {shown} not found", memoryId=shown)
        if found.expires_at is not None and found.expires_at <= self.clock():
            # expired is gone: recall no longer shows it, so nothing may revive or share it
            raise NotFound(
                f"memory {memory_id} not found: it expired at {found.expires_at.isoformat()} "
                "(cleanup removes it)",
                memoryId=memory_id,
            )
        return found

    def check_owner(self, who: Identity, rec: Record, action: str) -> None:
        if rec.agent_id != who.agent_id:
            raise AccessDenied(
                f"only the agent that created memory {rec.id} may {action} it "
                f"({rec.scope.value} memory created by {rec.agent_id})",
                memoryId=rec.id,
                owner=rec.agent_id,
            )

    def prepare(self, who: Identity, item: MemoryInput) -> tuple[Record, list[str]]:
        """Validate one memory and build its record; returns (record, warnings)."""
        scope = Scope(item.scope)
        category = item.category or rules.DEFAULT_CATEGORY[scope]
        rules.check_scope_category(scope, category)
        rules.check_content(item.content)
        meta = rules.check_metadata(
            item.metadata.model_dump(exclude_none=True) if item.metadata else {}
        )
        if not meta.get("tags"):
            meta.pop("tags", None)
        now = self.clock()
        rec = Record(
            kind=Kind.memory,
            project_id=who.project_id,
            agent_id=who.agent_id,
            scope=scope,
            category=category,
            content=item.content,
            metadata=meta,
            created_at=now,
            updated_at=now,
            expires_at=rules.expiry_for(category, now),
        )
        return self.engine.screen_record(rec)  # the write policy, before anything is embedded

    def cite(self, who: Identity, specs, texts: list[str]) -> Pending | None:
        """The citations of a write (explicit ``specs`` and paths mentioned in ``texts``),
        resolved before its transaction; None when there are none."""
        if self.citations is None:
            if specs:
                raise InvalidInput("citations are not available on this service")
            return None
        pending = self.citations.resolve(who, specs, texts)
        return pending or None

    # ------------------------------------------------------------------ tools
    def remember(
        self,
        who: Identity,
        item: MemoryInput,
        idempotency_key: str | None = None,
        *,
        tool: str = "remember",
    ) -> RememberResult:
        def run(claim: idem.Claim | None) -> RememberResult:
            # one forward pass per text: the injection model's reading of the content is the
            # window the record embeds (held until the record's own vectors are made)
            with self.policy.batched([item.content]):
                with timings.stage("policy"):
                    rec, warnings = self.prepare(who, item)
                cites = self.cite(who, item.citations, [rec.content])
                named = supersede.stated(self, who, rec, item.supersedes)
                vecs = self.engine.embed([rec])  # once: for the write and its candidates
            with timings.stage("scan"):
                found = [c for c in candidates.find(self.engine, rec, vecs.get(rec.id),
                                                    rec.created_at)
                         if c.record.id not in named]  # fmt: skip
            result = RememberResult(
                memoryId=rec.id, scope=rec.scope.value, category=rec.category,
                expiresAt=rec.expires_at, warnings=warnings,
                citations=cites.states() if cites else [],
                supersedes=supersede.reported(named),
                candidates=candidates.listed(found), candidatesNote=candidates.note(found),
            )  # fmt: skip
            result.warnings += self.store_records(
                who, [rec], check=self.bind(claim, result), vectors=vecs,
                extra=self.checks(
                    (lambda conn: cites.write(conn, [rec.id])) if cites else None,
                    supersede.writer(rec, who, named),
                    candidates.writer(rec, who, found),
                ),
            )  # fmt: skip
            return result

        with timings.write():
            return self.once(
                who, idempotency_key, tool, item.model_dump(mode="json"), RememberResult, run
            )

    def remember_task(
        self, who: Identity, content: str, metadata=None, idempotency_key: str | None = None
    ) -> RememberResult:
        item = MemoryInput(content=content, scope="private", category="tasks", metadata=metadata)
        return self.remember(who, item, idempotency_key, tool="remember-task")

    def remember_learning(
        self, who: Identity, content: str, metadata=None, idempotency_key: str | None = None
    ) -> RememberResult:
        item = MemoryInput(content=content, scope="private", category="recent", metadata=metadata)
        return self.remember(who, item, idempotency_key, tool="remember-learning")

    def core_memory(
        self, who: Identity, content: str, metadata=None, idempotency_key: str | None = None
    ) -> RememberResult:
        item = MemoryInput(content=content, scope="personal", category="core", metadata=metadata)
        return self.remember(who, item, idempotency_key, tool="core-memory")

    def commit_insight(
        self,
        who: Identity,
        memory_id: str,
        new_content: str | None = None,
        expected_revision: int | None = None,
        idempotency_key: str | None = None,
    ) -> CommitInsightResult:
        """Promote a temporary memory (recent/tasks) to longterm, in the same scope, no TTL.
        With ``expected_revision``, a memory at another revision is not touched (Conflict)."""
        request = {"memoryId": memory_id, "newContent": new_content,
                   "expectedRevision": expected_revision}  # fmt: skip
        return self.once(
            who, idempotency_key, "commit-insight", request, CommitInsightResult,
            lambda claim: self.retrying(
                lambda: self._commit_insight(who, memory_id, new_content, expected_revision, claim)
            ),
        )  # fmt: skip

    def _commit_insight(
        self,
        who: Identity,
        memory_id: str,
        new_content: str | None,
        expected: int | None,
        claim: idem.Claim | None,
    ) -> CommitInsightResult:
        rec = self.get_visible(who, memory_id)
        self.check_owner(who, rec, "commit")
        if expected is not None and rec.revision != expected:
            raise self.conflict(memory_id, rec.revision, expected)
        if rec.category not in rules.TTL:
            raise InvalidInput(
                f"memory {memory_id} is already permanent ({rec.category}); only recent "
                "and tasks memories can be committed",
                memoryId=memory_id,
                category=rec.category,
            )
        previous = rec.category
        content = rec.content
        if new_content is not None:
            rules.check_content(new_content)
            content = new_content
        updated = rec.model_copy(
            update={
                "category": "longterm",
                "content": content,
                "expires_at": None,
                "updated_at": self.clock(),
                "revision": rec.revision + 1,
                "content_hash": content_hash(content + "\x00" + rec.context),
            }
        )
        updated, warnings = self.engine.screen_record(updated)
        result = CommitInsightResult(
            memoryId=rec.id, previousCategory=previous, category="longterm",
            scope=rec.scope.value, revision=rec.revision + 1, warnings=warnings,
        )  # fmt: skip
        result.warnings += self.engine.apply(
            replace=[updated],
            check=self.checks(
                self.bind(claim, result), self.revision_check(rec.id, rec.revision, expected)
            ),
        ).warnings
        return result

    def check_forget(self, who: Identity, rec: Record, force: bool) -> None:
        self.check_owner(who, rec, "delete")
        if rec.category == "core" and not force:
            raise CoreProtected(
                f"memory {rec.id} is a core memory; pass force=true to delete it", memoryId=rec.id
            )

    def forget(
        self,
        who: Identity,
        memory_id: str,
        force: bool = False,
        idempotency_key: str | None = None,
    ) -> ForgetResult:
        def attempt(claim: idem.Claim | None) -> ForgetResult:
            rec = self.get_visible(who, memory_id)
            self.check_forget(who, rec, force)
            result = ForgetResult(deleted=True, memoryId=rec.id)
            self.engine.apply(
                delete=[rec.id],
                check=self.checks(
                    self.bind(claim, result), self.revision_check(rec.id, rec.revision, None)
                ),
            )
            return result

        def run(claim: idem.Claim | None) -> ForgetResult:
            return self.retrying(lambda: attempt(claim))

        request = {"memoryId": memory_id, "force": force}
        return self.once(who, idempotency_key, "forget", request, ForgetResult, run)

    def share_learning(
        self,
        who: Identity,
        memory_id: str,
        category: str = "learnings",
        keep_original: bool = False,
        idempotency_key: str | None = None,
    ) -> ShareLearningResult:
        """Copy a private/personal memory into the team scope (moving it unless kept)."""
        request = {"memoryId": memory_id, "category": category, "keepOriginal": keep_original}
        return self.once(
            who, idempotency_key, "share-learning", request, ShareLearningResult,
            lambda claim: self.retrying(
                lambda: self._share_learning(who, memory_id, category, keep_original, claim)
            ),
        )  # fmt: skip

    def shareable(self, who: Identity, memory_id: str, category: str) -> Record:
        """The caller's own private or personal memory, which may go to the team under
        ``category`` (share-learning, and its proposal under team review)."""
        rec = self.get_visible(who, memory_id)
        self.check_owner(who, rec, "share")
        if rec.scope not in (Scope.private, Scope.personal):
            raise InvalidInput(
                f"memory {memory_id} is already shared ({rec.scope.value})", memoryId=memory_id
            )
        rules.check_scope_category(Scope.team, category)
        return rec

    def _share_learning(
        self,
        who: Identity,
        memory_id: str,
        category: str,
        keep_original: bool,
        claim: idem.Claim | None,
    ) -> ShareLearningResult:
        rec = self.shareable(who, memory_id, category)
        now = self.clock()
        shared = Record(
            kind=Kind.memory, project_id=who.project_id, agent_id=who.agent_id,
            scope=Scope.team, category=category, content=rec.content, context=rec.context,
            metadata={**rec.metadata, "sharedFrom": rec.id}, created_at=now, updated_at=now,
        )  # fmt: skip
        shared, warnings = self.engine.screen_record(shared)
        result = ShareLearningResult(
            memoryId=shared.id, originalId=rec.id, originalKept=keep_original,
            category=category, warnings=warnings,
        )  # fmt: skip
        copy = self.citations.copier(rec.id, shared.id) if self.citations else None
        result.warnings += self.engine.apply(
            add=[shared],
            delete=[] if keep_original else [rec.id],
            # the copy runs in the checks, before the delete takes the original's citations
            check=self.checks(
                self.bind(claim, result),
                self.revision_check(rec.id, rec.revision, None),  # shared once, from this version
                self.limits_check(who, [shared]),
                copy,
            ),
        ).warnings
        return result
