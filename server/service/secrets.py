"""Secret scanning: spot credentials in content before it is stored, then warn, block or redact.

Pure module (standard library + pydantic). ``scan`` finds credentials; ``apply_policy`` decides
what happens to content that holds some; ``policy_from_env`` reads the operator's choice.

Environment:

* ``PATTERN_SECRET_POLICY`` — ``warn`` (default), ``block`` or ``redact``.
* ``PATTERN_DISABLE_CONTENT_SCAN`` — ``true``/``1``/``yes`` turns scanning off entirely (it wins
  over ``PATTERN_SECRET_POLICY``).

How detection works
-------------------
Vendor tokens with a distinctive shape (``AKIA…``, ``ghp_…``, ``sk-ant-…``, PEM private keys, …)
are matched by pattern, with an extra sanity check where the bare pattern is loose. Everything
else needs *keyword context*: an assignment whose key names a password (``password``,
``DB_PASSWORD``, ``dbPassword``, ``passwd``, ``pwd``, ``pass``, ``passphrase``) or a secret
(``api_key``, ``client_secret``, ``auth_token``, ``secret``, ``token``, …), credentials inside a
URL (``scheme://user:pw@host``), or an ``Authorization`` header.

Keyword matches are filtered so code and docs *about* credentials stay quiet:

* Password values are ignored when they are placeholders: empty or shorter than 5 characters,
  one or two distinct characters (``***``, ``xxxxx``), templating or references (``${X}``,
  ``{{ x }}``, ``%(x)s``, ``<password>``, ``$1``, ``:password``, ``@pw``, ``!vault``), obvious
  dummy words optionally followed by digits (``password``, ``changeme``, ``secret123``,
  ``your_password_here``, ``none``, ``str``…) or anything containing ``example``,
  ``placeholder``, ``redacted``, ``dummy``, ``changeme``, ``xxxx``. Unquoted values must contain
  a digit or a symbol, so identifiers (``password = get_password()``, ``password: str``,
  ``password = settings.db.password``) are never taken for a secret.
* Generic key/token/secret values additionally need at least 16 characters, letters *and*
  digits, no word-like shape (``user_profile_cache_v2``) and Shannon entropy of at least 3.5
  bits/char (3.0 for hex-only values of 32+ characters). A bare ``key = …`` is accepted only with
  an even stricter value (20+ chars, upper+lower+digits, entropy >= 4.0), because ``key`` alone
  is usually a cache/dict key.

Overlapping findings are de-duplicated: the most specific rule wins (vendor token over a generic
assignment over a password assignment), then the longer match.

Deliberately not covered (too noisy without more context, or not secret): publishable keys
(``pk_live_…``), AWS IAM *ids* (``AIDA…``/``AROA…``), bare hex/UUID strings with no keyword
(git SHAs, digests and ids look the same), SQL ``… WITH PASSWORD '…'``/``IDENTIFIED BY`` and CLI
flags such as ``mysql -pSECRET`` (no assignment operator), and unquoted all-letter passwords
(``password: hunter`` is indistinguishable from ``password: variable_name``).
"""

from __future__ import annotations

import base64
import binascii
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from retrieval.errors import InvalidInput

__all__ = [
    "KINDS",
    "Finding",
    "SecretPolicy",
    "apply_policy",
    "policy_from_env",
    "scan",
]

POLICY_ENV = "PATTERN_SECRET_POLICY"
DISABLE_ENV = "PATTERN_DISABLE_CONTENT_SCAN"
_TRUTHY = frozenset({"true", "1", "yes"})


class SecretPolicy(StrEnum):
    """What to do with content that looks like it holds a credential."""

    warn = "warn"
    block = "block"
    redact = "redact"


