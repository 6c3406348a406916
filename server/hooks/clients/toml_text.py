"""TOML config files edited as text, line by line (the standard library reads TOML but does not
write it), for ``pattern-memory hooks install`` (re-exported by :mod:`.config_files`).

Every line we add ends with :data:`TOML_MARK`, and removing those lines is the whole
uninstall; each edit is checked by parsing the result (``tomllib``), and one that would not
parse as expected is refused with the file untouched.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from retrieval.errors import InvalidInput

TOML_MARK = "# added by pattern-memory hooks install"


def toml_data(text: str, path: Path | str = "the TOML file") -> dict:
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise InvalidInput(
            f"{path} is not valid TOML ({str(exc)[:200]}); not touching it"
        ) from None


def toml_value(value: Any) -> str:
    """A string, bool, int or list of them as TOML (JSON's string escapes are TOML's, with
    ``ensure_ascii=False``: no surrogate pair escapes)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def toml_key(part: str) -> str:
    bare = part and all(c.isascii() and (c.isalnum() or c in "-_") for c in part)
    return part if bare else json.dumps(part, ensure_ascii=False)


def _lookup(data: dict, path: tuple[str, ...]) -> Any:
    for p in path:
        if not isinstance(data, dict) or p not in data:
            return None
        data = data[p]
    return data


def _header_line(line: str) -> str | None:
    """The table name of a ``[a.b]`` header line (comment allowed), else None."""
    s = line.strip()
    if s.startswith("[") and not s.startswith("[["):
        end = s.find("]")
        rest = s[end + 1 :].strip() if end > 0 else "x"
        if not rest or rest.startswith("#"):
            return ".".join(p.strip().strip('"') for p in s[1:end].split("."))
    return None


def toml_add_table(text: str, table: tuple[str, ...], values: dict) -> str:
    """``text`` with a table ``[table]`` of ``values`` appended, each line marked; unchanged when
    the table already exists (the user's, or ours: kept as it is)."""
    data = toml_data(text)
    if _lookup(data, table) is not None:
        return text
    lines = [f"[{'.'.join(toml_key(p) for p in table)}]  {TOML_MARK}"]
    lines += [f"{toml_key(k)} = {toml_value(v)}  {TOML_MARK}" for k, v in values.items()]
    out = _append(text, lines)
    _check(out, table, values, f"cannot add [{'.'.join(table)}] to this TOML file by appending "
           "(is it an inline table?); add it by hand")  # fmt: skip
    return out


def _check(out: str, path: tuple[str, ...], want: Any, message: str) -> None:
    """Refuse an edit whose result does not parse to what we meant."""
    try:
        ok = _lookup(tomllib.loads(out), path) == want
    except (tomllib.TOMLDecodeError, RecursionError):
        ok = False
    if not ok:
        raise InvalidInput(message)


def toml_set(text: str, table: tuple[str, ...], key: str, value: Any) -> str:
    """``text`` with ``key = value`` in ``[table]`` (inserted under the table's header, or a
    new marked table appended); unchanged when it already holds that value. A different value
    the user set is refused (never overwritten)."""
    data = toml_data(text)
    have = _lookup(data, (*table, key))
    if have == value:
        return text
    if have is not None:
        raise InvalidInput(f"{'.'.join((*table, key))} is set to {have!r} in the TOML file; "
                           f"set it to {value!r} by hand")  # fmt: skip
    line = f"{toml_key(key)} = {toml_value(value)}  {TOML_MARK}"
    name = ".".join(table)
    lines = text.splitlines(keepends=True)
    at = next((i for i, ln in enumerate(lines) if _header_line(ln) == name), None)
    if at is None:
        out = _append(text, [f"[{'.'.join(toml_key(p) for p in table)}]  {TOML_MARK}", line])
    else:
        nl = "\r\n" if lines[at].endswith("\r\n") else "\n"
        if not lines[at].endswith("\n"):
            lines[at] += nl
        lines.insert(at + 1, line + nl)
        out = "".join(lines)
    _check(out, (*table, key), value, f"cannot set {name}.{key} in this TOML file; set it by hand")
    return out


def _append(text: str, lines: list[str]) -> str:
    nl = "\r\n" if "\r\n" in text else "\n"
    sep = "" if not text or text.endswith("\n") else nl
    blank = f"{TOML_MARK}{nl}" if text.strip() else ""  # a marked line parts our block
    return text + sep + blank + "".join(ln + nl for ln in lines)


def toml_remove_marked(text: str) -> str:
    """``text`` without every line we added (those ending with :data:`TOML_MARK`)."""
    kept = [ln for ln in text.splitlines(keepends=True) if not ln.rstrip().endswith(TOML_MARK)]
    out = "".join(kept)
    toml_data(out)
    return out


def toml_marked(text: str) -> list[str]:
    """The tables and keys of our marked lines, for ``status``."""
    out = []
    for ln in text.splitlines():
        if ln.rstrip().endswith(TOML_MARK):
            head = _header_line(ln)
            if head is not None:
                out.append(head)
    return out
