"""The text the injection rules read: folded (case, compatibility forms, invisible format
characters, the accents of Latin letters), and its variants with an obfuscation undone
(homoglyphs, tag characters, leetspeak, letter spacing, base64). Used by :mod:`.injection`.

Each step reads the text once: a variant is made only when the text shows the obfuscation it
undoes (one search of RE2 each), never by a loop over the text's characters or words.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata

import numpy as np

from retrieval.regexes import linear_regex

# format characters: invisible, dropped before phrases are matched
_CF_CHARS = (
    "\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff"
    "\U000e0000-\U000e007f"
)
_CF = linear_regex.compile(f"[{_CF_CHARS}]")
_CF_DROP = dict.fromkeys(
    [
        c
        for lo, hi in re.findall(r"(.)(?:-(.))?", _CF_CHARS)
        for c in range(ord(lo), ord(hi or lo) + 1)
    ]
)
# (``re``, on the parts of a text outside ASCII: the marks after a Latin letter; one run per
# match, nothing to go back on)
_ACCENT = re.compile(r"([a-z])[\u0300-\u036f]+")
# Cyrillic and Greek letters that look like Latin ones (text is case-folded first)
_LOOKALIKES = (
    "\u0430\u0435\u043e\u0440\u0441\u0443\u0445\u0456\u0458\u0455\u0501\u04cf\u0261"
    "\u03bf\u03b1\u03b5\u03ba\u03bd\u03c1\u03c4\u03c5\u03c7"
)
CONFUSABLE = str.maketrans(_LOOKALIKES, "aeopcyxijsdlgoaeknptux")
_LOOKALIKE = re.compile(f"[{_LOOKALIKES}]")  # (``re``: one character per match)
MIXED_SCRIPT = linear_regex.compile(r"[a-z][\u0370-\u04ff]|[\u0370-\u04ff][a-z]")
LEET = str.maketrans("013457@$", "oieastas")
_LEET_BYTES = bytes.maketrans(b"013457@$", b"oieastas")
PUNCT = ".,;:!?()[]{}\"'`*"
LEET_TRIGGERS = frozenset(
    "ignore disregard forget override bypass previous prior instructions rules guidelines "
    "prompt system assistant".split()
)
_SPACED_HINT = linear_regex.compile(r"\b\w \w \w \w \w\b")  # read in the bounded text
# letter-spaced words: the run (group 1) between spaces or the ends of the text
_SPACED = linear_regex.compile(r"(?:^|\s)((?:\w {1,3}){4,}\w)(?:\s|$)")
_WIDE_GAP = linear_regex.compile(r" {2,}")
# a word of ``str.split`` that may be base64 (24 characters or more; group 1)
_B64_WORD = linear_regex.compile(r"(?:^|\s)([A-Za-z0-9+/]{21,}={0,2}[.,;:)\"']?)(?:\s|$)")
_TAG_ASCII = linear_regex.compile("[\U000e0020-\U000e007e]")


def fold(text: str) -> str:
    """Case-folded, compatibility-normalised, invisible format characters removed, accents of
    Latin letters dropped (``précédentes`` -> ``precedentes``)."""
    return fold_parts(text)[0]


def fold_parts(text: str) -> tuple[str, str]:
    """:func:`fold`, and the folded characters that are not ASCII (all in one string).

    ASCII is lower-cased as it is; only the runs of other characters, each with the character
    before it (a mark may belong to it), are normalised, all in one string: an ASCII character
    starts a new combining sequence, so the result is the same as normalising the whole text.
    """
    if text.isascii():
        return text.lower(), ""
    # on the UTF-8 bytes, where no byte of a character outside ASCII is an ASCII one: ASCII
    # lower-cased, each run of bytes of other characters found by numpy
    low = text.encode("utf-8", "surrogatepass").lower()
    outside = np.frombuffer(low, dtype=np.uint8) >= 0x80
    change = np.flatnonzero(outside[1:] != outside[:-1]) + 1
    starts = change[outside[change]].tolist()
    ends = change[~outside[change]].tolist()
    if outside[0]:
        starts.insert(0, 0)
    if outside[-1]:
        ends.append(len(low))
    spans = [(max(0, a - 1), b) for a, b in zip(starts, ends, strict=True)]
    pieces = [low[a:b].decode("utf-8", "surrogatepass") for a, b in spans]
    if "\x00" not in text:
        folded = _fold_all("\x00".join(pieces)).split("\x00")
    else:
        folded = [_fold_all(p) for p in pieces]
    out, end = [], 0
    for (a, b), part in zip(spans, folded, strict=True):
        out += [low[end:a], part.encode("utf-8", "surrogatepass")]
        end = b
    out.append(low[end:])
    return b"".join(out).decode("utf-8", "surrogatepass"), "".join(folded)


def _fold_all(text: str) -> str:
    text = unicodedata.normalize("NFKD", text.translate(_CF_DROP).casefold())
    return unicodedata.normalize("NFC", _ACCENT.sub(r"\1", text))


def despaced(folded: str) -> str:
    """``i g n o r e   a l l`` -> ``ignore all``: letter-spaced words joined again."""
    out: list[str] = []
    end = 0
    pos = 0
    while (m := _SPACED.search(folded, pos)) is not None:
        start, stop = m.span(1)
        out += [folded[end:start], _WIDE_GAP.sub("\0", m[1]).replace(" ", "").replace("\0", " ")]
        end = pos = stop  # the space after a run may open the next one
    out.append(folded[end:])
    return "".join(out)


def decoded_b64(text: str) -> list[str]:
    """The texts the words of ``text`` that are base64 (24 characters or more) decode to."""
    out = []
    pos = 0
    while (m := _B64_WORD.search(text, pos)) is not None:
        tok, pos = m[1], m.end(1)  # the space after a word may start the next one
        if len(tok) < 24:
            continue
        blob = tok.rstrip(".,;:)\"'")
        try:
            s = base64.b64decode(blob + "=" * (-len(blob) % 4), validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            continue
        if " " in s and sum(c.isprintable() for c in s) >= 0.95 * len(s):
            out.append(s)
    return out


def tag_payload(text: str) -> str:
    """ASCII smuggled in Unicode tag characters (U+E0020-E007E), decoded."""
    return "".join(chr(ord(c) - 0xE0000) for c in _TAG_ASCII.findall(text))


def _leet_pattern() -> str:
    """RE2: a word of ``str.split`` that is a trigger once its edges' punctuation is stripped
    and its leetspeak undone, and that is not letters alone."""
    sources: dict[str, str] = {}
    for src, letter in zip("013457@$", "oieastas", strict=True):
        sources[letter] = sources.get(letter, "") + src
    punct = "[" + re.escape(PUNCT) + "]"

    def cls(ch: str, leet_only: bool = False) -> str:
        extra = sources.get(ch, "")
        chars = extra if leet_only else ch + extra
        return "[" + re.escape(chars) + "]" if len(chars) > 1 or leet_only else re.escape(ch)

    any_body = "|".join("".join(cls(c) for c in w) for w in sorted(LEET_TRIGGERS))
    leet_body = "|".join(
        "".join(cls(c) for c in w[:i]) + cls(w[i], True) + "".join(cls(c) for c in w[i + 1 :])
        for w in sorted(LEET_TRIGGERS)
        for i in range(len(w))
        if w[i] in sources
    )
    body = rf"{punct}+(?:{any_body}){punct}*|(?:{any_body}){punct}+|{punct}*(?:{leet_body}){punct}*"
    return rf"(?:^|\s)(?:{body})(?:\s|$)"


_LEETSPEAK = linear_regex.compile(_leet_pattern())


def _unleet(text: str) -> str:
    """``text.translate(LEET)``, on the UTF-8 bytes when the text is not ASCII (no byte of a
    character outside ASCII is an ASCII one; ``str.translate`` would look each character up)."""
    if text.isascii():
        return text.translate(LEET)
    raw = text.encode("utf-8", "surrogatepass").translate(_LEET_BYTES)
    return raw.decode("utf-8", "surrogatepass")


def variants(
    text: str, folded: str, bounded: str, mixed: bool, hidden: bool
) -> list[tuple[str, bool]]:
    """The text with each obfuscation undone (only those it shows signs of; ``bounded``: the
    folded text as RE2 reads it for a word boundary; ``mixed``: it mixes Latin letters with
    Cyrillic or Greek ones; ``hidden``: the text holds invisible characters), each with whether
    it is made from the folded text (then it holds no character outside ASCII the folded text
    does not)."""
    out = []
    if not text.isascii():
        if mixed:
            out.append((_LOOKALIKE.sub(lambda m: m[0].translate(CONFUSABLE), folded), True))
        if hidden and (payload := tag_payload(text)):
            out.append((fold(payload), False))
    if _LEETSPEAK.search(folded):
        out.append((_unleet(folded), True))
    if _SPACED_HINT.search(bounded):
        out.append((despaced(folded), True))
    out += [(fold(s), False) for s in decoded_b64(text)]
    return out
