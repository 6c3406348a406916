"""Files that hold secrets, and diffs that must not be kept: what a write no person asked for
keeps of a file the agent changed.

A lesson learned from a session keeps the names of the files its fix changed and short diff
hunks of them. For a *secret-bearing* file it keeps the name and never the diff, whatever the
write policy (under ``warn`` a kept diff would publish the secret, and nobody reads the warning
of such a write):

- :func:`secret_bearing`: by its name or folder, a file made to hold credentials: ``.env`` and
  every ``.env*`` (``.env.production``, ``.envrc``), private keys and keystores (``*.pem``,
  ``*.key``, ``*.p12``, ``*.pfx``, ``*.jks``, ``*.keystore``, ``*.ppk``, ``id_rsa``,
  ``id_ed25519`` and every ``id_*`` but its ``.pub``), ``credentials`` (``~/.aws/credentials``)
  and ``credentials.*``, ``secrets.*`` and ``secret.*``, the password files of tools
  (``.netrc``, ``.pgpass``, ``.git-credentials``, ``.npmrc``, ``.pypirc``, ``.htpasswd``), and
  every file in a ``.ssh``, ``.gnupg``, ``.aws``, ``.kube`` or ``secrets`` folder;
- :func:`secret_text`: a diff in which the secret scanner finds something, the armour line
  of a private key (``-----BEGIN … PRIVATE KEY-----`` or its ``END``: half a key split over two
  edits has one of them), a Kubernetes ``kind: Secret`` manifest, or any of these once base64
  is undone (a key or token pasted encoded);
- :func:`withheld_files`: of the edits of one write, the files whose diffs it leaves out: the
  secret-bearing ones, those a diff of which holds a secret, those whose diffs together do
  (a key split over two edits of one file, or of two files), and every file a shell command
  that edited one of them edited too (its diff is that command);
- :func:`without_encoded`: a text with each base64 run that decodes to a secret replaced by
  ``[REDACTED:encoded_secret]`` (the secret scanner reads text as it is: an encoded token
  would pass it).

They only read: the caller drops or replaces what they name. The name test is a few string
comparisons; the text tests read runs of base64 characters with one linear pattern and decode
at most :data:`MAX_BLOBS` of them, each up to :data:`BLOB_BYTES`.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable
from typing import Any

from server.service.trust.secret_scan import secrets

NAMES = frozenset({
    "credentials", ".netrc", "_netrc", ".pgpass", ".git-credentials", ".npmrc", ".pypirc",
    ".htpasswd", ".dockercfg",
})  # fmt: skip
SUFFIXES = (".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".ppk")
PREFIXES = (".env", "credentials.", "secrets.", "secret.")
FOLDERS = frozenset({".ssh", ".gnupg", ".aws", ".kube", "secrets"})
ARMOUR = "PRIVATE KEY-----"  # the end of a PEM or OpenSSH key's BEGIN and END lines
K8S_SECRET = re.compile(r"(?m)^\s*kind:\s*[\"']?Secret[\"']?\s*$")
# a line of a PEM body: base64 only (a diff's +/- and quotes around it), 40 characters or more
KEY_LINE = re.compile(r"[+\- ]?[\"']?([A-Za-z0-9+/]{40,}={0,2})[\"']?,?")
KEY_LINES = 3  # such lines in a row: key material, even without its armour lines
ENCODED = "[REDACTED:encoded_secret]"
# runs of base64 characters, standard and URL-safe (a class then padding: linear, no backtracking)
BASE64_RUNS = (re.compile(r"[A-Za-z0-9+/]+=*"), re.compile(r"[A-Za-z0-9_-]+=*"))
MIN_BLOB = 32  # characters of a base64 run worth decoding
MAX_BLOBS = 256
BLOB_BYTES = 16_384
MAX_DEPTH = 2  # base64 of base64


def _parts(path: str) -> list[str]:
    return [p for p in path.replace("\\", "/").split("/") if p]


def secret_bearing(path: str) -> bool:
    """Whether ``path`` (as an agent wrote it: absolute, relative, Windows) names a file made to
    hold credentials (module docstring). Case does not matter."""
    if not isinstance(path, str):
        return False
    parts = [p.lower() for p in _parts(path.strip())]
    if not parts:
        return False
    name = parts[-1]
    if name in NAMES or name.endswith(SUFFIXES) or name.startswith(PREFIXES):
        return True
    if name.startswith("id_") and not name.endswith(".pub"):
        return True
    return any(p in FOLDERS for p in parts[:-1])


def _decoded(run: str, urlsafe: bool) -> list[str]:
    """The texts a base64 run decodes to, read from each of its first four characters (a word
    glued in front shifts the groups), those mostly printable."""
    out = []
    for start in range(4):
        raw = run[start:].rstrip("=")[: BLOB_BYTES * 4 // 3]
        raw = raw[: len(raw) - len(raw) % 4]
        if len(raw) < MIN_BLOB:
            break
        try:
            data = base64.b64decode(raw, altchars=b"-_" if urlsafe else None, validate=True)
        except (binascii.Error, ValueError):
            continue
        text = data.decode("utf-8", errors="replace")
        printable = sum(c.isprintable() or c in "\n\r\t" for c in text)
        if printable >= 0.9 * len(text):
            out.append(text)
    return out


def _key_body(text: str) -> bool:
    """:data:`KEY_LINES` lines in a row that are base64 alone: the body of a key (or of a
    certificate: its diff is not worth keeping either)."""
    run = 0
    for line in text.splitlines():
        run = run + 1 if KEY_LINE.fullmatch(line.strip()) else 0
        if run >= KEY_LINES:
            return True
    return False


def _plain_secret(text: str) -> bool:
    return (ARMOUR in text.upper() or bool(secrets.scan(text))
            or bool(K8S_SECRET.search(text)) or _key_body(text))  # fmt: skip


def encoded_spans(text: str, depth: int = 0) -> list[tuple[int, int]]:
    """The base64 runs of ``text`` that decode to a secret (:func:`secret_text`), as spans."""
    spans: list[tuple[int, int]] = []
    if depth >= MAX_DEPTH or not isinstance(text, str):
        return spans
    for urlsafe, pattern in enumerate(BASE64_RUNS):
        blobs = 0
        for m in pattern.finditer(text):
            if m.end() - m.start() < MIN_BLOB:
                continue
            blobs += 1
            if blobs > MAX_BLOBS:
                break
            for inner in _decoded(m.group(), bool(urlsafe)):
                if _plain_secret(inner) or encoded_spans(inner, depth + 1):
                    spans.append(m.span())
                    break
    return spans


def secret_text(text: str) -> bool:
    """Whether ``text`` (a diff hunk, a path, a command) holds a secret as the scanner sees
    it, a private key's armour line, a Kubernetes Secret, or any of these base64-encoded."""
    if not isinstance(text, str) or not text:
        return False
    return _plain_secret(text) or bool(encoded_spans(text))


