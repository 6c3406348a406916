"""The memory service: Pattern's tools as plain Python, on top of the retrieval engine.

Every method takes the caller's :class:`Identity` (from the environment or an authenticated
connection, never from tool arguments) and either returns a pydantic result or raises an
error of ``retrieval.errors``. Writes are one engine transaction each; limits are checked
inside that transaction, so concurrent writers cannot overshoot them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime

from retrieval.engine import Engine
from retrieval.errors import AccessDenied, CoreProtected, InvalidInput, LimitExceeded, NotFound
from retrieval.records import Kind, Record, Scope, content_hash, utcnow

from . import scopes as rules
from .identity import Identity
from .models import (
    CommitInsightResult,
    ForgetResult,
    MemoryInput,
    RememberResult,
    ShareLearningResult,
)
from .secrets import SecretPolicy, apply_policy

Clock = Callable[[], datetime]


class MemoryService:
    def __init__(
        self,
        engine: Engine,
        *,
        clock: Clock = utcnow,
        secret_policy: SecretPolicy | None = SecretPolicy.warn,
    ) -> None:
        self.engine = engine
        self.store = engine.store
        self.clock = clock
        self.secret_policy = secret_policy
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ helpers
    def visible(self, who: Identity, rec: Record) -> bool:
        return rec.bucket in who.visible_buckets()

    def get_visible(self, who: Identity, memory_id: str) -> Record:
        """The record if the caller may see it (invisible and missing look the same)."""
        found = self.store.get([memory_id]).get(memory_id)
        if found is None or not self.visible(who, found):
            raise NotFound(f"memory {memory_id} not found", memoryId=memory_id)
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
        meta = rules.check_metadata(item.metadata.model_dump(exclude_none=True) if item.metadata else {})
        if not meta.get("tags"):
            meta.pop("tags", None)
        content, warnings = apply_policy(item.content, self.secret_policy)
        now = self.clock()
        rec = Record(
            kind=Kind.memory,
            project_id=who.project_id,
            agent_id=who.agent_id,
            scope=scope,
            category=category,
            content=content,
            metadata=meta,
            created_at=now,
            updated_at=now,
            expires_at=rules.expiry_for(category, now),
        )
        return rec, warnings

    def _limits_check(self, who: Identity, records: list[Record]):
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
                        hint = " (forget some with force=true)" if category == "core" else " (run cleanup)"
                        raise LimitExceeded(
                            f"{category}: {n} memories already, limit {limit} per agent{hint}",
                            category=category,
                            limit=limit,
                        )
            shared = [who.bucket("team"), who.bucket("public")]
            new_shared = sum(r.bucket in shared for r in records)
            if new_shared:
                n = conn.execute(
                    "SELECT count(*) FROM records WHERE kind='memory' AND project_id=? "
                    "AND scope IN ('team','public')",
                    (who.project_id,),
                ).fetchone()[0]
                if n + new_shared > rules.MAX_SHARED_PER_PROJECT:
                    raise LimitExceeded(
                        f"project {who.project_id} has {n} shared memories; the limit is "
                        f"{rules.MAX_SHARED_PER_PROJECT}",
                        limit=rules.MAX_SHARED_PER_PROJECT,
                    )

        return check

    @staticmethod
    def _count(conn, buckets: list[str], now: datetime, category: str | None = None) -> int:
        from retrieval.store import ts

        sql = (
            f"SELECT count(*) FROM records WHERE kind='memory' AND bucket IN ({','.join('?' * len(buckets))}) "
            "AND (expires_at IS NULL OR expires_at > ?)"
        )
        params = [*buckets, ts(now)]
        if category:
            sql += " AND category = ?"
            params.append(category)
        return conn.execute(sql, params).fetchone()[0]

    def store_records(self, who: Identity, records: list[Record]) -> None:
        with self._lock:
            self.engine.apply(add=records, check=self._limits_check(who, records))

    # ------------------------------------------------------------------ tools
    def remember(self, who: Identity, item: MemoryInput) -> RememberResult:
        rec, warnings = self.prepare(who, item)
        self.store_records(who, [rec])
        return RememberResult(
            memoryId=rec.id, scope=rec.scope.value, category=rec.category,
            expiresAt=rec.expires_at, warnings=warnings,
        )  # fmt: skip

    def remember_task(self, who: Identity, content: str, metadata=None) -> RememberResult:
        return self.remember(
            who, MemoryInput(content=content, scope="private", category="tasks", metadata=metadata)
        )

    def remember_learning(self, who: Identity, content: str, metadata=None) -> RememberResult:
        return self.remember(
            who, MemoryInput(content=content, scope="private", category="recent", metadata=metadata)
        )

    def core_memory(self, who: Identity, content: str, metadata=None) -> RememberResult:
        return self.remember(
            who, MemoryInput(content=content, scope="personal", category="core", metadata=metadata)
        )

    def commit_insight(
        self, who: Identity, memory_id: str, new_content: str | None = None
    ) -> CommitInsightResult:
        """Promote a temporary memory (recent/tasks) to longterm, in the same scope, no TTL."""
        with self._lock:
            rec = self.get_visible(who, memory_id)
            self.check_owner(who, rec, "commit")
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
                content, _ = apply_policy(new_content, self.secret_policy)
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
            self.engine.apply(replace=[updated])
        return CommitInsightResult(
            memoryId=rec.id, previousCategory=previous, category="longterm", scope=rec.scope.value
        )

    def check_forget(self, who: Identity, rec: Record, force: bool) -> None:
        self.check_owner(who, rec, "delete")
        if rec.category == "core" and not force:
            raise CoreProtected(
                f"memory {rec.id} is a core memory; pass force=true to delete it", memoryId=rec.id
            )

    def forget(self, who: Identity, memory_id: str, force: bool = False) -> ForgetResult:
        with self._lock:
            rec = self.get_visible(who, memory_id)
            self.check_forget(who, rec, force)
            self.engine.apply(delete=[rec.id])
        return ForgetResult(deleted=True, memoryId=rec.id)

    def share_learning(
        self, who: Identity, memory_id: str, category: str = "learnings", keep_original: bool = False
    ) -> ShareLearningResult:
        """Copy a private/personal memory into the team scope (moving it unless kept)."""
        with self._lock:
            rec = self.get_visible(who, memory_id)
            self.check_owner(who, rec, "share")
            if rec.scope not in (Scope.private, Scope.personal):
                raise InvalidInput(
                    f"memory {memory_id} is already shared ({rec.scope.value})", memoryId=memory_id
                )
            rules.check_scope_category(Scope.team, category)
            now = self.clock()
            shared = Record(
                kind=Kind.memory, project_id=who.project_id, agent_id=who.agent_id,
                scope=Scope.team, category=category, content=rec.content, context=rec.context,
                metadata={**rec.metadata, "sharedFrom": rec.id}, created_at=now, updated_at=now,
            )  # fmt: skip
            self.engine.apply(
                add=[shared],
                delete=[] if keep_original else [rec.id],
                check=self._limits_check(who, [shared]),
            )
        return ShareLearningResult(
            memoryId=shared.id, originalId=rec.id, originalKept=keep_original, category=category
        )
