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

Cost is linear in the text: vendor patterns only run when their literal prefix occurs, and
assignments are only examined around a key word (``pass``, ``pw``, ``secret``, ``token``,
``key``).

Deliberately not covered (too noisy without more context, or not secret): publishable keys
(``pk_live_…``), AWS IAM *ids* (``AIDA…``/``AROA…``) and AWS documentation keys (``…EXAMPLE``),
bare hex/UUID/base64 strings with no keyword (git SHAs, digests and ids look the same), SQL
``… WITH PASSWORD '…'``/``IDENTIFIED BY`` and CLI flags such as ``mysql -pSECRET`` (no
assignment operator), unquoted all-letter passwords (``password: hunter`` is indistinguishable
from ``password: variable_name``) and quoted passphrases of four or more words.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import math
import os
import re
import string
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar
from urllib.parse import unquote

from pydantic import BaseModel, ConfigDict, Field

from ..errors import InvalidInput

__all__ = [
    "KINDS",
    "Finding",
    "SecretPolicy",
    "apply_policy",
    "env_policy",
    "policy_from_env",
    "scan",
]

POLICY_ENV = "PATTERN_SECRET_POLICY"
DISABLE_ENV = "PATTERN_DISABLE_CONTENT_SCAN"
_TRUTHY = frozenset({"true", "1", "yes"})
E = TypeVar("E", bound=StrEnum)


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


_SEPARATORS = re.compile(r"[_\-./:~+]+")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_KEY_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9_\-+/=.~]+")
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_HEX = re.compile(r"[0-9a-fA-F]+")
_IDENTIFIER = re.compile(r"[A-Za-z_][\w.\-]*")
_PORT_LIKE = re.compile(r"\d{1,5}")
_NAMES_A_CREDENTIAL = re.compile(r"(?i)[a-z_\-.]*(?:passw(?:or)?d|secret|token|api_?key)[a-z_\-.]*")
_PATH_OR_URL = re.compile(
    r"(?:~?/|\.\.?/|[A-Za-z]:\\|[A-Za-z][A-Za-z0-9+.\-]*://|(?i:arn|urn):[A-Za-z0-9\-]+:)"
)
_FILE_NAME = re.compile(r"[A-Za-z0-9]\.[a-z][a-z0-9]{1,3}$")
_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")


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
    """Names, not random strings: ``user_profile_cache_v2``, ``Sam3TrackerAttention``.

    Either words joined by separators, or (camelCase) words of 3+ letters covering 80% of the
    letters with few digit groups in between. Random strings rarely pass (about 2% at 20
    characters, under 1% at 32), identifiers almost always do.
    """
    parts = [p for p in _SEPARATORS.split(value) if p]
    if len(parts) >= 2 and all(_WORD_PART.fullmatch(p) for p in parts):
        return True
    tokens = _KEY_WORD.findall(value)
    letters = [t for t in tokens if not t[0].isdigit()]
    words = [t for t in letters if len(t) >= 3]
    total = sum(map(len, letters))
    if len(tokens) < 2 or not total or len(tokens) - len(letters) > max(1, len(words) // 2):
        return False
    return sum(map(len, words)) >= 0.8 * total


_DIGITS = frozenset(string.digits)
_LETTERS = frozenset(string.ascii_letters)
_UPPER = frozenset(string.ascii_uppercase)
_LOWER = frozenset(string.ascii_lowercase)


def _has_letter_and_digit(value: str) -> bool:
    return not (_LETTERS.isdisjoint(value) or _DIGITS.isdisjoint(value))


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
    "password", "passwd", "::",
)  # fmt: skip
_TEMPLATE_PREFIXES = ("{", "<", "[")
# $VAR, ${VAR}, %VAR%, :name, @name, !vault, *alias, &anchor: references, not values
_REFERENCE = re.compile(r"[$%:@*&!?]\{?[A-Za-z0-9_][\w.]*\}?%?")
_DUMMY_PHRASE = re.compile(
    r"(?:my|the|a|an|new|old|db|database|app|user|admin|root|some|super|test)?"
    r"(?:password|passwd|pass|pwd|secret|token|apikey|key)(?:here|goes(?:here)?|value)?\d*"
)


