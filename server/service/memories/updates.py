"""``update-memory``: change one of your memories, merging an edit built on a stale revision.

A change names the revision it was built from (``expectedRevision``); when the memory moved on
meanwhile, the edit is merged with the changes made since (:mod:`.merge`: text three-way, tags
as an add-wins set, other keys per key), and edits that overlap are a ``Conflict`` carrying the
attempt. Every check runs inside the write transaction (:class:`~.writes.WriteCoordination`).
:class:`MemoryUpdates` is the part of :class:`~.memory.MemoryService` that does it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel

from retrieval.records import Kind, Record, content_hash
from retrieval.storage.history import strings_in
from server.service.core import scopes as rules
from server.service.core.errors import InvalidInput
from server.service.core.identity import Identity
from server.service.core.models import MemoryMetadata, UpdateMemoryResult
from server.service.memories import idempotency as idem
from server.service.memories import merge
from server.service.memories.writes import WriteCoordination
from server.service.trust.policy import WritePolicy
from server.service.updating import candidates, supersede

if TYPE_CHECKING:
    from retrieval.cite import CitationState
    from server.service.recalling.citations import Pending


class MemoryUpdates(WriteCoordination):
    """``update-memory`` on top of the write coordination."""

    policy: WritePolicy  # the engine's write policy (MemoryService sets it)

    @staticmethod
    def _merge_is_noop(rec: Record, merged: merge.Merged, citations: list | None) -> bool:
        """The merge adds nothing to the stored revision (e.g. the same edit made twice)."""
        return (
            citations is None
            and merged.content == rec.content
            and merge.same(merged.metadata, rec.metadata)
        )

    def _unleaked(self, rec: Record, data: dict) -> dict:
        """A conflict's data with no secret in its ``base`` that the stored version no longer
        holds (a version kept from before the secret was removed, or scanned with scanning
        off: the store redacts the history when an update removes one)."""
        base = data.get("base")
        scrub = base and self.policy.forgotten([base], [rec.content, *strings_in(rec.metadata)])
        return {**data, "base": scrub(base)} if scrub else data

    def update_memory(
        self,
        who: Identity,
        memory_id: str,
        content: str | None = None,
        metadata: MemoryMetadata | dict | None = None,
        expected_revision: int | None = None,
        idempotency_key: str | None = None,
        citations: list | None = None,
        supersedes: list[str] | None = None,
    ) -> UpdateMemoryResult:
        """Change the content and/or metadata of one of your memories; the revision goes up by
        one. ``metadata`` keys given replace the stored ones (``null`` removes a key), others
        are kept. With a stale ``expected_revision`` the edit is merged with the changes made
        since (:mod:`.merge`: text three-way, tags as an add-wins set, other keys per key;
        ``merged`` and ``parents`` in the result); edits that overlap are a ``Conflict`` with
        ``current_revision`` and the attempt (checked inside the write transaction).
        ``citations`` given: the memory cites exactly those (anchored now) plus the files its
        new content mentions; omitted: its citations are kept and new mentions added.
        ``supersedes``: older memories of the same scope this one now updates
        (:mod:`.supersede`). A new text lists the older records it may restate
        (:mod:`.candidates`)."""
        if isinstance(metadata, BaseModel):
            patch = metadata.model_dump(exclude_unset=True)
        else:
            patch = None if metadata is None else dict(metadata)
        request = {"memoryId": memory_id, "content": content, "metadata": patch,
                   "expectedRevision": expected_revision}  # fmt: skip
        if citations is not None:
            request["citations"] = [
                c.model_dump() if isinstance(c, BaseModel) else c for c in citations
            ]
        if supersedes:
            request["supersedes"] = list(supersedes)
        return self.once(
            who, idempotency_key, "update-memory", request, UpdateMemoryResult,
            lambda claim: self.retrying(
                lambda: self._update_memory(
                    who, memory_id, content, patch, expected_revision, claim, citations,
                    supersedes,
                )
            ),
        )  # fmt: skip

    def _update_memory(
        self,
        who: Identity,
        memory_id: str,
        content: str | None,
        patch: dict | None,
        expected: int | None,
        claim: idem.Claim | None,
        citations: list | None = None,
        supersedes: list[str] | None = None,
    ) -> UpdateMemoryResult:
        if content is None and not patch and citations is None and not supersedes:
            raise InvalidInput(
                "nothing to update: give content, metadata, citations and/or supersedes",
                memoryId=memory_id,
            )
        if content is not None:
            rules.check_content(content)
        cites = self.cite(who, citations, [content] if content is not None else [])
        rec = self.get_visible(who, memory_id)
        self.check_owner(who, rec, "update")
        if rec.kind is not Kind.memory:
            raise InvalidInput(
                f"{memory_id} is a {rec.kind.value}, not a memory; use the "
                f"{rec.kind.value} tools to change it",
                memoryId=memory_id,
                kind=rec.kind.value,
            )
        named = supersede.stated(self, who, rec, supersedes)
        merged = None
        if expected is not None and rec.revision != expected:
            merged = merge.merge_update(
                self.store.reader, rec, expected, content, patch,
                lambda **data: self.conflict(
                    memory_id, rec.revision, expected, **self._unleaked(rec, data)
                ),
            )  # fmt: skip
            if self._merge_is_noop(rec, merged, citations):
                return UpdateMemoryResult(
                    memoryId=rec.id, revision=rec.revision, previousRevision=rec.revision,
                    scope=rec.scope.value, category=rec.category, merged=True,
                    parents=merged.parents, overridden=merged.overridden,
                )  # fmt: skip
            meta = merged.metadata  # checked: a merge over a limit is a conflict
            text = merged.content
        else:
            meta = merge.patched(rec.metadata, patch)
            meta = rules.check_metadata(meta) if patch else meta
            text = rec.content if content is None else content
        if not meta.get("tags"):
            meta.pop("tags", None)
        updated = rec.model_copy(
            update={
                "content": text,
                "metadata": meta,
                "updated_at": self.clock(),
                "revision": rec.revision + 1,
                "content_hash": content_hash(text + "\x00" + rec.context),
            }
        )
        updated, warnings = self.engine.screen_record(updated)
        vecs, found = None, []
        if updated.content != rec.content:  # a new text: the older records it may restate
            vecs = self.engine.embed([updated])  # once: for the write and its candidates
            found = [c for c in candidates.find(self.engine, updated, vecs.get(rec.id),
                                                updated.updated_at) if c.record.id not in named]  # fmt: skip
        result = UpdateMemoryResult(
            memoryId=rec.id, revision=rec.revision + 1, previousRevision=rec.revision,
            scope=rec.scope.value, category=rec.category, warnings=warnings,
            merged=merged is not None, parents=merged.parents if merged else None,
            overridden=merged.overridden if merged else [],
            supersedes=supersede.reported(named),
            candidates=candidates.listed(found), candidatesNote=candidates.note(found),
        )  # fmt: skip
        replace_cites = citations is not None
        link = supersede.writer(rec, who, named)
        shown = candidates.writer(rec, who, found)

        def write_citations(conn) -> None:
            if merged is not None:
                merge.mark_merged(conn, rec.id, rec.revision + 1, merged.parents)
            if replace_cites:
                conn.execute("DELETE FROM citations WHERE record_id=?", (rec.id,))
            if cites:
                cites.write(conn, [rec.id])
            if link is not None:
                link(conn)
            if shown is not None:
                shown(conn)

        if self.citations is not None:
            result.citations = self._citations_after(rec.id, cites, replace_cites)
        result.warnings += self.engine.apply(
            replace=[updated],
            check=self.checks(
                self.bind(claim, result),
                # still at the revision read, else redone from a fresh read (which merges
                # when expected is then stale)
                self.revision_check(rec.id, rec.revision, None),
            ),
            extra=write_citations,
            vectors=vecs,
        ).warnings
        return result

    def _citations_after(
        self, record_id: str, cites: Pending | None, replace: bool
    ) -> list[CitationState]:
        """What a record will cite after an update (for its result)."""
        new = cites.states() if cites else []
        if replace:
            return new
        kept = self.citations.stored([record_id]).get(record_id, [])
        have = {(c.path, c.startLine, c.endLine) for c in kept}
        return kept + [c for c in new if (c.path, c.startLine, c.endLine) not in have]
