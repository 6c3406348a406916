"""Reading outside input within bounds: what every importer reads (a file someone else wrote, an
archive, a database) passes through these, so a hostile or broken source ends in one clear error
or a skipped item, never in a hang, a blown-up memory or a traceback.

The limits, none of which a real source comes near (``docs/migrate.md`` lists them):

* :data:`MAX_DOCUMENT_BYTES`: a JSON document, a JSON lines file or a zip archive on disk;
* :data:`MAX_INFLATED_BYTES`, :data:`MAX_RATIO`: a zip member or a gzip stream, inflated, and
  how much larger than its compressed size it may be (beyond its first MiB);
* :data:`MAX_MEMBERS`: the entries of a zip archive, the members of a gzip stream;
* :data:`MAX_DEPTH`: the nesting of a JSON or YAML value;
* :data:`MAX_FIELD_CHARS`: one string of an item (its text, title, any field), and one value of
  an SQLite row (``sqlite_source``);
* :data:`MAX_JSON_VALUES`: the objects, arrays and strings of one JSON document (each becomes
  an object in memory many times its size in the text: ``{}`` is 2 bytes, its dict 64);
* :data:`MAX_ITEMS`: the items (and skipped units) one source yields (:func:`check_count`).

:class:`SourceError` says what was found; the importer turns it into its one ``unreadable``
error (the whole source) or a skipped item (one unit of it).
"""

from __future__ import annotations

import json
import math
import struct
import zipfile
import zlib
from collections.abc import Iterable
from datetime import date, datetime
from typing import IO, Any

MiB = 1 << 20
MAX_DOCUMENT_BYTES = 256 * MiB
MAX_INFLATED_BYTES = 256 * MiB
MAX_RATIO = 100
RATIO_FREE_BYTES = MiB  # a small member may inflate as much as it likes
MAX_MEMBERS = 10_000
MAX_DEPTH = 64
MAX_FIELD_CHARS = MiB
MAX_JSON_VALUES = 10_000_000
MAX_ITEMS = 1_000_000
CHUNK = MiB


class SourceError(ValueError):
    """Outside input that is not what it should be, or over a limit: the message says what
    was found (the importer adds what it expected)."""


def size_text(n: int) -> str:
    """``n`` bytes as a person reads it."""
    if n >= MiB:
        return f"{n / MiB:.0f} MiB"
    return f"{n / 1024:.0f} KiB" if n >= 1024 else f"{n} bytes"


# ---------------------------------------------------------------------- values
def check_tree(
    value: Any, what: str = "", max_depth: int = MAX_DEPTH, max_total: int | None = None,
    max_text: int | None = MAX_FIELD_CHARS, unicode: bool = False,
) -> None:  # fmt: skip
    """Raise :class:`SourceError` when ``value`` (JSON-like) nests deeper than ``max_depth``
    levels, holds a string longer than ``max_text`` characters, or strings longer than
    ``max_total`` characters in all, or (``unicode``) a string that is not Unicode text (a
    lone surrogate, which JSON's ``\\ud800`` and a file name that is not UTF-8 can hold: it
    cannot be stored); iterative, so any depth is measured without recursion."""
    where = f"{what}: " if what else ""
    total = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, str):
            total += len(v)
            if max_text is not None and len(v) > max_text:
                raise SourceError(
                    f"{where}a text of {len(v)} characters; at most {max_text} are read"
                )
            if max_total is not None and total > max_total:
                raise SourceError(f"{where}texts of more than {max_total} characters in all")
            if unicode and not v.isascii():
                try:
                    v.encode("utf-8")
                except UnicodeEncodeError as exc:
                    lone = ord(v[exc.start])
                    raise SourceError(
                        f"{where}not Unicode text (a lone surrogate U+{lone:04X})"
                    ) from None
            continue
        if isinstance(v, dict):
            children: Iterable = [*v.keys(), *v.values()]
        elif isinstance(v, list | tuple):
            children = v
        else:
            continue
        if depth > max_depth:
            raise SourceError(f"{where}a value nested deeper than {max_depth} levels")
        stack.extend((c, depth + 1) for c in children)


