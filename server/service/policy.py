"""The write policy: the secret scan and the injection scan, applied to every stored record.

One :class:`WritePolicy` per store, built from the environment by the :class:`Runtime` (or by a
test) and installed as the engine's screen (``Engine.screen``), which every write passes:
``Engine.add``, ``update`` and ``apply`` screen each record they store, before it is embedded
(what is embedded is what is stored). So memories, updates, commit-insight, share-learning,
imports, bulk writes, graph observations, lessons, ingested chunks and any later source
(session transcripts, hooks) obey the same rules without calling anything themselves. A caller
that wants the warnings, or a per-item decision (bulk, import, ingest skips a file), calls
``engine.screen_record(record)`` first; the engine does not scan a record twice.

For one record:

* secrets (``PATTERN_SECRET_POLICY``, :mod:`.secrets`) in its content, its context and every
  string of its metadata (``source``, ``tags``, any other key, nested values, keys too): ``warn``
  keeps them and warns, ``redact`` replaces them with ``[REDACTED:kind]``, ``block`` refuses
  the write (``InvalidInput`` with ``policy="secret"``);
* instruction-like text (``PATTERN_INJECTION_POLICY``, :mod:`.injection`) in the same strings:
  ``warn`` stores the record with ``metadata.suspicious`` = the reason and warns (recall then leaves it out of its
  text), ``block`` refuses the write (``InvalidInput`` with ``policy="injection"``). The key is
  the policy's own: it is set or removed on every write, whatever the caller sent.

``PATTERN_DISABLE_CONTENT_SCAN=true`` turns both off. ``screen_text`` applies the same rules to
a bare text, and ``screen_value`` to every string of a JSON-like value, for what is stored
beside the records: graph entity names and types, relation names and types, every lesson field
(verification steps, environment, extra keys), the cited lines a citation keeps, a review's
rejection reason, session transcript turns. ``show`` redacts secrets from text about to be
shown that was never stored (verify's diff of a cited file), unless the policy is ``warn``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from retrieval.records import Record

from . import injection, secrets
from .errors import InvalidInput
from .injection import InjectionPolicy
from .secrets import SecretPolicy

SUSPICIOUS = "suspicious"  # the metadata key of a flagged record


@dataclass(frozen=True)
class WritePolicy:
    secrets: SecretPolicy | None = SecretPolicy.warn
    injection: InjectionPolicy | None = InjectionPolicy.warn

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> WritePolicy:
        env = os.environ if environ is None else environ
        return cls(secrets.policy_from_env(env), injection.policy_from_env(env))

    @property
    def signature(self) -> str:
        """Names the policy (ingestion re-reads files when it changes)."""
        return f"secrets={self.secrets or 'off'};injection={self.injection or 'off'}"

    # ------------------------------------------------------------------ injection
    def suspicious(self, *texts: str) -> str | None:
        """The injection verdict over ``texts`` (None: clean, or scanning is off); raises
        ``InvalidInput`` under ``block``."""
        if self.injection is None:
            return None
        for text in texts:
            if text and (reason := injection.verdict(text).suspicious):
                if self.injection is InjectionPolicy.block:
                    raise InvalidInput(
                        f"content reads like instructions to the model ({reason}); it was not "
                        "stored (PATTERN_INJECTION_POLICY=block). Store facts, not orders to "
                        "the agent that will read them; quote an attack to describe it",
                        policy="injection",
                        reason=reason,
                    )
                return reason
        return None

    @staticmethod
    def _warning(reason: str) -> str:
        return (
            f"content reads like instructions to the model ({reason}); stored marked "
            "suspicious: recall leaves it out of its text unless includeSuspicious is set"
        )

    # ------------------------------------------------------------------ screens
    def screen_text(self, text: str) -> tuple[str, list[str]]:
        """(text to store, warnings) for one bare text; raises ``InvalidInput`` to refuse."""
        text, warnings = secrets.apply_policy(text, self.secrets)
        if reason := self.suspicious(text):
            warnings.append(self._warning(reason))
        return text, warnings

    def screen_value(self, value: Any, where: str = "") -> tuple[Any, list[str], str | None]:
        """(value to store, warnings, injection reason or None) for a JSON-like value: every
        string in it, dict keys included, passes the secret policy and the injection scan (the
        first suspicious string gives the reason). Raises ``InvalidInput`` to refuse; returns
        ``value`` itself when nothing changes."""
        warnings: list[str] = []
        reasons: list[str] = []

        def walk(v: Any, path: str) -> Any:
            if isinstance(v, str):
                if not v:
                    return v
                out, found = secrets.apply_policy(v, self.secrets)
                warnings.extend(f"{path}: {w}" if path else w for w in found)
                if (reason := self.suspicious(out)) and not reasons:
                    reasons.append(reason)
                return out
            if isinstance(v, Mapping):
                new = {
                    walk(k, path): walk(x, f"{path}.{k}" if path else str(k)) for k, x in v.items()
                }
                return v if new == v else new
            if isinstance(v, list | tuple):
                new = [walk(x, f"{path}[{i}]") for i, x in enumerate(v)]
                return v if new == list(v) else type(v)(new)
            return v

        out = walk(value, where)
        return out, warnings, (reasons[0] if reasons else None)

    def show(self, text: str) -> str:
        """``text`` as it may be shown: secrets redacted unless the policy is ``warn`` (or off);
        never refuses (for what was read, not stored: a diff of a cited file)."""
        if self.secrets in (None, SecretPolicy.warn) or not text:
            return text
        return secrets.apply_policy(text, SecretPolicy.redact)[0]

    def __call__(self, record: Record) -> tuple[Record, list[str]]:
        """The engine's screen: (record to store, warnings); raises ``InvalidInput`` to refuse.
        Returns ``record`` itself when nothing changes."""
        content, warnings = secrets.apply_policy(record.content, self.secrets)
        context = record.context
        if context:
            context, found = secrets.apply_policy(context, self.secrets)
            warnings += [f"context: {w}" for w in found]
        reason = self.suspicious(content, context)
        given = {k: v for k, v in record.metadata.items() if k != SUSPICIOUS}
        meta, found, meta_reason = self.screen_value(given, "metadata")
        warnings += found
        reason = reason or meta_reason
        if reason:
            warnings.append(self._warning(reason))
        update: dict = {}
        if content != record.content or context != record.context:
            update.update(content=content, context=context)
        if record.metadata.get(SUSPICIOUS) != reason or meta is not given:
            update["metadata"] = {**meta, SUSPICIOUS: reason} if reason else meta
        if not update:
            return record, warnings
        out = record.model_copy(update=update)
        out.content_hash = out.current_hash()
        return out, warnings


__all__ = ["SUSPICIOUS", "InjectionPolicy", "SecretPolicy", "WritePolicy"]
