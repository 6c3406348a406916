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

from .secret_checks import b64_header_ok, basic_ok, random_looking


@dataclass(frozen=True)
class Rule:
    kind: str
    pattern: re.Pattern[str]
    # The pattern only runs when one of these appears in the (ASCII-lower-cased) text: most
    # content holds no credential at all, and a substring test is far cheaper than a regex pass.
    hints: tuple[str, ...]
    group: str | int = 0  # the part of the match that is the secret
    check: Callable[[str], bool] | None = None


END = r"(?![A-Za-z0-9_\-])"


def word_start(prefix: str) -> str:
    """``prefix`` at the start of a word, written literal-first so ``re`` can search it fast."""
    esc = re.escape(prefix)
    return rf"{esc}(?<![A-Za-z0-9_]{esc})"


RULES: tuple[Rule, ...] = (
    Rule(
        "anthropic_api_key",
        re.compile(word_start("sk-ant-") + r"[a-z]{2,8}\d{0,3}-[A-Za-z0-9_\-]{32,}" + END),
        ("sk-ant-",),
    ),
    Rule(
        "openai_api_key",
        re.compile(
            word_start("sk-") + r"(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{32,}" + END
        ),
        ("sk-",),
        check=lambda s: random_looking(s.split("-", 1)[1]),
    ),
    Rule(
        "github_token",
        re.compile(word_start("gh") + r"[pousr]_[A-Za-z0-9]{36,255}" + END),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ),
    Rule(
        "github_token",
        re.compile(word_start("github_pat_") + r"[A-Za-z0-9]{22}_[A-Za-z0-9]{59}" + END),
        ("github_pat_",),
    ),
    Rule(
        "gitlab_token",
        re.compile(word_start("glpat-") + r"[A-Za-z0-9_\-]{20,}" + END),
        ("glpat-",),
    ),
    Rule(
        "aws_access_key_id",
        re.compile(r"A(?:KIA|SIA|BIA|CCA)(?<![A-Za-z0-9_]A[A-Z]{3})[A-Z0-9]{16}\b"),
        ("akia", "asia", "abia", "acca"),
        # AWS documentation examples end in EXAMPLE (AKIAIOSFODNN7EXAMPLE) or start with it
        check=lambda s: len(set(s[4:])) >= 6 and not s.endswith("EXAMPLE") and s[4:11] != "EXAMPLE",
    ),
    Rule(
        "aws_secret_access_key",
        re.compile(
            r"(?i:aws_?secret(?:_?access)?_?key|aws-secret-access-key)[\"']?[ \t]*(?::=|=>|[:=])"
            r"[ \t]*[\"']?(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
        ("aws_secret", "awssecret", "aws-secret"),
        group="v",
        check=lambda s: random_looking(s, 4.0),
    ),
    Rule(
        "slack_token",
        re.compile(word_start("xox") + r"[abposre]-(?:\d+-)+[A-Za-z0-9]{10,}" + END),
        ("xox",),
    ),
    Rule(
        "slack_webhook_url",
        re.compile(
            r"https://hooks\.slack\.com/(?:services|workflows|triggers)/"
            r"T[A-Z0-9]{6,}/[A-Z0-9]{6,}/[A-Za-z0-9]{16,}"
        ),
        ("hooks.slack.com",),
    ),
    Rule(
        "stripe_key",
        re.compile(
            r"[sr]k_(?:live|test)_(?<![A-Za-z0-9_][sr]k_(?:live|test)_)[A-Za-z0-9]{20,}" + END
        ),
        ("sk_live_", "sk_test_", "rk_live_", "rk_test_"),
    ),
    Rule("google_api_key", re.compile(word_start("AIza") + r"[A-Za-z0-9_\-]{35}" + END), ("aiza",)),
    Rule(
        "google_oauth_client_secret",
        re.compile(word_start("GOCSPX-") + r"[A-Za-z0-9_\-]{28}" + END),
        ("gocspx-",),
    ),
    Rule("npm_token", re.compile(word_start("npm_") + r"[A-Za-z0-9]{36}" + END), ("npm_",)),
    Rule(
        "pypi_token",
        re.compile(word_start("pypi-AgEIcHlwaS5vcmc") + r"[A-Za-z0-9_\-]{50,}" + END),
        ("pypi-",),
    ),
    Rule(
        "huggingface_token",
        re.compile(word_start("hf_") + r"[A-Za-z0-9]{34,40}" + END),
        ("hf_",),
        check=lambda s: random_looking(s[3:]),
    ),
    Rule(
        "sendgrid_api_key",
        re.compile(word_start("SG.") + r"[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}" + END),
        ("sg.",),
    ),
    Rule(
        "telegram_bot_token",
        re.compile(r"(?<![A-Za-z0-9_])\d{8,10}:AA[A-Za-z0-9_\-]{33}" + END),
        (":aa",),
    ),
    Rule(
        "azure_storage_key",
        re.compile(
            r"(?i:AccountKey|SharedAccessKey)[ \t]*=[ \t]*(?P<v>[A-Za-z0-9+/]{40,88}={0,2})"
            r"(?![A-Za-z0-9+/=])"
        ),
        ("accountkey", "sharedaccesskey"),
        group="v",
        check=lambda s: random_looking(s, 4.0),
    ),
    Rule(
        "jwt",
        re.compile(
            word_start("eyJ")
            + r"[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{16,}"
            + END
        ),
        ("eyj",),
        check=b64_header_ok,
    ),
    Rule(
        "basic_auth_header",
        re.compile(
            r"(?i:authorization)[\"']?[ \t]*[:=][ \t]*[\"']?(?i:basic)[ \t]+"
            r"(?P<v>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])"
        ),
        ("authorization",),
        group="v",
        check=basic_ok,
    ),
    Rule(
        "bearer_token",
        re.compile(
            r"(?i:bearer)(?<![A-Za-z0-9_]\w{6})[ \t]+(?P<v>[A-Za-z0-9\-._~+/]{20,}=*)(?![A-Za-z0-9\-._~+/=])"
        ),
        ("bearer",),
        group="v",
        check=lambda s: random_looking(s, 3.2),
    ),
)
# PEM private keys: the whole block when it is complete, else the header plus the base64 lines
# that follow it (a truncated paste still leaks key material).
PEM_LABEL = r"(?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----"
PEM_BEGIN = re.compile(r"-----BEGIN " + PEM_LABEL)
PEM_END = re.compile(r"-----END " + PEM_LABEL)
PEM_BODY = re.compile(
    r"(?:\r?\n[ \t]*(?:[A-Za-z0-9+/=]{16,}|(?:Proc-Type|DEK-Info|Comment):[^\r\n]*"
    r"|(?=\r?\n[A-Za-z0-9+/=]{16,})))*"
)
PEM_MATERIAL = re.compile(r"[A-Za-z0-9+/]{24}")
PEM_MAX = 20_000
# scheme://user:password@host — matched from the "://" so the search is literal-first.
URL_CREDENTIALS = re.compile(r"://(?P<user>[^\s:/@?#\"'<>]*):(?P<pw>[^\s/@?#\"'<>]+)@[A-Za-z0-9\[]")
SCHEME_CHARS = frozenset(string.ascii_letters + string.digits + "+.-")
WEB_SCHEMES = frozenset({"http", "https", "ftp", "ftps", "ws", "wss", "ssh", "git", "svn"})
# Assignments: find a key word (in the ASCII-lower-cased text), widen it to the whole key, then
# match "<sep> [type annotation] <op> value" after the key. The value is either quoted or a bare
# run of characters; the key's last word(s) decide what the value must look like.
KEYWORD = re.compile(r"pass|pw|secret|token|key")
KEY_RUN = re.compile(r"[A-Za-z0-9_.\-]*")  # always matches
MAX_KEY = 64
ASSIGNMENT_TAIL = re.compile(
    r"[\"'`]?"
    r"(?:(?:[ \t]*:[ \t]*[A-Za-z_][\w\[\]|., ]{0,40}?)?[ \t]*(?P<op>:=|=>|==|=)|(?P<colon>:))"
    r"[ \t]*"
    r"(?:(?P<q>[\"'`])(?P<qv>[^\"'`\r\n]{1,200})(?P=q)"
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