def without_encoded(text: str) -> tuple[str, int]:
    """(``text`` with every base64 run that decodes to a secret replaced by
    :data:`ENCODED`, how many were replaced)."""
    if not isinstance(text, str) or len(text) < MIN_BLOB:
        return text, 0
    spans = sorted(set(encoded_spans(text)))
    if not spans:
        return text, 0
    out, cursor, n = [], 0, 0
    for start, end in spans:
        if start < cursor:  # overlapping runs of the two alphabets: the first covers it
            start = cursor
        if start >= end:
            continue
        out += [text[cursor:start], ENCODED]
        cursor, n = end, n + 1
    out.append(text[cursor:])
    return "".join(out), n


def without_encoded_tree(value: Any) -> tuple[Any, int]:
    """:func:`without_encoded` on every string of a JSON-like value (dict keys too): (the
    value, how many runs were replaced)."""
    if isinstance(value, str):
        return without_encoded(value)
    if isinstance(value, dict):
        out, n = {}, 0
        for k, v in value.items():
            k2, a = without_encoded_tree(k)
            v2, b = without_encoded_tree(v)
            out[k2], n = v2, n + a + b
        return (out, n) if n else (value, 0)
    if isinstance(value, list | tuple):
        parts = [without_encoded_tree(v) for v in value]
        n = sum(c for _v, c in parts)
        return ([v for v, _c in parts], n) if n else (value, 0)
    return value, 0


def withheld_files(edits: Iterable[tuple[int, str, str]]) -> set[str]:
    """Of ``edits`` (position, path, diff) of one write, the paths whose diffs it must leave
    out (module docstring)."""
    edits = [(i, p, h) for i, p, h in edits if h]
    by_path: dict[str, list[str]] = {}
    for _i, path, hunk in edits:
        by_path.setdefault(path, []).append(hunk)
    bad = {p for p, texts in by_path.items()
           if secret_bearing(p) or secret_text(p) or secret_text("\n".join(texts))}  # fmt: skip
    rest = [h for _i, p, h in edits if p not in bad]
    if len(rest) > 1 and secret_text("\n".join(rest)):
        bad = set(by_path)  # a secret only the diffs of two edits make together
    shared = {i for i, path, _h in edits if path in bad}
    return bad | {path for i, path, _h in edits if i in shared}


__all__ = [
    "secret_bearing",
    "secret_text",
    "withheld_files",
    "without_encoded",
    "without_encoded_tree",
]
