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
  the write (``InvalidInput`` with ``policy="secret"``); a secret an update removes from a
  memory is redacted from the memory's kept versions too (:meth:`WritePolicy.forgotten`);
* instruction-like text (``PATTERN_INJECTION_POLICY``) in the same strings and its
  ``entity_name`` (a lesson's name, an observation's entity): the rules of
  :mod:`.injection`, then, for a text the rules pass, the linear model of
  :mod:`.injection_model` over its embedding (texts of three words or more, embedded with the
  engine's embedder when it is the model the weights were fit for and loaded; until then the
  rules decide alone, and :attr:`WritePolicy.injection_scan` and ``pattern_health`` say so;
  ``PATTERN_INJECTION_MODEL=off`` keeps the rules only). ``warn`` stores the record with
  ``metadata.suspicious`` = the reason and warns (recall then leaves it out of its text),
  ``block`` refuses the write (``InvalidInput`` with ``policy="injection"``). The key is
  the policy's own: it is set or removed on every write, whatever the caller sent.

``PATTERN_DISABLE_CONTENT_SCAN=true`` turns both off. ``screen_text`` applies the same rules to
a bare text, and ``screen_value`` to every string of a JSON-like value, for what is stored
beside the records: graph entity names and types, relation names and types, every lesson field
(verification steps, environment, extra keys), the cited lines a citation keeps, a review's
rejection reason, session transcript turns. ``show`` redacts secrets from text about to be
shown that was never stored (verify's diff of a cited file), unless the policy is ``warn``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from retrieval.records import Record
from server.service.core.errors import InvalidInput
from server.service.trust.injection_scan import injection, injection_model
from server.service.trust.injection_scan.injection import InjectionPolicy
from server.service.trust.injection_scan.injection_model import Detector
from server.service.trust.secret_scan import secrets
from server.service.trust.secret_scan.secrets import SecretPolicy

log = logging.getLogger(__name__)
SUSPICIOUS = "suspicious"  # the metadata key of a flagged record
MODEL_ENV = "PATTERN_INJECTION_MODEL"  # "off": the rules alone


@dataclass
class Unattended:
    """A write no person asked for (a learned lesson, an indexed exchange, a progress row, an
    import), while it is screened: its ``source`` names the path, ``warnings`` collects what the
    policy said (nobody reads a tool result for it: the caller files them for review)."""

    source: str
    warnings: list[str] = field(default_factory=list)


_UNATTENDED: ContextVar[Unattended | None] = ContextVar("pattern_unattended", default=None)


@contextmanager
def unattended(source: str) -> Iterator[Unattended]:
    """Within the block, every screen of every :class:`WritePolicy` treats secrets at least as
    ``redact`` (``warn`` and off become ``redact``; ``block`` stays), and collects its warnings
    in the yielded :class:`Unattended`. Nested blocks share the outer one."""
    outer = _UNATTENDED.get()
    if outer is not None:
        yield outer
        return
    state = Unattended(source)
    token = _UNATTENDED.set(state)
    try:
        yield state
    finally:
        _UNATTENDED.reset(token)


def _noted(warnings: Sequence[str]) -> None:
    """Keep ``warnings`` for the unattended write in progress, if any."""
    state = _UNATTENDED.get()
    if state is not None and warnings:
        state.warnings.extend(w for w in warnings if w not in state.warnings)


@dataclass(frozen=True)
class WritePolicy:
    secrets: SecretPolicy | None = SecretPolicy.warn
    injection: InjectionPolicy | None = InjectionPolicy.warn
    # the injection scan's second line (None: rules only) and where its embedder comes from
    # (the engine's, read at each write: it attaches once the model has loaded)
    detector: Detector | None = field(default_factory=injection_model.default, compare=False)
    embedder: Callable[[], Any] | None = field(default=None, compare=False, repr=False)
    # the reasons already logged for a write screened by the rules alone (each logged once;
    # shared with the copies made by with_embedder)
    noted: set[str] = field(default_factory=set, compare=False, repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> WritePolicy:
        env = os.environ if environ is None else environ
        off = env.get(MODEL_ENV, "").strip().lower() in ("off", "0", "false", "no")
        return cls(
            secrets.policy_from_env(env),
            injection.policy_from_env(env),
            None if off else injection_model.default(),
        )

    def with_embedder(self, embedder: Callable[[], Any]) -> WritePolicy:
        """This policy, its model reading vectors from ``embedder()`` (the engine's)."""
        return replace(self, embedder=embedder)

    @property
    def injection_scan(self) -> str:
        """What screens instruction-like text now: ``off``, ``rules + model``, or ``rules
        only`` with the reason."""
        if self.injection is None:
            return "off"
        if self.detector is None:
            return "rules only (no model: PATTERN_INJECTION_MODEL=off or its weights missing)"
        emb = self.embedder() if self.embedder is not None else None
        if emb is None:
            return "rules only (the embedding model is not loaded yet)"
        if not Detector.usable(emb):
            return (
                f"rules only (the model was fit on {injection_model.MODEL_ID} vectors, the "
                f"embedder is {getattr(emb, 'model_id', '?')})"
            )
        return "rules + model"

    @property
    def secret_policy(self) -> SecretPolicy | None:
        """The secret policy a screen applies now: the store's, raised to ``redact`` for an
        unattended write (:func:`unattended`), whose warnings have no reader."""
        if _UNATTENDED.get() is not None and self.secrets in (None, SecretPolicy.warn):
            return SecretPolicy.redact
        return self.secrets

    @property
    def signature(self) -> str:
        """Names the policy (ingestion re-reads files when it changes)."""
        return f"secrets={self.secrets or 'off'};injection={self.injection or 'off'}"

    @contextmanager
    def batched(self, texts: Sequence[str]) -> Iterator[None]:
        """Within the block, the injection model reads the vectors of ``texts`` (the records a
        bulk write is about to screen) from one batch embedded on entry, and the engine reuses
        them for the records' own vectors when it embeds the same text (see
        ``SentenceTransformerEmbedder.holding``). Every record is still screened on its own."""
        emb = self.embedder() if self.embedder is not None else None
        hold = getattr(emb, "holding", None)
        if (
            self.injection is None
            or self.detector is None
            or hold is None
            or not Detector.usable(emb)
        ):
            yield
            return
        # the records' own texts, and an exchange's text as the model reads it (without the
        # session indexer's part labels): one batch for both
        read = [x for t in texts if isinstance(t, str) for x in (t, injection_model.unlabelled(t))]
        with hold(list(dict.fromkeys(w for t in read for w in injection_model.windows(t)))):
            yield

    # ------------------------------------------------------------------ injection
    def suspicious(self, *texts: str, fields: Sequence[str] = ()) -> str | None:
        """The injection verdict over ``texts`` (prose: a memory, an observation, a turn) and
        ``fields`` (a context, a title, a tag, a name, a metadata value), None when clean or
        scanning is off: the rules on each, then, for what they pass, the model on the prose
        and on the fields long enough to be prose (``FIELD_MIN_WORDS``). Raises
        ``InvalidInput`` under ``block``."""
        if self.injection is None:
            return None
        texts = tuple(t for t in texts if t)
        fields = tuple(f for f in fields if f)
        found = [_verdict(t) for t in texts + fields]
        reason = next((v.suspicious for v in found if v.suspicious), None)
        if reason is None and (texts or fields):
            reason = self._model_reason(_readings(texts, fields, found))
        if reason and self.injection is InjectionPolicy.block:
            raise InvalidInput(
                f"content reads like instructions to the model ({reason}); it was not "
                "stored (PATTERN_INJECTION_POLICY=block). Store facts, not orders to "
                "the agent that will read them; quote an attack to describe it",
                policy="injection",
                reason=reason,
            )
        return reason

    def _note_rules_only(self, state: str) -> None:
        """Log, once per reason, that a write was screened by the rules alone."""
        if state not in self.noted:
            self.noted.add(state)
            log.warning("injection scan: %s", state)

    def _model_reason(self, readings: list[Reading]) -> str | None:
        """The model's reason for the first text it flags; None when it flags none or cannot
        run (logged once per state: the rules alone decided)."""
        det = self.detector
        emb = self.embedder() if self.embedder is not None and det is not None else None
        if det is None or not Detector.usable(emb):
            self._note_rules_only(self.injection_scan)
            return None
        readings = [r for r in readings if injection_model.windows(r.text, r.min_words)]
        if not readings:
            return None
        try:
            probs = det.probability_many([r.text for r in readings], emb,
                                         [r.findings for r in readings],
                                         [r.min_words for r in readings])  # fmt: skip
        except Exception as exc:  # an embedder failure must not fail the write: rules decided
            self._note_rules_only(f"rules only (the model failed: {type(exc).__name__}: {exc})")
            return None
        return next((det.reason(p) for p in probs if det.flags(p)), None)

    @staticmethod
    def _warning(reason: str) -> str:
        return (
            f"content reads like instructions to the model ({reason}); stored marked "
            "suspicious: recall leaves it out of its text unless includeSuspicious is set"
        )

    # ------------------------------------------------------------------ screens
    def screen_text(self, text: str) -> tuple[str, list[str]]:
        """(text to store, warnings) for one bare text; raises ``InvalidInput`` to refuse."""
        text, warnings = secrets.apply_policy(text, self.secret_policy)
        if reason := self.suspicious(text):
            warnings.append(self._warning(reason))
        _noted(warnings)
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
                out, found = _secret_policy(v, self.secret_policy)
                warnings.extend(f"{path}: {w}" if path else w for w in found)
                if (reason := self.suspicious(fields=(out,))) and not reasons:
                    reasons.append(reason)
                return out
            if isinstance(v, Mapping):
                new: dict = {}
                for k, x in v.items():
                    seen = len(warnings)
                    key = base = walk(k, path)
                    n = 1
                    while key in new:  # two keys redacted alike: both values kept
                        n += 1
                        key = f"{base} ({n})"
                    # a path names a key that holds a secret redacted (under warn too)
                    name = secrets.apply_policy(k, SecretPolicy.redact)[0] if (
                        len(warnings) > seen) else str(base)  # fmt: skip
                    new[key] = walk(x, f"{path}.{name}" if path else name)
                return v if new == v else new
            if isinstance(v, list | tuple):
                new = [walk(x, f"{path}[{i}]") for i, x in enumerate(v)]
                return v if new == list(v) else type(v)(new)
            return v

        out = walk(value, where)
        _noted(warnings + [self._warning(r) for r in reasons])
        return out, warnings, (reasons[0] if reasons else None)

    def forgotten(self, old: Sequence[str], new: Sequence[str]) -> Callable[[str], str] | None:
        """A function that redacts the secrets the strings ``old`` hold and ``new`` do not, or
        None when there are none (or secret scanning is off). The store applies it to a
        memory's kept versions when an update removes a secret (``retrieval.storage.history``), and a
        conflict to the base it shows."""
        if self.secret_policy is None:
            return None
        same = set(new)
        dropped: dict[str, str] = {}
        for text in old:
            if text in same:  # unchanged: the new version holds whatever it holds
                continue
            for f in secrets.scan(text):
                found = text[f.start : f.end]
                if not any(found in t for t in new):
                    dropped[found] = secrets.marker(f.kind)
        if not dropped:
            return None
        longest_first = sorted(dropped, key=len, reverse=True)

        def scrub(text: str) -> str:
            for found in longest_first:
                text = text.replace(found, dropped[found])
            return text

        return scrub

    def show(self, text: str) -> str:
        """``text`` as it may be shown: secrets redacted unless the policy is ``warn`` (or off);
        never refuses (for what was read, not stored: a diff of a cited file)."""
        if self.secret_policy in (None, SecretPolicy.warn) or not text:
            return text
        return secrets.apply_policy(text, SecretPolicy.redact)[0]

    def screen_state(self, value: Any) -> Any:
        """``value`` (JSON-like: state kept beside the records, such as the session indexer's
        progress rows) with every string, dict keys included, passed through :meth:`show`.
        Never refuses: a secret in such state is redacted under ``block`` too, so the work it
        records goes on. Returns ``value`` itself when nothing changes."""
        if self.secret_policy in (None, SecretPolicy.warn):
            return value
        if isinstance(value, str):
            return self.show(value)
        if isinstance(value, Mapping):
            new = {self.screen_state(k): self.screen_state(v) for k, v in value.items()}
            return value if new == value else new
        if isinstance(value, list | tuple):
            new = [self.screen_state(v) for v in value]
            return value if new == list(value) else type(value)(new)
        return value

    def __call__(self, record: Record) -> tuple[Record, list[str]]:
        """The engine's screen: (record to store, warnings); raises ``InvalidInput`` to refuse.
        Returns ``record`` itself when nothing changes."""
        policy = self.secret_policy
        content, warnings = secrets.apply_policy(record.content, policy)
        context = record.context
        if context:
            context, found = secrets.apply_policy(context, policy)
            warnings += [f"context: {w}" for w in found]
        reason = self.suspicious(content, fields=(context, record.entity_name or ""))
        given = {k: v for k, v in record.metadata.items() if k != SUSPICIOUS}
        meta, found, meta_reason = self.screen_value(given, "metadata")
        warnings += found
        reason = reason or meta_reason
        if reason:
            warnings.append(self._warning(reason))
        _noted(warnings)
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


@dataclass(frozen=True)
class Reading:
    """One text the model reads, with the prose words it needs and the rules' findings."""

    text: str
    min_words: int
    findings: Any


def _readings(texts: tuple[str, ...], fields: tuple[str, ...], found: list) -> list[Reading]:
    """What the model reads of a record: each prose text from ``MIN_WORDS`` prose words, each
    field from ``FIELD_MIN_WORDS``."""
    out = []
    for text, verdict in zip(texts, found, strict=False):
        out.append(Reading(text, injection_model.MIN_WORDS, verdict.findings))
    for text, verdict in zip(fields, found[len(texts) :], strict=True):
        out.append(Reading(text, injection_model.FIELD_MIN_WORDS, verdict.findings))
    return out


SHORT = 64  # a string this short (a metadata key, a tag, a name) is scanned once per process


@lru_cache(maxsize=8192)
def _short_verdict(text: str) -> injection.Verdict:
    return injection.verdict(text)


def _verdict(text: str) -> injection.Verdict:
    """:func:`.injection.verdict`; a short string's is remembered (the same keys and tags come
    with every record of a bulk write)."""
    return _short_verdict(text) if len(text) <= SHORT else injection.verdict(text)


@lru_cache(maxsize=8192)
def _short_secret_policy(text: str, policy: SecretPolicy | None) -> tuple[str, tuple[str, ...]]:
    out, warnings = secrets.apply_policy(text, policy)
    return out, tuple(warnings)


def _secret_policy(text: str, policy: SecretPolicy | None) -> tuple[str, list[str]]:
    """:func:`.secrets.apply_policy`; a short string's result is remembered (``block`` raises
    every time: a refusal is never cached)."""
    if len(text) > SHORT:
        return secrets.apply_policy(text, policy)
    out, warnings = _short_secret_policy(text, policy)
    return out, list(warnings)


__all__ = [
    "SUSPICIOUS",
    "InjectionPolicy",
    "SecretPolicy",
    "Unattended",
    "WritePolicy",
    "unattended",
]
