"""The secret scanner's value checks: what makes a matched value a credential rather than a
placeholder, a reference, a path or an ordinary word (entropy, character classes, placeholder
words, key names). Used by the rule tables (:mod:`.secret_rules`) and the scanner
(:mod:`.secrets`).
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import string
from collections import Counter

from retrieval.regexes import linear_regex

SEPARATORS = linear_regex.compile(r"[_\-./:~+]+")
NON_ALNUM = linear_regex.compile(r"[^a-z0-9]+")
# (``re``: RE2 has no lookahead; linear, each run read once: tests/trust/test_linear_regex.py)
KEY_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
TOKEN_CHARS = linear_regex.compile(r"[A-Za-z0-9_\-+/=.~]+")
DOTTED = linear_regex.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
HEX = linear_regex.compile(r"[0-9a-fA-F]+")
IDENTIFIER = linear_regex.compile(r"[A-Za-z_][\w.\-]*")
PORT_LIKE = linear_regex.compile(r"\d{1,5}")
NAMES_A_CREDENTIAL = linear_regex.compile(
    r"(?i)[a-z_\-.]*(?:passw(?:or)?d|secret|token|api_?key)[a-z_\-.]*"
)
PATH_OR_URL = linear_regex.compile(
    r"(?:~?/|\.\.?/|[A-Za-z]:\\|[A-Za-z][A-Za-z0-9+.\-]*://|(?i:arn|urn):[A-Za-z0-9\-]+:)"
)
FILE_NAME = linear_regex.compile(r"[A-Za-z0-9]\.[a-z][a-z0-9]{1,3}$")
UUID = linear_regex.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")


def entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def preview_of(secret: str) -> str:
    """First few characters + an ellipsis; never more than a third of a short secret."""
    return secret[: min(4, len(secret) // 3)] + "…"


WORD_PART = linear_regex.compile(r"[a-z]+\d{0,3}|\d{1,4}|[A-Z][a-z]+\d{0,3}|[A-Z]+\d{0,3}")


def word_like(value: str) -> bool:
    """Names, not random strings: ``user_profile_cache_v2``, ``Sam3TrackerAttention``.

    Either words joined by separators, or (camelCase) words of 3+ letters covering 80% of the
    letters with few digit groups in between. Random strings rarely pass (about 2% at 20
    characters, under 1% at 32), identifiers almost always do.
    """
    parts = [p for p in SEPARATORS.split(value) if p]
    if len(parts) >= 2 and all(WORD_PART.fullmatch(p) for p in parts):
        return True
    tokens = KEY_WORD.findall(value)
    letters = [t for t in tokens if not t[0].isdigit()]
    words = [t for t in letters if len(t) >= 3]
    total = sum(map(len, letters))
    if len(tokens) < 2 or not total or len(tokens) - len(letters) > max(1, len(words) // 2):
        return False
    return sum(map(len, words)) >= 0.8 * total


DIGITS = frozenset(string.digits)
LETTERS = frozenset(string.ascii_letters)
UPPER = frozenset(string.ascii_uppercase)
LOWER = frozenset(string.ascii_lowercase)


def has_letter_and_digit(value: str) -> bool:
    return not (LETTERS.isdisjoint(value) or DIGITS.isdisjoint(value))


def random_looking(value: str, min_entropy: float = 3.5) -> bool:
    return has_letter_and_digit(value) and not word_like(value) and entropy(value) >= min_entropy


PLACEHOLDER_WORDS = frozenset(
    {
        "password", "passwd", "pass", "pwd", "passphrase", "secret", "secrets", "token",
        "apikey", "key", "changeme", "changeit", "test", "testing", "admin", "root", "user",
        "username", "guest", "demo", "default", "foo", "bar", "baz", "foobar", "qwerty",
        "letmein", "none", "null", "nil", "true", "false", "undefined", "empty", "required",
        "optional", "string", "str", "bytes", "int", "hidden", "masked", "unset", "todo",
        "tbd", "fixme", "value", "abc", "abcdef", "xyz", "mysecret", "notasecret",
    }
)  # fmt: skip
PLACEHOLDER_SUBSTRINGS = (
    "example", "placeholder", "redacted", "dummy", "changeme", "change_me", "change-me",
    "xxxx", "your", "replace", "insert", "${", "{{", "}}", "%(", "<", ">", "…", "...",
    "password", "passwd", "::",
)  # fmt: skip
TEMPLATE_PREFIXES = ("{", "<", "[")
# $VAR, ${VAR}, %VAR%, :name, @name, !vault, *alias, &anchor: references, not values
REFERENCE = linear_regex.compile(r"[$%:@*&!?]\{?[A-Za-z0-9_][\w.]*\}?%?")
DUMMY_PHRASE = linear_regex.compile(
    r"(?:my|the|a|an|new|old|db|database|app|user|admin|root|some|super|test)?"
    r"(?:password|passwd|pass|pwd|secret|token|apikey|key)(?:here|goes(?:here)?|value)?\d*"
)


def is_placeholder(value: str) -> bool:
    v = value.strip()
    low = v.lower()
    if len(v) < 5 or len(set(v)) <= 2:
        return True
    if v.startswith(TEMPLATE_PREFIXES) or REFERENCE.fullmatch(v):
        return True
    if any(s in low for s in PLACEHOLDER_SUBSTRINGS):
        return True
    if NAMES_A_CREDENTIAL.fullmatch(v):  # "challengePassword", "API_TOKEN": a name, not a value
        return True
    alnum = NON_ALNUM.sub("", low)
    word = alnum.rstrip("0123456789")
    return word in PLACEHOLDER_WORDS or bool(DUMMY_PHRASE.fullmatch(alnum))


def key_words(key: str) -> list[str]:
    """``DB_PASSWORD`` -> [db, password]; ``dbPassword`` -> [db, password]."""
    return [w.lower() for w in KEY_WORD.findall(key)]


def b64_header_ok(token: str) -> bool:
    head = token.split(".", 1)[0]
    try:
        decoded = base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    return decoded.lstrip().startswith("{") and ('"alg"' in decoded or '"typ"' in decoded)


def basic_ok(value: str) -> bool:
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    user, sep, password = decoded.partition(":")
    return bool(sep) and bool(user) and not is_placeholder(password)


def generic_ok(value: str, strict: bool) -> bool:
    if len(value) < (20 if strict else 16) or not has_letter_and_digit(value):
        return False
    if not TOKEN_CHARS.fullmatch(value):
        return False
    if DOTTED.fullmatch(value) or UUID.fullmatch(value):  # a reference, a request/record id
        return False
    if FILE_NAME.search(value):  # dcp/build_17.tar, certs/server.key
        return False
    if strict:
        return (
            not UPPER.isdisjoint(value)
            and not LOWER.isdisjoint(value)
            and random_looking(value, 4.0)
            and not is_placeholder(value)
        )
    if HEX.fullmatch(value):
        ok = len(value) >= 32 and entropy(value) >= 3.0
    else:
        ok = random_looking(value, 3.5)
    return ok and not is_placeholder(value)


def password_ok(value: str, quoted: bool, text: str, end: int) -> bool:
    if PATH_OR_URL.match(value) or is_placeholder(value):
        return False
    if value.count(" ") >= 3:  # a description ("The password for the admin user."), not a value
        return False
    if quoted:
        return True
    # Bare values: reject identifiers, calls, attribute paths and subscripts.
    if end < len(text) and text[end] in "([.":
        return False
    if IDENTIFIER.fullmatch(value) and DIGITS.isdisjoint(value):
        return False
    if DOTTED.fullmatch(value):
        return False
    return not PORT_LIKE.fullmatch(value)
