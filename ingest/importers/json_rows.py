"""The rows of a knowledge-graph file (``memory.jsonl`` of the official memory server, the
lessons fork's ``lesson.json``): JSON lines, or one JSON array (or object), read within the
importers' bounds (:mod:`.bounded`: its size, the nesting and numbers of its values), each
failure one :class:`~retrieval.errors.InvalidInput`. ``graph.compat`` imports the rows."""

from __future__ import annotations

import json
from pathlib import Path

from retrieval.errors import InvalidInput

from .bounded import MAX_DOCUMENT_BYTES, SourceError, check_count, check_values, load_json
from .source_files import read_bytes, root_of


def read_rows(path: str | Path) -> list[dict]:
    """The JSON objects of a file: JSON lines, or a single JSON array (or object)."""
    p = Path(path)
    try:
        data, _ = read_bytes(p, root_of(p), MAX_DOCUMENT_BYTES)
        text = data.decode("utf-8-sig")
    except SourceError as exc:
        raise InvalidInput(f"cannot read {p}: {exc}", path=str(p)) from None
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"cannot read {p}: not UTF-8 text ({exc.reason})", path=str(p)) from None
    try:
        return _rows(p, text)
    except SourceError as exc:
        raise InvalidInput(f"{p}: {exc}", path=str(p)) from None


def _rows(p: Path, text: str) -> list[dict]:
    check_values(text, "the file")
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            doc = load_json(text, "the file")
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{p} is not valid JSON: {exc}", path=str(p)) from None
        rows = doc
    else:
        rows = []
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(load_json(line, f"line {i}"))
            except json.JSONDecodeError as exc:
                if i == 1 and stripped.startswith("{"):  # one pretty-printed object
                    try:
                        rows = [load_json(text, "the file")]
                        break
                    except json.JSONDecodeError:
                        pass
                raise InvalidInput(
                    f"{p} line {i} is not valid JSON: {exc.msg}", path=str(p), line=i
                ) from None
    check_count(len(rows))
    bad = [i for i, r in enumerate(rows) if not isinstance(r, dict)]
    if bad:
        raise InvalidInput(f"{p}: item {bad[0]} is not a JSON object", path=str(p))
    return rows