def printable(text: str) -> str:
    """``text`` as it can be printed and stored: what is not Unicode (a lone surrogate from a
    file name that is not UTF-8) replaced by ``?``."""
    if text.isascii():
        return text
    return text.encode("utf-8", errors="replace").decode("utf-8")


def plain(value: Any) -> Any:
    """A parsed value (YAML, SQLite, JSON) as a JSON-able one: dates as ISO strings, bytes as
    text, sets as lists, keys as strings, numbers JSON cannot hold (NaN, infinities) as text,
    anything else as its ``str``. Call after :func:`check_tree` (depth is bounded)."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value if abs(value) < 1 << 63 else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, dict):
        return {str(plain(k)): plain(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        return [plain(v) for v in sorted(value, key=repr)]
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return str(value)


def text(value: Any) -> str | None:
    """A source value where a text is expected: None stays None, bytes are decoded (invalid
    UTF-8 replaced), a number or anything else is its ``str``."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", errors="replace")
    return str(plain(value))


def texts(value: Any) -> list[str]:
    """A source value where a list of texts is expected: a list's items as texts (empty ones
    dropped), one text as a list of one, nothing as an empty list."""
    if value is None or value == "":
        return []
    items = value if isinstance(value, list | tuple) else [value]
    out = [text(v) for v in items if v is not None]
    return [t for t in out if t]


# ---------------------------------------------------------------------- JSON
def check_values(data: str | bytes, what: str) -> None:
    """Raise :class:`SourceError` when the JSON text ``data`` (a document, or JSON lines)
    holds more than :data:`MAX_JSON_VALUES` objects, arrays and strings; counted before it is
    parsed, in C (an overcount: brackets inside strings count too)."""
    if len(data) <= MiB:
        return
    if isinstance(data, str):
        values = data.count("{") + data.count("[") + data.count('"') // 2
    else:
        values = data.count(b"{") + data.count(b"[") + data.count(b'"') // 2
    if values > MAX_JSON_VALUES:
        raise SourceError(f"{what}: more than {MAX_JSON_VALUES} JSON objects, arrays and strings")


def _number(raw: str) -> float | str:
    """A JSON number with a fraction or exponent: a float, or its text when no float holds it
    (``1e400``)."""
    value = float(raw)
    return value if math.isfinite(value) else raw