def _is_placeholder(value: str) -> bool:
    v = value.strip()
    low = v.lower()
    if len(v) < 5 or len(set(v)) <= 2:
        return True
    if v.startswith(_TEMPLATE_PREFIXES) or _REFERENCE.fullmatch(v):
        return True
    if any(s in low for s in _PLACEHOLDER_SUBSTRINGS):
        return True
    if _NAMES_A_CREDENTIAL.fullmatch(v):  # "challengePassword", "API_TOKEN": a name, not a value
        return True
    alnum = _NON_ALNUM.sub("", low)
    word = alnum.rstrip("0123456789")
    return word in _PLACEHOLDER_WORDS or bool(_DUMMY_PHRASE.fullmatch(alnum))


def _key_words(key: str) -> list[str]:
    """``DB_PASSWORD`` -> [db, password]; ``dbPassword`` -> [db, password]."""
    return [w.lower() for w in _KEY_WORD.findall(key)]


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
    # The pattern only runs when one of these appears in the (ASCII-lower-cased) text: most
    # content holds no credential at all, and a substring test is far cheaper than a regex pass.
    hints: tuple[str, ...]
    group: str | int = 0  # the part of the match that is the secret
    check: Callable[[str], bool] | None = None


_END = r"(?![A-Za-z0-9_\-])"


def _word_start(prefix: str) -> str:
    """``prefix`` at the start of a word, written literal-first so ``re`` can search it fast."""
    esc = re.escape(prefix)
    return rf"{esc}(?<![A-Za-z0-9_]{esc})"


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


