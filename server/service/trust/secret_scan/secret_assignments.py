"""Credentials in assignments (``password = …``, ``api_key: …``) found by the secret scanner
(:mod:`.secrets`): a key word (``pass``, ``pw``, ``secret``, ``token``, ``key``) widened to the
whole key, the key's last words deciding what the value must look like.

A text is read by one RE2 search per *candidate*: a key whose last word can make it a secret,
followed by an assignment, and (for a key, token or secret) by a value holding a digit. Each
candidate is then read as every key word was before (:func:`_at_key_word`): the key words in
keys that are no candidate can yield nothing, and only set where the next key word is read
from, which the search does by itself. So ``key=key=key=…`` is one search, not one per key.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from retrieval.regexes import linear_regex
from server.service.trust.secret_scan.secret_checks import generic_ok, key_words, password_ok
from server.service.trust.secret_scan.secret_rules import (
    ASSIGNMENT_TAIL,
    KEY_QUALIFIERS,
    KEYWORD,
    MAX_KEY,
    NON_SECRET_TOKEN_QUALIFIERS,
    RANK_GENERIC,
    RANK_PASSWORD,
    SECRET_LAST,
    SHORT_PASSWORD_WORDS,
)

KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
# a key ending in a word that can make it a password (group ``pw``) or a secret (``secret``),
# read in the ASCII-lower-cased text; then what an assignment needs: an operator, and for a
# key, token or secret a digit in the first 200 characters of its value
_OPERATOR = r"[\"'`]?(?:[ \t]*:[ \t]*[A-Za-z_][\w\[\]|., ]{0,40})?[ \t]*[:=]"
_DIGIT_VALUE = r"[ \t]*[\"'`]?[^\"'`\r\n]{0,199}[0-9]"
CANDIDATE = linear_regex.compile(
    r"(?P<pw>[a-z0-9_.\-]*(?:pass(?:word|wd|phrase)?|pwd|pw)[_.\-]*)" + _OPERATOR
    + r"|(?P<secret>[a-z0-9_.\-]*(?:key|secret|token)[_.\-]*)" + _OPERATOR + _DIGIT_VALUE
)  # fmt: skip


@dataclass(frozen=True)
class Candidate:
    kind: str
    start: int
    end: int
    rank: int  # lower wins an overlap


def classify_key(key: str) -> str | None:
    words = key_words(key)
    if not words:
        return None
    last = words[-1]
    prev = words[-2] if len(words) > 1 else ""
    if last.endswith(("password", "passwd", "passphrase")):
        return "password"
    if last in SHORT_PASSWORD_WORDS:
        # "db_pass", "SMTP-PWD"; alone, "pass" is an English word and "PWD" the working
        # directory, and "GraphPass"/"RenderPass" are compiler and GPU passes
        return "password" if prev and key[-len(last) - 1] in "_-." else None
    if last == "key":
        return "generic" if prev in KEY_QUALIFIERS else ("bare_key" if not prev else None)
    if last == "token" and prev in NON_SECRET_TOKEN_QUALIFIERS:
        return None
    if last in SECRET_LAST or last.endswith(("secret", "apikey", "token")):
        return "generic"
    return None


def assignments(text: str, low: str) -> Iterator[Candidate]:
    """The credentials assigned in ``text`` (``low``: the text with ASCII lower-cased), as the
    scan of every key word finds them: each key word, unless it is in a key already read or in
    a value already reported, is read with its whole key (:func:`_at_key`)."""
    pos = 0  # key words before this are not read
    while (c := CANDIDATE.search(low, pos)) is not None:
        group = "pw" if c["pw"] is not None else "secret"
        start, end = c.span(group)
        if start == pos:  # the key may begin before the search did
            while start > 0 and low[start - 1] in KEY_CHARS and end - start <= MAX_KEY:
                start -= 1
        if end - start > MAX_KEY:
            pos = end
            continue
        # the key is read if one of its key words (as a search from its start finds them) is
        # at or after pos
        if not any(h.start() >= pos for h in KEYWORD.finditer(low, start, end)):
            pos = end
            continue
        found, pos = _at_key(text, start, end)
        if found is not None:
            yield found


def _at_key(text: str, start: int, end: int) -> tuple[Candidate | None, int]:
    """The credential assigned to the key ``text[start:end]``, and where the next key word is
    read from (after the value reported, or after the key)."""
    if end - start > MAX_KEY or text[start - 1 : start] == ":":  # arn:…:secret:name-1a2b
        return None, end
    key = text[start:end].lstrip("0123456789.-").rstrip(".-")
    cls = classify_key(key) if key else None
    if cls is None:
        return None, end
    m = ASSIGNMENT_TAIL.match(text, end)
    if m is None or m.group("op") == "==":  # "==" is a comparison, not an assignment
        return None, end
    if m.group("q") is not None and m.group("closing") != m.group("q"):
        return None, end  # "'value\"": no quoted value (a quote character cannot be a bare one)
    group = "qv" if m.group("qv") is not None else "uv"
    value = m.group(group)
    v_start, v_end = m.span(group)
    if group == "uv" and text[start - 1 : start] in ("?", "&"):
        value = value.split("&", 1)[0]  # a URL query parameter ends at the next "&"
        v_end = v_start + len(value)
    if cls == "password":
        if not password_ok(value, group == "qv", text, v_end):
            return None, end
        return Candidate("password_assignment", v_start, v_end, RANK_PASSWORD), v_end
    if text[v_end : v_end + 1] not in ("(", "[") and generic_ok(value, cls == "bare_key"):
        return Candidate("generic_api_key_assignment", v_start, v_end, RANK_GENERIC), v_end
    return None, end