def policy_from_env(environ: Mapping[str, str] = os.environ) -> SecretPolicy | None:
    """The configured policy, or ``None`` when content scanning is disabled.

    Raises ``InvalidInput`` for an unknown ``PATTERN_SECRET_POLICY`` value.
    """
    if environ.get(DISABLE_ENV, "").strip().lower() in _TRUTHY:
        return None
    raw = environ.get(POLICY_ENV, "").strip()
    if not raw:
        return SecretPolicy.warn
    try:
        return SecretPolicy(raw.lower())
    except ValueError:
        allowed = [p.value for p in SecretPolicy]
        raise InvalidInput(
            f"{POLICY_ENV} must be one of {', '.join(allowed)} (got {raw!r}); "
            f"set {DISABLE_ENV}=true to turn content scanning off",
            variable=POLICY_ENV,
            value=raw,
            allowed=allowed,
        ) from None


class Finding(BaseModel):
    """One suspected credential: its kind, its span in the text, and a masked preview."""

    model_config = ConfigDict(frozen=True)

    kind: str
    start: int = Field(ge=0)
    end: int = Field(ge=0)
    preview: str


# --------------------------------------------------------------------------- helpers


def _entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def _preview(secret: str) -> str:
    """First few characters + an ellipsis; never more than a third of a short secret."""
    return secret[: min(4, len(secret) // 3)] + "…"


_WORD_PART = re.compile(r"[a-z]+\d{0,3}|\d{1,4}|[A-Z][a-z]+\d{0,3}|[A-Z]+\d{0,3}")


def _word_like(value: str) -> bool:
    """``user_profile_cache_v2``, ``My-Service.Name``: words joined by separators."""
    parts = [p for p in re.split(r"[_\-./:~+]+", value) if p]
    return len(parts) >= 2 and all(_WORD_PART.fullmatch(p) for p in parts)


def _has_letter_and_digit(value: str) -> bool:
    return any(c.isalpha() for c in value) and any(c.isdigit() for c in value)


def _random_looking(value: str, min_entropy: float = 3.5) -> bool:
    return _has_letter_and_digit(value) and not _word_like(value) and _entropy(value) >= min_entropy


_PLACEHOLDER_WORDS = frozenset(
    {
        "password", "passwd", "pass", "pwd", "passphrase", "secret", "secrets", "token",
        "apikey", "key", "changeme", "changeit", "test", "testing", "admin", "root", "user",
        "username", "guest", "demo", "default", "foo", "bar", "baz", "foobar", "qwerty",
        "letmein", "none", "null", "nil", "true", "false", "undefined", "empty", "required",
        "optional", "string", "str", "bytes", "int", "hidden", "masked", "unset", "todo",
        "tbd", "fixme", "value", "abc", "abcdef", "xyz", "mysecret", "notasecret",
    }
)  # fmt: skip
_PLACEHOLDER_SUBSTRINGS = (
    "example", "placeholder", "redacted", "dummy", "changeme", "change_me", "change-me",
    "xxxx", "your", "replace", "insert", "${", "{{", "}}", "%(", "<", ">", "…", "...",
)  # fmt: skip
_PLACEHOLDER_PREFIXES = ("$", "%", "{", "<", "[", "!", ":", "@", "*", "&", "?")
_DUMMY_PHRASE = re.compile(
    r"(?:my|the|a|an|new|old|db|database|app|user|admin|root|some|super|test)?"
    r"(?:password|passwd|pass|pwd|secret|token|apikey|key)(?:here|goes(?:here)?|value)?\d*"
)


def _is_placeholder(value: str) -> bool:
    v = value.strip()
    low = v.lower()
    if len(v) < 5 or len(set(v)) <= 2:
        return True
    if v.startswith(_PLACEHOLDER_PREFIXES) or any(s in low for s in _PLACEHOLDER_SUBSTRINGS):
        return True
    alnum = re.sub(r"[^a-z0-9]", "", low)
    word = alnum.rstrip("0123456789")
    return word in _PLACEHOLDER_WORDS or bool(_DUMMY_PHRASE.fullmatch(alnum))


def _key_words(key: str) -> list[str]:
    """``DB_PASSWORD`` -> [db, password]; ``dbPassword`` -> [db, password]."""
    return [w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", key)]


# --------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class _Candidate:
    kind: str
    start: int
    end: int
    rank: int  # lower wins an overlap


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    group: str | int = 0  # the part of the match that is the secret
    check: Callable[[str], bool] | None = None


_END = r"(?![A-Za-z0-9_\-])"


def _b64_header_ok(token: str) -> bool:
    head = token.split(".", 1)[0]
    try:
        decoded = base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    return decoded.lstrip().startswith("{") and ('"alg"' in decoded or '"typ"' in decoded)


def _basic_ok(value: str) -> bool:
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    user, sep, password = decoded.partition(":")
    return bool(sep) and bool(user) and not _is_placeholder(password)


_PEM_LABEL = r"(?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----"
_PEM_BODY_LINE = (
    r"\r?\n[ \t]*(?:[A-Za-z0-9+/=]{16,}|(?:Proc-Type|DEK-Info|Comment):[^\r\n]*"
    r"|(?=\r?\n[A-Za-z0-9+/=]{16,}))"
)
# The whole block when it is complete, else the header plus the base64 lines after it.
_PRIVATE_KEY = (
    rf"-----BEGIN {_PEM_LABEL}(?:[\s\S]{{0,20000}}?-----END {_PEM_LABEL}|(?:{_PEM_BODY_LINE})*)"
)
_RULES: tuple[_Rule, ...] = (
    _Rule("private_key", re.compile(_PRIVATE_KEY)),
    _Rule(
        "anthropic_api_key", re.compile(r"\bsk-ant-[a-z]{2,8}\d{0,3}-[A-Za-z0-9_\-]{32,}" + _END)
    ),
    _Rule(
        "openai_api_key",
        re.compile(r"\bsk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{32,}" + _END),
        check=lambda s: _random_looking(s.split("-", 1)[1]),
    ),
    _Rule(
        "github_token",
        re.compile(
            r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59})" + _END
        ),
    ),
    _Rule("gitlab_token", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}" + _END)),
    _Rule(
        "aws_access_key_id",
        re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b"),
        check=lambda s: len(set(s[4:])) >= 6,
    ),
    _Rule(
        "aws_secret_access_key",
        re.compile(
            r"(?i:aws_?secret(?:_?access)?_?key|aws-secret-access-key)[\"']?[ \t]*(?::=|=>|[:=])"
            r"[ \t]*[\"']?(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
        group="v",
        check=lambda s: _random_looking(s, 4.0),
    ),
    _Rule("slack_token", re.compile(r"\bxox[abposre]-(?:\d+-)+[A-Za-z0-9]{10,}" + _END)),
    _Rule(
        "slack_webhook_url",
        re.compile(
            r"https://hooks\.slack\.com/(?:services|workflows|triggers)/"
            r"T[A-Z0-9]{6,}/[A-Z0-9]{6,}/[A-Za-z0-9]{16,}"
        ),
    ),
    _Rule("stripe_key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,}" + _END)),
    _Rule("google_api_key", re.compile(r"\bAIza[A-Za-z0-9_\-]{35}" + _END)),
    _Rule("google_oauth_client_secret", re.compile(r"\bGOCSPX-[A-Za-z0-9_\-]{28}" + _END)),
    _Rule("npm_token", re.compile(r"\bnpm_[A-Za-z0-9]{36}" + _END)),
    _Rule("pypi_token", re.compile(r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}" + _END)),
    _Rule(
        "huggingface_token",
        re.compile(r"\bhf_[A-Za-z0-9]{34,40}" + _END),
        check=lambda s: _random_looking(s[3:]),
    ),
    _Rule(
        "sendgrid_api_key",
        re.compile(r"\bSG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}" + _END),
    ),
    _Rule("telegram_bot_token", re.compile(r"\b\d{8,10}:AA[A-Za-z0-9_\-]{33}" + _END)),
    _Rule(
        "azure_storage_key",
        re.compile(
            r"(?i:AccountKey|SharedAccessKey)[ \t]*=[ \t]*(?P<v>[A-Za-z0-9+/]{40,88}={0,2})"
            r"(?![A-Za-z0-9+/=])"
        ),
        group="v",
        check=lambda s: _random_looking(s, 4.0),
    ),
    _Rule(
        "jwt",
        re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{16,}" + _END),
        check=_b64_header_ok,
    ),
    _Rule(
        "basic_auth_header",
        re.compile(
            r"(?i:authorization)[\"']?[ \t]*[:=][ \t]*[\"']?(?i:basic)[ \t]+"
            r"(?P<v>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])"
        ),
        group="v",
        check=_basic_ok,
    ),  # fmt: skip
    _Rule(
        "bearer_token",
        re.compile(r"\b(?i:bearer)[ \t]+(?P<v>[A-Za-z0-9\-._~+/]{20,}=*)(?![A-Za-z0-9\-._~+/=])"),
        group="v",
        check=lambda s: _random_looking(s, 3.2),
    ),
)

_URL_CREDENTIALS = re.compile(
    r"\b(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]{1,20})://(?P<user>[^\s:/@?#\"'<>]*)"
    r":(?P<pw>[^\s/@?#\"'<>]+)@(?P<host>[A-Za-z0-9\[][A-Za-z0-9.\-_:\]]*)"
)
_WEB_SCHEMES = frozenset({"http", "https", "ftp", "ftps", "ws", "wss", "ssh", "git", "svn"})

# key <sep> [type annotation] <op> value. The value is either quoted or a bare run of
# characters; we then classify by the key's last word(s) and vet the value.
_ASSIGNMENT = re.compile(
    r"(?P<key>(?<![\w.\-])[A-Za-z_][\w.\-]{0,60})[\"'`]?"
    r"(?:[ \t]*:[ \t]*[A-Za-z_][\w\[\]|., ]{0,40}?)?"
    r"[ \t]*(?P<op>:=|=>|==|=|:)[ \t]*"
    r"(?:(?P<q>[\"'`])(?P<qv>[^\"'`\r\n]{1,200})(?P=q)"
    r"|(?P<uv>[^\s\"'`,;()\[\]{}<>]{1,200}))"
)
_PASSWORD_WORDS = frozenset({"password", "passwd", "passphrase", "pwd", "pass", "pw"})
_SECRET_LAST = frozenset({"secret", "token", "apikey", "secretkey", "accesskey", "privatekey"})
_KEY_QUALIFIERS = frozenset(
    {"api", "access", "secret", "private", "signing", "encryption", "master", "client", "app",
     "auth", "account", "service", "admin", "license", "subscription", "webhook", "session"}
)  # fmt: skip
_NON_SECRET_TOKEN_QUALIFIERS = frozenset(
    {"page", "next", "prev", "continuation", "cursor", "sync", "pagination", "max", "min", "num",
     "cancel", "cancellation", "bos", "eos", "pad", "unk", "sep", "cls", "mask", "start", "end",
     "stop", "special", "csrf", "xsrf"}
)  # fmt: skip

_RANK_PASSWORD = len(_RULES) + 2
_RANK_GENERIC = len(_RULES) + 1
_RANK_URL = len(_RULES)


def _classify_key(key: str) -> str | None:
    words = _key_words(key)
    if not words:
        return None
    last = words[-1]
    prev = words[-2] if len(words) > 1 else ""
    if last in _PASSWORD_WORDS or last.endswith(("password", "passwd", "passphrase")):
        return "password"
    if last == "key":
        return "generic" if prev in _KEY_QUALIFIERS else ("bare_key" if not prev else None)
    if last == "token" and prev in _NON_SECRET_TOKEN_QUALIFIERS:
        return None
    if last in _SECRET_LAST or last.endswith(("secret", "apikey", "token")):
        return "generic"
    return None


def _generic_ok(value: str, strict: bool) -> bool:
    if len(value) < (20 if strict else 16) or _is_placeholder(value):
        return False
    if not re.fullmatch(r"[A-Za-z0-9_\-+/=.~]+", value):
        return False
    if re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", value):  # dotted reference
        return False
    if strict:
        return (
            any(c.isupper() for c in value)
            and any(c.islower() for c in value)
            and _random_looking(value, 4.0)
        )
    if re.fullmatch(r"[0-9a-fA-F]+", value):
        return len(value) >= 32 and _entropy(value) >= 3.0
    return _random_looking(value, 3.5)


def _password_ok(value: str, quoted: bool, text: str, end: int) -> bool:
    if _is_placeholder(value):
        return False
    if quoted:
        return True
    # Bare values: reject identifiers, calls, attribute paths and subscripts.
    if end < len(text) and text[end] in "([.":
        return False
    if re.fullmatch(r"[A-Za-z_][\w.\-]*", value) and not any(c.isdigit() for c in value):
        return False
    if re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", value):
        return False
    return not re.fullmatch(r"\d{1,5}", value)


def _candidates(text: str) -> list[_Candidate]:
    found: list[_Candidate] = []
    for rank, rule in enumerate(_RULES):
        for m in rule.pattern.finditer(text):
            start, end = m.span(rule.group)
            if start == end:
                continue
            if rule.check is not None and not rule.check(m.group(rule.group)):
                continue
            found.append(_Candidate(rule.kind, start, end, rank))

    for m in _URL_CREDENTIALS.finditer(text):
        pw = m.group("pw")
        # a placeholder ("user:pass@", ":${DB_PASSWORD}@") or a port in an odd URL ("host:8080@")
        if _is_placeholder(pw) or re.fullmatch(r"\d{1,5}", pw):
            continue
        kind = (
            "basic_auth_url" if m.group("scheme").lower() in _WEB_SCHEMES else "connection_string"
        )
        found.append(_Candidate(kind, *m.span("pw"), _RANK_URL))

    for m in _ASSIGNMENT.finditer(text):
        if m.group("op") == "==":  # a comparison, not an assignment
            continue
        cls = _classify_key(m.group("key"))
        if cls is None:
            continue
        group = "qv" if m.group("qv") is not None else "uv"
        value = m.group(group)
        start, end = m.span(group)
        if group == "uv" and text[m.start("key") - 1 : m.start("key")] in ("?", "&"):
            value = value.split("&", 1)[0]  # a URL query parameter ends at the next "&"
            end = start + len(value)
        if cls == "password":
            if _password_ok(value, group == "qv", text, end):
                found.append(_Candidate("password_assignment", start, end, _RANK_PASSWORD))
        elif _generic_ok(value, strict=cls == "bare_key"):
            found.append(_Candidate("generic_api_key_assignment", start, end, _RANK_GENERIC))
    return found


KINDS: frozenset[str] = frozenset(
    {r.kind for r in _RULES}
    | {"connection_string", "basic_auth_url", "password_assignment", "generic_api_key_assignment"}
)


def scan(text: str) -> list[Finding]:
    """Every suspected credential in ``text``, in order of position, without overlaps."""
    if not text:
        return []
    kept: list[_Candidate] = []
    for cand in sorted(_candidates(text), key=lambda c: (c.rank, c.start - c.end, c.start)):
        if all(cand.end <= k.start or cand.start >= k.end for k in kept):
            kept.append(cand)
    kept.sort(key=lambda c: c.start)
    return [
        Finding(kind=c.kind, start=c.start, end=c.end, preview=_preview(text[c.start : c.end]))
        for c in kept
    ]


def _warning(finding: Finding) -> str:
    return (
        f"content looks like it contains a {finding.kind} ({finding.preview}); "
        "never store credentials in memory"
    )


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
            findings=[{"kind": f.kind, "start": f.start, "end": f.end} for f in findings],
        )
    parts: list[str] = []
    cursor = 0
    for f in findings:
        parts.append(text[cursor : f.start])
        parts.append(f"[REDACTED:{f.kind}]")
        cursor = f.end
    parts.append(text[cursor:])
    warnings = [
        f"redacted a {f.kind} ({f.preview}) from the content; never store credentials in memory"
        for f in findings
    ]
    return "".join(parts), warnings