def load_json(data: str | bytes, what: str) -> Any:
    """The JSON value of ``data``. Raises ``json.JSONDecodeError`` for invalid JSON (the
    caller says where) and :class:`SourceError` for a number too long to read or a value
    nested deeper than :data:`MAX_DEPTH` levels (a long text is left to the item that holds
    it: it skips that item alone)."""
    check_values(data, what)
    try:
        value = json.loads(data, parse_float=_number, parse_constant=str)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise SourceError(f"{what}: a value nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # a number with more digits than Python converts
        first = str(exc).split(":", 1)[0]
        raise SourceError(f"{what}: a number too long to read ({first})") from None
    check_tree(value, what, max_text=None)
    return value


def check_count(n: int) -> None:
    """Raise :class:`SourceError` once a source has yielded more than :data:`MAX_ITEMS` items
    and skipped units (call as they are made: the check bounds the memory they take)."""
    if n > MAX_ITEMS:
        raise SourceError(f"more than {MAX_ITEMS} items (import the source in parts)")


# ---------------------------------------------------------------------- archives
def read_capped(fh: IO[bytes], limit: int, what: str) -> bytes:
    """At most ``limit`` bytes of ``fh``; :class:`SourceError` when there are more."""
    chunks, size = [], 0
    while size <= limit and (data := fh.read(min(CHUNK, limit + 1 - size))):
        chunks.append(data)
        size += len(data)
    if size > limit:
        raise SourceError(f"{what}: larger than {size_text(limit)}")
    return b"".join(chunks)


def _check_ratio(inflated: int, compressed: int, what: str) -> None:
    if inflated > RATIO_FREE_BYTES and inflated > MAX_RATIO * max(compressed, 1):
        raise SourceError(
            f"{what}: inflates more than {MAX_RATIO} times its compressed size "
            f"({size_text(compressed)} to more than {size_text(inflated)}): an archive bomb?"
        )


def gunzip(data: bytes, what: str, limit: int | None = None) -> bytes:
    """A gzip stream (one or more members) inflated, at most ``limit`` bytes (default
    :data:`MAX_INFLATED_BYTES`) and at most :data:`MAX_RATIO` times ``len(data)``;
    :class:`SourceError` past either, or for a damaged stream. Inflates a MiB at a time
    (``max_length``), never the whole stream at once."""
    limit = MAX_INFLATED_BYTES if limit is None else limit
    out: list[bytes] = []
    size = members = 0
    rest = data
    while rest:
        members += 1
        if members > MAX_MEMBERS:  # a stream of many tiny members: a loop, not a file
            raise SourceError(f"{what}: a gzip stream of more than {MAX_MEMBERS} members")
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        pending = rest
        while True:
            try:
                chunk = d.decompress(pending, CHUNK)
            except zlib.error as exc:
                raise SourceError(f"{what}: a damaged gzip stream ({exc})") from None
            size += len(chunk)
            if size > limit:
                raise SourceError(f"{what}: inflates to more than {size_text(limit)}")
            _check_ratio(size, len(data), what)
            out.append(chunk)
            pending = d.unconsumed_tail
            if d.eof or (not pending and not chunk):
                break
        if not d.eof:
            raise SourceError(f"{what}: a damaged gzip stream (it ends before its end)")
        rest = d.unused_data
        if rest and rest[:2] != b"\x1f\x8b":
            break  # trailing bytes after the last member, as gzip itself ignores
    return b"".join(out)


def zip_members(fh: IO[bytes], what: str) -> int:
    """The number of entries a zip's end record declares (read before the archive is opened,
    so a zip of millions of entries is refused before its directory is read); -1 when the
    end record is not found (zipfile then says the archive is damaged)."""
    fh.seek(0, 2)
    end = fh.tell()
    start = max(0, end - (1 << 16) - 22)
    fh.seek(start)
    tail = fh.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        return -1
    total = struct.unpack("<H", tail[at + 10 : at + 12])[0]
    if total == 0xFFFF:  # zip64: the count is in the zip64 end record
        loc = tail.rfind(b"PK\x06\x06", 0, at)
        if loc >= 0 and len(tail) - loc >= 40:
            total = struct.unpack("<Q", tail[loc + 32 : loc + 40])[0]
    if total > MAX_MEMBERS:
        raise SourceError(f"{what}: a zip of {total} entries (at most {MAX_MEMBERS} are read)")
    return total


def read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, what: str) -> bytes:
    """One member of an open zip, inflated within the limits: its declared size and ratio are
    checked before anything is inflated, and the inflated bytes are counted as they come (a
    member whose header lies is cut off at the limit)."""
    name = f"{what}: {info.filename}"
    if info.flag_bits & 0x1:
        raise SourceError(f"{name} is encrypted (a password-protected zip cannot be read)")
    if info.file_size > MAX_INFLATED_BYTES:
        raise SourceError(
            f"{name} inflates to {size_text(info.file_size)} "
            f"(at most {size_text(MAX_INFLATED_BYTES)})"
        )
    _check_ratio(info.file_size, info.compress_size, name)
    limit = min(MAX_INFLATED_BYTES, max(info.file_size, RATIO_FREE_BYTES))
    try:
        with zf.open(info) as fh:
            return read_capped(fh, limit, name)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:
        raise SourceError(f"{name}: a damaged or unsupported member ({exc})") from None
    except RuntimeError as exc:  # zipfile's "encrypted, password required"
        raise SourceError(f"{name}: {exc}") from None


__all__ = [
    "MAX_DEPTH", "MAX_DOCUMENT_BYTES", "MAX_FIELD_CHARS", "MAX_INFLATED_BYTES", "MAX_ITEMS",
    "MAX_JSON_VALUES", "MAX_MEMBERS", "MAX_RATIO", "SourceError", "check_count", "check_tree",
    "check_values", "gunzip", "load_json", "plain", "printable", "read_capped", "read_member",
    "size_text", "text", "texts", "zip_members",
]  # fmt: skip
