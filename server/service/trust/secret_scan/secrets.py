"""Secret scanning: spot credentials in content before it is stored, then warn, block or redact.

Pure module (standard library + pydantic). ``scan`` finds credentials; ``apply_policy`` decides
what happens to content that holds some; ``policy_from_env`` reads the operator's choice.
The rule tables are data, in :mod:`.secret_rules`; the checks that tell a credential from a
placeholder or an identifier are in :mod:`.secret_checks`.

Environment:

* ``PATTERN_SECRET_POLICY`` — ``warn`` (default), ``block`` or ``redact``.
* ``PATTERN_DISABLE_CONTENT_SCAN`` — ``true``/``1``/``yes`` turns scanning off entirely (it wins
  over ``PATTERN_SECRET_POLICY``).

How detection works
-------------------
Vendor tokens with a distinctive shape (``AKIA…``, ``ghp_…``, ``sk-ant-…``, PEM private keys, …)
are matched by pattern, with an extra sanity check where the bare pattern is loose (entropy for
``sk-…``/``hf_…``, a decodable header for JWTs, ``user:password`` inside ``Basic`` credentials,
key material inside a PEM block). Everything else needs *keyword context*: an assignment
(``=``, ``:=``, ``=>``, or a ``:`` right after the key) whose key names a password (``password``,
``DB_PASSWORD``, ``dbPassword``, ``passwd``, ``passphrase``; ``pass``/``pwd``/``pw`` only with a
``_``/``-``/``.`` prefix such as ``DB_PASS``) or a secret (``api_key``, ``apiKey``,
``client_secret``, ``auth_token``, ``secret``, ``token``, …), credentials inside a URL
(``scheme://user:pw@host``), or an ``Authorization`` header.

Keyword matches are filtered so code and docs *about* credentials stay quiet:

* Placeholder values are ignored: shorter than 5 characters, one or two distinct characters
  (``***``, ``xxxxx``), templating or references (``${X}``, ``{{ x }}``, ``%(x)s``,
  ``<password>``, ``$1``, ``:password``, ``@pw``, ``!vault``), obvious dummy words optionally
  followed by digits (``changeme``, ``secret123``, ``your_password_here``, ``admin``, ``none``,
  ``str``…), names of credentials (``challengePassword``), and anything containing ``example``,
  ``placeholder``, ``redacted``, ``dummy``, ``changeme``, ``xxxx``, ``your``, ``password``,
  ``passwd`` or ``::``. A value that *contains* the word "password" is a description or a
  throw-away example, not a credential worth a warning.
* Password values must not be paths, URLs or ARNs, nor read like a sentence (3+ spaces). Bare
  (unquoted) values must contain a digit or a symbol and must not be followed by ``(``/``[``,
  so identifiers and code (``password = get_password()``, ``password: str``,
  ``password = settings.db.password``) are never taken for a secret. ``==`` is a comparison.
* Generic key/token/secret values additionally need at least 16 characters, letters *and*
  digits, no identifier shape (``user_profile_cache_v2``, ``Sam3TrackerAttention``), no UUID
  (request ids and idempotency tokens), no file name, and Shannon entropy of at least 3.5
  bits/char (3.0 for hex-only values of 32+ characters). ``*_key`` needs a qualifier (``api``,
  ``secret``, ``private``, ``access``, …: ``cache_key`` is not a credential); a bare ``key = …``
  is accepted only with an even stricter value (20+ chars, upper+lower+digits, entropy >= 4.0).
  ``page_token``, ``next_token``, ``max_tokens``-style names are not secrets.
* URL passwords are percent-decoded before the placeholder test (``user:pass@`` is ignored).

Overlapping findings are de-duplicated: the most specific rule wins (vendor token over URL
credentials over a generic assignment over a password assignment), then the longer match.
Findings cover only the secret itself (``password = "[REDACTED:password_assignment]"``), so
redaction keeps the surrounding text. Masked previews show at most the first 4 characters and
never more than a third of the secret.

Two other spellings are read too (:mod:`.secret_spellings`): a token with invisible characters
inside (a zero-width space, a soft hyphen, a word joiner, a byte-order mark) is found in a copy
without them, and its finding covers the original characters, invisible ones included; a run of
32 or more hex digits (``xxd -p .env``, possibly wrapped over lines) that decodes to mostly
printable text is read decoded, and a secret there redacts the whole run (of the inner secret's
kind). Overlapping findings of these readers and of the text as it stands are joined.

Cost is linear in the text: vendor patterns only run when their literal prefix occurs, and
assignments are only examined around a key word (``pass``, ``pw``, ``secret``, ``token``,
``key``).

Deliberately not covered (too noisy without more context, or not secret): publishable keys
(``pk_live_…``), AWS IAM *ids* (``AIDA…``/``AROA…``) and AWS documentation keys (``…EXAMPLE``),
bare hex/UUID/base64 strings with no keyword (git SHAs, digests and ids look the same; a hex
run is only decoded, never taken for a secret itself), SQL
``… WITH PASSWORD '…'``/``IDENTIFIED BY`` and CLI flags such as ``mysql -pSECRET`` (no
assignment operator), unquoted all-letter passwords (``password: hunter`` is indistinguishable
from ``password: variable_name``) and quoted passphrases of four or more words.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator, Mapping
from enum import StrEnum
from typing import TypeVar
from urllib.parse import unquote

import re2
from pydantic import BaseModel, ConfigDict, Field

from server.service.core.errors import InvalidInput
from server.service.trust.secret_scan import secret_spellings as spellings
from server.service.trust.secret_scan.secret_assignments import Candidate, assignments
from server.service.trust.secret_scan.secret_checks import PORT_LIKE, is_placeholder, preview_of
from server.service.trust.secret_scan.secret_rules import (
    PEM_BEGIN,
    PEM_BODY,
    PEM_END,
    PEM_MATERIAL,
    PEM_MAX,
    RANK_PRIVATE_KEY,
    RANK_URL,
    RULES,
    SCHEME_CHARS,
    URL_CREDENTIALS,
    WEB_SCHEMES,
)

__all__ = [
    "KINDS",
    "Finding",
    "SecretPolicy",
    "apply_policy",
    "env_policy",
    "marker",
    "policy_from_env",
    "scan",
]

POLICY_ENV = "PATTERN_SECRET_POLICY"
DISABLE_ENV = "PATTERN_DISABLE_CONTENT_SCAN"
_TRUTHY = frozenset({"true", "1", "yes"})
E = TypeVar("E", bound=StrEnum)
MAX_DEPTH = 2  # hex of hex: decoded twice at most


class SecretPolicy(StrEnum):
    """What to do with content that looks like it holds a credential."""

    warn = "warn"
    block = "block"
    redact = "redact"


def env_policy(environ: Mapping[str, str], variable: str, kind: type[E]) -> E | None:
    """The policy ``variable`` names (default ``warn``), or ``None`` when content scanning is
    disabled (``PATTERN_DISABLE_CONTENT_SCAN``). Raises ``InvalidInput`` for an unknown value.
    Shared by the secret and the injection policies."""
    if environ.get(DISABLE_ENV, "").strip().lower() in _TRUTHY:
        return None
    raw = environ.get(variable, "").strip()
    if not raw:
        return kind("warn")
    try:
        return kind(raw.lower())
    except ValueError:
        allowed = [p.value for p in kind]
        raise InvalidInput(
            f"{variable} must be one of {', '.join(allowed)} (got {raw!r}); "
            f"set {DISABLE_ENV}=true to turn content scanning off",
            variable=variable,
            value=raw,
            allowed=allowed,
        ) from None


def policy_from_env(environ: Mapping[str, str] = os.environ) -> SecretPolicy | None:
    """The configured ``PATTERN_SECRET_POLICY`` (see :func:`env_policy`)."""
    return env_policy(environ, POLICY_ENV, SecretPolicy)


class Finding(BaseModel):
    """One suspected credential: its kind, its span in the text, and a masked preview."""

    model_config = ConfigDict(frozen=True)

    kind: str
    start: int = Field(ge=0)
    end: int = Field(ge=0)
    preview: str


# --------------------------------------------------------------------------- helpers


# --------------------------------------------------------------------------- rules


def _private_keys(text: str) -> Iterator[tuple[int, int]]:
    pos = 0
    while (begin := PEM_BEGIN.search(text, pos)) is not None:
        following = PEM_BEGIN.search(text, begin.end())
        limit = min(following.start() if following else len(text), begin.end() + PEM_MAX)
        end = PEM_END.search(text, begin.end(), limit)
        if end is not None:
            stop = end.end()
        else:
            body = PEM_BODY.match(text, begin.end())  # always matches, possibly empty
            stop = body.end() if body is not None else begin.end()
        if PEM_MATERIAL.search(text, begin.end(), stop):  # a bare header is a mention, not a key
            yield begin.start(), stop
        pos = stop


def _hint_set():
    """RE2's ``Set`` of the rules' hints (rule ``i``: pattern ``i``, its hints as literals), on
    bytes as they are (Latin-1: a hint, all ASCII, is found where its bytes stand)."""
    global _HINTS
    if _HINTS is None:
        options = re2.Options()
        options.encoding = re2.Options.Encoding.LATIN1
        options.log_errors = False
        hints = re2._re2.Set(re2._Anchor.UNANCHORED, options)
        for rule in RULES:
            if not all(h.isascii() for h in rule.hints):
                raise ValueError(f"a hint outside ASCII: {rule.hints}")
            # (no hints: a class no byte is in, as ``any`` of none is false)
            body = "|".join(re2.escape(h) for h in rule.hints) or r"[^\x00-\xff]"
            hints.Add(body.encode("ascii"))
        hints.Add(b"")  # always occurs: a pass that failed reports nothing, not even this
        hints.Add(spellings.UNUSUAL_BYTES)  # another spelling to read (_UNUSUAL)
        if not hints.Compile():
            raise ValueError("RE2's Set of the hints could not be compiled")
        _HINTS = hints
    return _HINTS


_HINTS = None
_UNUSUAL = len(RULES) + 1  # in _hinted's answer: an invisible character or a hex run occurs


def _hinted(raw: bytes) -> frozenset[int]:
    """The rules one of whose hints occurs in ``raw`` (the text's UTF-8, ASCII lower-cased),
    and :data:`_UNUSUAL` when another spelling does: one pass for all of them (a substring test
    of each hint, and RE2's search of the spellings, if RE2 could not tell)."""
    found = _hint_set().Match(raw)
    if len(RULES) not in found:
        rules = {i for i, r in enumerate(RULES) if any(h.encode() in raw for h in r.hints)}
        if spellings.UNUSUAL.search(raw.decode("utf-8", "surrogatepass")) is not None:
            rules.add(_UNUSUAL)
        return frozenset(rules)
    return frozenset(found) - {len(RULES)}


def _candidates(text: str) -> tuple[list[Candidate], bool]:
    """(the candidates of ``text``, whether it holds another spelling to read)."""
    # ASCII lower-cased, same length and offsets as text (on the bytes: no byte of a character
    # outside ASCII is an ASCII one)
    raw = text.encode("utf-8", "surrogatepass").lower()
    low = raw.decode("utf-8", "surrogatepass")
    found: list[Candidate] = []
    if "-----begin " in low:
        found.extend(
            Candidate("private_key", s, e, RANK_PRIVATE_KEY) for s, e in _private_keys(text)
        )

    hinted = _hinted(raw)
    for rank, rule in enumerate(RULES):
        if rank not in hinted:
            continue
        for m in rule.pattern.finditer(text):
            start, end = m.span(rule.group)
            if start == end:
                continue
            if rule.check is not None and not rule.check(m.group(rule.group)):
                continue
            found.append(Candidate(rule.kind, start, end, rank))

    for m in URL_CREDENTIALS.finditer(text):
        pw = m.group("pw")
        # a placeholder ("user:pass@", ":${DB_PASSWORD}@") or a port in an odd URL ("host:8080@")
        if PORT_LIKE.fullmatch(pw) or is_placeholder(unquote(pw)):
            continue
        s = m.start()
        while s > 0 and m.start() - s < 24 and text[s - 1] in SCHEME_CHARS:
            s -= 1
        scheme = text[s : m.start()].lower()
        if not scheme or not scheme[0].isalpha():
            continue
        kind = "basic_auth_url" if scheme in WEB_SCHEMES else "connection_string"
        found.append(Candidate(kind, *m.span("pw"), RANK_URL))

    found.extend(assignments(text, low))
    return found, _UNUSUAL in hinted


KINDS: frozenset[str] = frozenset(
    {r.kind for r in RULES}
    | {
        "private_key",
        "connection_string",
        "basic_auth_url",
        "password_assignment",
        "generic_api_key_assignment",
    }
)


def _resolved(candidates: list[Candidate]) -> list[Candidate]:
    """``candidates`` without overlaps (the most specific rule, then the longer match, wins),
    sorted by start."""
    kept: list[Candidate] = []  # non-overlapping, sorted by start
    starts: list[int] = []
    for cand in sorted(candidates, key=lambda c: (c.rank, c.start - c.end, c.start)):
        i = bisect.bisect_right(starts, cand.start)
        if i > 0 and kept[i - 1].end > cand.start:
            continue
        if i < len(kept) and kept[i].start < cand.end:
            continue
        kept.insert(i, cand)
        starts.insert(i, cand.start)
    return kept


def _joined(found: list[Candidate]) -> list[Candidate]:
    """``found`` with overlapping spans joined into one (of the most specific kind): what a
    reader of another spelling found is redacted whole, with whatever overlaps it."""
    out: list[Candidate] = []
    for c in sorted(found, key=lambda c: c.start):
        if out and c.start < out[-1].end:
            last = out[-1]
            best = last if last.rank <= c.rank else c
            out[-1] = Candidate(best.kind, last.start, max(last.end, c.end), best.rank)
        else:
            out.append(c)
    return out


def _spelled(text: str, depth: int) -> list[Candidate]:
    """The secrets of ``text`` spelled with invisible characters inside or as hex digits
    (:mod:`.secret_spellings`), as spans of ``text``."""
    if cuts := spellings.invisible_cuts(text):
        span = spellings.origin(cuts)
        found = _found(spellings.without_cuts(text, cuts), depth)
        return [Candidate(c.kind, *span(c.start, c.end), c.rank) for c in found]
    out = []
    for start, end, decoded in spellings.hex_runs(text):
        inner = [c for t in decoded for c in _found(t, depth + 1)]
        if inner:
            best = min(inner, key=lambda c: c.rank)
            out.append(Candidate(best.kind, start, end, best.rank))
    return out


def _found(text: str, depth: int = 0) -> list[Candidate]:
    candidates, unusual = _candidates(text)
    kept = _resolved(candidates)
    if unusual and depth < MAX_DEPTH:
        if other := _spelled(text, depth):
            kept = _joined(kept + other)
    return kept


def scan(text: str) -> list[Finding]:
    """Every suspected credential in ``text``, in order of position, without overlaps: as the
    text stands, with its invisible characters removed, and in its hex runs decoded."""
    if not text:
        return []
    return [
        Finding(kind=c.kind, start=c.start, end=c.end, preview=preview_of(text[c.start : c.end]))
        for c in _found(text)
    ]


def _warning(finding: Finding) -> str:
    return (
        f"content looks like it contains a {finding.kind} ({finding.preview}); "
        "never store credentials in memory"
    )


def marker(kind: str) -> str:
    """What a redacted secret of ``kind`` becomes."""
    return f"[REDACTED:{kind}]"


def apply_policy(text: str, policy: SecretPolicy | None) -> tuple[str, list[str]]:
    """Return (text to store, warnings) for ``text`` under ``policy``.

    ``warn`` keeps the text and warns once per finding; ``block`` raises ``InvalidInput`` (its
    data lists kinds and positions, never the secret); ``redact`` replaces each secret with
    ``[REDACTED:<kind>]``; ``None`` (scanning disabled) does nothing.
    """
    if policy is None:
        return text, []
    findings = scan(text)
    if not findings:
        return text, []
    policy = SecretPolicy(policy)
    if policy is SecretPolicy.warn:
        return text, [_warning(f) for f in findings]
    if policy is SecretPolicy.block:
        kinds = sorted({f.kind for f in findings})
        raise InvalidInput(
            f"content looks like it contains credentials ({', '.join(kinds)}); "
            "remove them before storing (never store credentials in memory)",
            policy="secret",
            findings=[{"kind": f.kind, "start": f.start, "end": f.end} for f in findings],
        )
    parts: list[str] = []
    cursor = 0
    for f in findings:
        parts.append(text[cursor : f.start])
        parts.append(marker(f.kind))
        cursor = f.end
    parts.append(text[cursor:])
    warnings = [
        f"redacted a {f.kind} ({f.preview}) from the content; never store credentials in memory"
        for f in findings
    ]
    return "".join(parts), warnings