_RULES: tuple[_Rule, ...] = (
    _Rule(
        "anthropic_api_key",
        re.compile(_word_start("sk-ant-") + r"[a-z]{2,8}\d{0,3}-[A-Za-z0-9_\-]{32,}" + _END),
        ("sk-ant-",),
    ),
    _Rule(
        "openai_api_key",
        re.compile(
            _word_start("sk-") + r"(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{32,}" + _END
        ),
        ("sk-",),
        check=lambda s: _random_looking(s.split("-", 1)[1]),
    ),
    _Rule(
        "github_token",
        re.compile(_word_start("gh") + r"[pousr]_[A-Za-z0-9]{36,255}" + _END),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ),
    _Rule(
        "github_token",
        re.compile(_word_start("github_pat_") + r"[A-Za-z0-9]{22}_[A-Za-z0-9]{59}" + _END),
        ("github_pat_",),
    ),
    _Rule(
        "gitlab_token",
        re.compile(_word_start("glpat-") + r"[A-Za-z0-9_\-]{20,}" + _END),
        ("glpat-",),
    ),
    _Rule(
        "aws_access_key_id",
        re.compile(r"A(?:KIA|SIA|BIA|CCA)(?<![A-Za-z0-9_]A[A-Z]{3})[A-Z0-9]{16}\b"),
        ("akia", "asia", "abia", "acca"),
        # AWS documentation examples end in EXAMPLE (AKIAIOSFODNN7EXAMPLE) or start with it
        check=lambda s: len(set(s[4:])) >= 6 and not s.endswith("EXAMPLE") and s[4:11] != "EXAMPLE",
    ),
    _Rule(
        "aws_secret_access_key",
        re.compile(
            r"(?i:aws_?secret(?:_?access)?_?key|aws-secret-access-key)[\"']?[ \t]*(?::=|=>|[:=])"
            r"[ \t]*[\"']?(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
        ("aws_secret", "awssecret", "aws-secret"),
        group="v",
        check=lambda s: _random_looking(s, 4.0),
    ),
    _Rule(
        "slack_token",
        re.compile(_word_start("xox") + r"[abposre]-(?:\d+-)+[A-Za-z0-9]{10,}" + _END),
        ("xox",),
    ),
    _Rule(
        "slack_webhook_url",
        re.compile(
            r"https://hooks\.slack\.com/(?:services|workflows|triggers)/"
            r"T[A-Z0-9]{6,}/[A-Z0-9]{6,}/[A-Za-z0-9]{16,}"
        ),
        ("hooks.slack.com",),
    ),
    _Rule(
        "stripe_key",
        re.compile(
            r"[sr]k_(?:live|test)_(?<![A-Za-z0-9_][sr]k_(?:live|test)_)[A-Za-z0-9]{20,}" + _END
        ),
        ("sk_live_", "sk_test_", "rk_live_", "rk_test_"),
    ),
    _Rule(
        "google_api_key", re.compile(_word_start("AIza") + r"[A-Za-z0-9_\-]{35}" + _END), ("aiza",)
    ),
    _Rule(
        "google_oauth_client_secret",
        re.compile(_word_start("GOCSPX-") + r"[A-Za-z0-9_\-]{28}" + _END),
        ("gocspx-",),
    ),
    _Rule("npm_token", re.compile(_word_start("npm_") + r"[A-Za-z0-9]{36}" + _END), ("npm_",)),
    _Rule(
        "pypi_token",
        re.compile(_word_start("pypi-AgEIcHlwaS5vcmc") + r"[A-Za-z0-9_\-]{50,}" + _END),
        ("pypi-",),
    ),
    _Rule(
        "huggingface_token",
        re.compile(_word_start("hf_") + r"[A-Za-z0-9]{34,40}" + _END),
        ("hf_",),
        check=lambda s: _random_looking(s[3:]),
    ),
    _Rule(
        "sendgrid_api_key",
        re.compile(_word_start("SG.") + r"[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}" + _END),
        ("sg.",),
    ),
    _Rule(
        "telegram_bot_token",
        re.compile(r"(?<![A-Za-z0-9_])\d{8,10}:AA[A-Za-z0-9_\-]{33}" + _END),
        (":aa",),
    ),
    _Rule(
        "azure_storage_key",
        re.compile(
            r"(?i:AccountKey|SharedAccessKey)[ \t]*=[ \t]*(?P<v>[A-Za-z0-9+/]{40,88}={0,2})"
            r"(?![A-Za-z0-9+/=])"
        ),
        ("accountkey", "sharedaccesskey"),
        group="v",
        check=lambda s: _random_looking(s, 4.0),
    ),
    _Rule(
        "jwt",
        re.compile(
            _word_start("eyJ")
            + r"[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{16,}"
            + _END
        ),
        ("eyj",),
        check=_b64_header_ok,
    ),
    _Rule(
        "basic_auth_header",
        re.compile(
            r"(?i:authorization)[\"']?[ \t]*[:=][ \t]*[\"']?(?i:basic)[ \t]+"
            r"(?P<v>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])"
        ),
        ("authorization",),
        group="v",
        check=_basic_ok,
    ),
    _Rule(
        "bearer_token",
        re.compile(
            r"(?i:bearer)(?<![A-Za-z0-9_]\w{6})[ \t]+(?P<v>[A-Za-z0-9\-._~+/]{20,}=*)(?![A-Za-z0-9\-._~+/=])"
        ),
        ("bearer",),
        group="v",
        check=lambda s: _random_looking(s, 3.2),
    ),
)

# PEM private keys: the whole block when it is complete, else the header plus the base64 lines
# that follow it (a truncated paste still leaks key material).
_PEM_LABEL = r"(?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----"
_PEM_BEGIN = re.compile(r"-----BEGIN " + _PEM_LABEL)
_PEM_END = re.compile(r"-----END " + _PEM_LABEL)
_PEM_BODY = re.compile(
    r"(?:\r?\n[ \t]*(?:[A-Za-z0-9+/=]{16,}|(?:Proc-Type|DEK-Info|Comment):[^\r\n]*"
    r"|(?=\r?\n[A-Za-z0-9+/=]{16,})))*"
)
_PEM_MATERIAL = re.compile(r"[A-Za-z0-9+/]{24}")
_PEM_MAX = 20_000


def _private_keys(text: str) -> Iterator[tuple[int, int]]:
    pos = 0
    while (begin := _PEM_BEGIN.search(text, pos)) is not None:
        following = _PEM_BEGIN.search(text, begin.end())
        limit = min(following.start() if following else len(text), begin.end() + _PEM_MAX)
        end = _PEM_END.search(text, begin.end(), limit)
        if end is not None:
            stop = end.end()
        else:
            body = _PEM_BODY.match(text, begin.end())  # always matches, possibly empty
            stop = body.end() if body is not None else begin.end()
        if _PEM_MATERIAL.search(text, begin.end(), stop):  # a bare header is a mention, not a key
            yield begin.start(), stop
        pos = stop


# scheme://user:password@host — matched from the "://" so the search is literal-first.
_URL_CREDENTIALS = re.compile(
    r"://(?P<user>[^\s:/@?#\"'<>]*):(?P<pw>[^\s/@?#\"'<>]+)@[A-Za-z0-9\[]"
)
_SCHEME_CHARS = frozenset(string.ascii_letters + string.digits + "+.-")
_WEB_SCHEMES = frozenset({"http", "https", "ftp", "ftps", "ws", "wss", "ssh", "git", "svn"})

# Assignments: find a key word (in the ASCII-lower-cased text), widen it to the whole key, then
# match "<sep> [type annotation] <op> value" after the key. The value is either quoted or a bare
# run of characters; the key's last word(s) decide what the value must look like.
_KEYWORD = re.compile(r"pass|pw|secret|token|key")
_KEY_RUN = re.compile(r"[A-Za-z0-9_.\-]*")  # always matches
_MAX_KEY = 64
_ASSIGNMENT_TAIL = re.compile(
    r"[\"'`]?"
    r"(?:(?:[ \t]*:[ \t]*[A-Za-z_][\w\[\]|., ]{0,40}?)?[ \t]*(?P<op>:=|=>|==|=)|(?P<colon>:))"
    r"[ \t]*"
    r"(?:(?P<q>[\"'`])(?P<qv>[^\"'`\r\n]{1,200})(?P=q)"
    r"|(?P<uv>[^\s\"'`,;()\[\]{}<>]{1,200}))"
)
_SHORT_PASSWORD_WORDS = frozenset({"pwd", "pass", "pw"})
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

_RANK_PRIVATE_KEY = -1
_RANK_URL = len(_RULES)
_RANK_GENERIC = len(_RULES) + 1
_RANK_PASSWORD = len(_RULES) + 2
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def _classify_key(key: str) -> str | None:
    words = _key_words(key)
    if not words:
        return None
    last = words[-1]
    prev = words[-2] if len(words) > 1 else ""
    if last.endswith(("password", "passwd", "passphrase")):
        return "password"
    if last in _SHORT_PASSWORD_WORDS:
        # "db_pass", "SMTP-PWD"; alone, "pass" is an English word and "PWD" the working
        # directory, and "GraphPass"/"RenderPass" are compiler and GPU passes
        return "password" if prev and key[-len(last) - 1] in "_-." else None
    if last == "key":
        return "generic" if prev in _KEY_QUALIFIERS else ("bare_key" if not prev else None)
    if last == "token" and prev in _NON_SECRET_TOKEN_QUALIFIERS:
        return None
    if last in _SECRET_LAST or last.endswith(("secret", "apikey", "token")):
        return "generic"
    return None


def _generic_ok(value: str, strict: bool) -> bool:
    if len(value) < (20 if strict else 16) or not _has_letter_and_digit(value):
        return False
    if not _TOKEN_CHARS.fullmatch(value):
        return False
    if _DOTTED.fullmatch(value) or _UUID.fullmatch(value):  # a reference, a request/record id
        return False
    if _FILE_NAME.search(value):  # dcp/build_17.tar, certs/server.key
        return False
    if strict:
        return (
            not _UPPER.isdisjoint(value)
            and not _LOWER.isdisjoint(value)
            and _random_looking(value, 4.0)
            and not _is_placeholder(value)
        )
    if _HEX.fullmatch(value):
        ok = len(value) >= 32 and _entropy(value) >= 3.0
    else:
        ok = _random_looking(value, 3.5)
    return ok and not _is_placeholder(value)


def _password_ok(value: str, quoted: bool, text: str, end: int) -> bool:
    if _PATH_OR_URL.match(value) or _is_placeholder(value):
        return False
    if value.count(" ") >= 3:  # a description ("The password for the admin user."), not a value
        return False
    if quoted:
        return True
    # Bare values: reject identifiers, calls, attribute paths and subscripts.
    if end < len(text) and text[end] in "([.":
        return False
    if _IDENTIFIER.fullmatch(value) and _DIGITS.isdisjoint(value):
        return False
    if _DOTTED.fullmatch(value):
        return False
    return not _PORT_LIKE.fullmatch(value)


def _assignments(text: str, low: str) -> Iterator[_Candidate]:
    n = len(text)
    backwards = low[::-1]  # lets the key's left edge be found by a regex too
    run_end = -1  # keys already looked at, and values already reported, are skipped
    for hit in _KEYWORD.finditer(low):
        if hit.start() < run_end:
            continue
        left = _KEY_RUN.match(backwards, n - hit.start())
        start = hit.start() - (left.end() - left.start() if left is not None else 0)
        right = _KEY_RUN.match(text, hit.end())
        end = run_end = right.end() if right is not None else hit.end()
        if end - start > _MAX_KEY or text[start - 1 : start] == ":":  # arn:…:secret:name-1a2b
            continue
        key = text[start:end].lstrip("0123456789.-").rstrip(".-")
        cls = _classify_key(key) if key else None
        if cls is None:
            continue
        m = _ASSIGNMENT_TAIL.match(text, end)
        if m is None or m.group("op") == "==":  # "==" is a comparison, not an assignment
            continue
        group = "qv" if m.group("qv") is not None else "uv"
        value = m.group(group)
        v_start, v_end = m.span(group)
        if group == "uv" and text[start - 1 : start] in ("?", "&"):
            value = value.split("&", 1)[0]  # a URL query parameter ends at the next "&"
            v_end = v_start + len(value)
        if cls == "password":
            if not _password_ok(value, group == "qv", text, v_end):
                continue
            yield _Candidate("password_assignment", v_start, v_end, _RANK_PASSWORD)
        elif text[v_end : v_end + 1] not in ("(", "[") and _generic_ok(value, cls == "bare_key"):
            yield _Candidate("generic_api_key_assignment", v_start, v_end, _RANK_GENERIC)
        else:
            continue
        run_end = v_end


def _candidates(text: str) -> list[_Candidate]:
    low = text.translate(_ASCII_LOWER)  # same length and offsets as text
    found: list[_Candidate] = []
    if "-----begin " in low:
        found.extend(
            _Candidate("private_key", s, e, _RANK_PRIVATE_KEY) for s, e in _private_keys(text)
        )

    for rank, rule in enumerate(_RULES):
        if not any(h in low for h in rule.hints):
            continue
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
        if _PORT_LIKE.fullmatch(pw) or _is_placeholder(unquote(pw)):
            continue
        s = m.start()
        while s > 0 and m.start() - s < 24 and text[s - 1] in _SCHEME_CHARS:
            s -= 1
        scheme = text[s : m.start()].lower()
        if not scheme or not scheme[0].isalpha():
            continue
        kind = "basic_auth_url" if scheme in _WEB_SCHEMES else "connection_string"
        found.append(_Candidate(kind, *m.span("pw"), _RANK_URL))

    found.extend(_assignments(text, low))
    return found


KINDS: frozenset[str] = frozenset(
    {r.kind for r in _RULES}
    | {
        "private_key",
        "connection_string",
        "basic_auth_url",
        "password_assignment",
        "generic_api_key_assignment",
    }
)


def scan(text: str) -> list[Finding]:
    """Every suspected credential in ``text``, in order of position, without overlaps."""
    if not text:
        return []
    kept: list[_Candidate] = []  # non-overlapping, sorted by start
    starts: list[int] = []
    for cand in sorted(_candidates(text), key=lambda c: (c.rank, c.start - c.end, c.start)):
        i = bisect.bisect_right(starts, cand.start)
        if i > 0 and kept[i - 1].end > cand.start:
            continue
        if i < len(kept) and kept[i].start < cand.end:
            continue
        kept.insert(i, cand)
        starts.insert(i, cand.start)
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
            policy="secret",
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
