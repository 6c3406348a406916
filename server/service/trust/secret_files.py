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
- :func:`secret_text`: a diff in which the secret scanner finds something, or the armour line
  of a private key (``-----BEGIN … PRIVATE KEY-----`` or its ``END``: half a key split over two
  edits has one of them), also once base64 is undone (a key or token pasted encoded).

Both only read: the caller drops what they name. The name test is a few string comparisons;
the text test reads runs of base64 characters with one linear pattern and decodes at most
:data:`MAX_BLOBS` of them, each up to :data:`BLOB_BYTES`.
"""

from __future__ import annotations

import base64
import binascii
import re

from . import secrets

NAMES = frozenset({
    "credentials", ".netrc", "_netrc", ".pgpass", ".git-credentials", ".npmrc", ".pypirc",
    ".htpasswd", ".dockercfg",
})  # fmt: skip
SUFFIXES = (".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".ppk")
PREFIXES = (".env", "credentials.", "secrets.", "secret.")
FOLDERS = frozenset({".ssh", ".gnupg", ".aws", ".kube", "secrets"})
ARMOUR = "PRIVATE KEY-----"  # the end of a PEM or OpenSSH key's BEGIN and END lines
# runs of base64 characters, standard and URL-safe (a class then padding: linear, no backtracking)
BASE64_RUNS = (re.compile(r"[A-Za-z0-9+/]+=*"), re.compile(r"[A-Za-z0-9_-]+=*"))
MIN_BLOB = 32  # characters of a base64 run worth decoding
MAX_BLOBS = 32
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


def secret_text(text: str, depth: int = 0) -> bool:
    """Whether ``text`` (a diff hunk, a command) holds a secret as the scanner sees it, a
    private key's armour line, or either inside a base64 run."""
    if not isinstance(text, str) or not text:
        return False
    if ARMOUR in text.upper() or secrets.scan(text):
        return True
    if depth >= MAX_DEPTH:
        return False
    for urlsafe, pattern in enumerate(BASE64_RUNS):
        blobs = 0
        for m in pattern.finditer(text):
            if m.end() - m.start() < MIN_BLOB:
                continue
            blobs += 1
            if blobs > MAX_BLOBS:
                break
            if any(secret_text(t, depth + 1) for t in _decoded(m.group(), bool(urlsafe))):
                return True
    return False


__all__ = ["secret_bearing", "secret_text"]
