"""The secret scanner's rule tables: data, applied by :mod:`.secrets`.

``RULES`` are the provider formats (a literal-first pattern, the hints that must occur in the
text before it runs, the group that is the secret, an optional value check from
:mod:`.secret_checks`); then private-key blocks, credentials in URLs, and the key words and
qualifiers that make an assignment (``password = …``, ``api_key: …``) a secret. An earlier rule
wins an overlap (``RANK_*``).
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from dataclasses import dataclass

from retrieval.regexes import linear_regex
from server.service.trust.secret_scan.secret_checks import b64_header_ok, basic_ok, random_looking


@dataclass(frozen=True)
class Rule:
    kind: str
    pattern: linear_regex.Pattern
    # The pattern only runs when one of these appears in the (ASCII-lower-cased) text: most
    # content holds no credential at all, and a substring test is far cheaper than a regex pass.
    hints: tuple[str, ...]
    group: str | int = "s"  # the part of the match that is the secret
    check: Callable[[str], bool] | None = None


# the end of a token: a character that cannot continue it, or the end of the text (matched, not
# looked ahead at: the token itself is the group ``s``)
END = r"(?:[^A-Za-z0-9_\-]|\Z)"


def word_start(prefix: str) -> str:
    """``prefix`` at the start of a word (``\b``: after no ``[A-Za-z0-9_]``)."""
    assert prefix[0].isascii() and prefix[0].isalnum(), prefix
    return rf"\b{re.escape(prefix)}"


def token(body: str) -> linear_regex.Pattern:
    """A token (group ``s``) that ends where ``body`` ends (:data:`END`)."""
    return linear_regex.compile(f"(?P<s>{body}){END}")


RULES: tuple[Rule, ...] = (
    Rule(
        "anthropic_api_key",
        token(word_start("sk-ant-") + r"[a-z]{2,8}\d{0,3}-[A-Za-z0-9_\-]{32,}"),
        ("sk-ant-",),
    ),
    Rule(
        "openai_api_key",
        token(word_start("sk-") + r"(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{32,}"),
        ("sk-",),
        check=lambda s: not s.startswith("sk-ant-") and random_looking(s.split("-", 1)[1]),
    ),
    Rule(
        "github_token",
        token(word_start("gh") + r"[pousr]_[A-Za-z0-9]{36,255}"),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ),
    Rule(
        "github_token",
        token(word_start("github_pat_") + r"[A-Za-z0-9]{22}_[A-Za-z0-9]{59}"),
        ("github_pat_",),
    ),
    Rule(
        "gitlab_token",
        token(word_start("glpat-") + r"[A-Za-z0-9_\-]{20,}"),
        ("glpat-",),
    ),
    Rule(
        "aws_access_key_id",
        linear_regex.compile(r"(?P<s>\bA(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16})\b"),
        ("akia", "asia", "abia", "acca"),
        # AWS documentation examples end in EXAMPLE (AKIAIOSFODNN7EXAMPLE) or start with it
        check=lambda s: len(set(s[4:])) >= 6 and not s.endswith("EXAMPLE") and s[4:11] != "EXAMPLE",
    ),
    Rule(
        "aws_secret_access_key",
        linear_regex.compile(
            r"(?i:aws_?secret(?:_?access)?_?key|aws-secret-access-key)[\"']?[ \t]*(?::=|=>|[:=])"
            r"[ \t]*[\"']?(?P<v>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|\Z)"
        ),
        ("aws_secret", "awssecret", "aws-secret"),
        group="v",
        check=lambda s: random_looking(s, 4.0),
    ),
    Rule(
        "slack_token",
        token(word_start("xox") + r"[abposre]-(?:\d+-)+[A-Za-z0-9]{10,}"),
        ("xox",),
    ),
    Rule(
        "slack_webhook_url",
        linear_regex.compile(
            r"https://hooks\.slack\.com/(?:services|workflows|triggers)/"
            r"T[A-Z0-9]{6,}/[A-Z0-9]{6,}/[A-Za-z0-9]{16,}"
        ),
        ("hooks.slack.com",),
        group=0,
    ),
    Rule(
        "stripe_key",
        token(r"\b[sr]k_(?:live|test)_[A-Za-z0-9]{20,}"),
        ("sk_live_", "sk_test_", "rk_live_", "rk_test_"),
    ),
    Rule("google_api_key", token(word_start("AIza") + r"[A-Za-z0-9_\-]{35}"), ("aiza",)),
    Rule(
        "google_oauth_client_secret",
        token(word_start("GOCSPX-") + r"[A-Za-z0-9_\-]{28}"),
        ("gocspx-",),
    ),
    Rule("npm_token", token(word_start("npm_") + r"[A-Za-z0-9]{36}"), ("npm_",)),
    Rule(
        "pypi_token",
        token(word_start("pypi-AgEIcHlwaS5vcmc") + r"[A-Za-z0-9_\-]{50,}"),
        ("pypi-",),
    ),
    Rule(
        "huggingface_token",
        token(word_start("hf_") + r"[A-Za-z0-9]{34,40}"),
        ("hf_",),
        check=lambda s: random_looking(s[3:]),
    ),
    Rule(
        "sendgrid_api_key",
        token(word_start("SG.") + r"[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}"),
        ("sg.",),
    ),
    Rule(
        "telegram_bot_token",
        token(r"\b[0-9]{8,10}:AA[A-Za-z0-9_\-]{33}"),
        (":aa",),
    ),
    Rule(
        "azure_storage_key",
        linear_regex.compile(
            r"(?i:AccountKey|SharedAccessKey)[ \t]*=[ \t]*(?P<v>[A-Za-z0-9+/]{40,88}={0,2})"
            r"(?:[^A-Za-z0-9+/=]|\Z)"
        ),
        ("accountkey", "sharedaccesskey"),
        group="v",
        check=lambda s: random_looking(s, 4.0),
    ),
    Rule(
        "jwt",
        token(
            word_start("eyJ") + r"[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{16,}"
        ),
        ("eyj",),
        check=b64_header_ok,
    ),
    Rule(
        "basic_auth_header",
        linear_regex.compile(
            r"(?i:authorization)[\"']?[ \t]*[:=][ \t]*[\"']?(?i:basic)[ \t]+"
            r"(?P<v>[A-Za-z0-9+/]{8,}={0,2})(?:[^A-Za-z0-9+/=]|\Z)"
        ),
        ("authorization",),
        group="v",
        check=basic_ok,
    ),
    Rule(
        "bearer_token",
        linear_regex.compile(
            r"\b(?i:bearer)[ \t]+(?P<v>[A-Za-z0-9\-._~+/]{20,}=*)(?:[^A-Za-z0-9\-._~+/=]|\Z)"
        ),
        ("bearer",),
        group="v",
        check=lambda s: random_looking(s, 3.2),
    ),
)
# PEM private keys: the whole block when it is complete, else the header plus the base64 lines
# that follow it (a truncated paste still leaks key material).
PEM_LABEL = r"(?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----"
PEM_BEGIN = linear_regex.compile(r"-----BEGIN " + PEM_LABEL)
PEM_END = linear_regex.compile(r"-----END " + PEM_LABEL)
# base64 and header lines; a blank line only before a base64 line
PEM_BODY = linear_regex.compile(
    r"(?:\r?\n[ \t]*(?:[A-Za-z0-9+/=]{16,}|(?:Proc-Type|DEK-Info|Comment):[^\r\n]*"
    r"|\r?\n[A-Za-z0-9+/=]{16,}))*"
)
PEM_MATERIAL = linear_regex.compile(r"[A-Za-z0-9+/]{24}")
PEM_MAX = 20_000
# scheme://user:password@host — matched from the "://" so the search is literal-first.
URL_CREDENTIALS = linear_regex.compile(
    r"://(?P<user>[^\s:/@?#\"'<>]*):(?P<pw>[^\s/@?#\"'<>]+)@[A-Za-z0-9\[]"
)
SCHEME_CHARS = frozenset(string.ascii_letters + string.digits + "+.-")
WEB_SCHEMES = frozenset({"http", "https", "ftp", "ftps", "ws", "wss", "ssh", "git", "svn"})
# Assignments: find a key word (in the ASCII-lower-cased text), widen it to the whole key, then
# match "<sep> [type annotation] <op> value" after the key. The value is either quoted or a bare
# run of characters; the key's last word(s) decide what the value must look like.
KEYWORD = linear_regex.compile(r"pass|pw|secret|token|key")
KEY_RUN = linear_regex.compile(r"[A-Za-z0-9_.\-]*")  # always matches
MAX_KEY = 64
# a quoted value ends at the next quote character: the caller checks it is the opening one
ASSIGNMENT_TAIL = linear_regex.compile(
    r"[\"'`]?"
    r"(?:(?:[ \t]*:[ \t]*[A-Za-z_][\w\[\]|., ]{0,40}?)?[ \t]*(?P<op>:=|=>|==|=)|(?P<colon>:))"
    r"[ \t]*"
    r"(?:(?P<q>[\"'`])(?P<qv>[^\"'`\r\n]{1,200})(?P<closing>[\"'`])"
    r"|(?P<uv>[^\s\"'`,;()\[\]{}<>]{1,200}))"
)
SHORT_PASSWORD_WORDS = frozenset({"pwd", "pass", "pw"})
SECRET_LAST = frozenset({"secret", "token", "apikey", "secretkey", "accesskey", "privatekey"})
KEY_QUALIFIERS = frozenset(
    {"api", "access", "secret", "private", "signing", "encryption", "master", "client", "app",
     "auth", "account", "service", "admin", "license", "subscription", "webhook", "session"}
)  # fmt: skip
NON_SECRET_TOKEN_QUALIFIERS = frozenset(
    {"page", "next", "prev", "continuation", "cursor", "sync", "pagination", "max", "min", "num",
     "cancel", "cancellation", "bos", "eos", "pad", "unk", "sep", "cls", "mask", "start", "end",
     "stop", "special", "csrf", "xsrf"}
)  # fmt: skip
RANK_PRIVATE_KEY = -1
RANK_URL = len(RULES)
RANK_GENERIC = len(RULES) + 1
RANK_PASSWORD = len(RULES) + 2
ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
