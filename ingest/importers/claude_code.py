"""Claude Code's own memory: ``CLAUDE.md`` files and the per-project auto-memory folder.

Where Claude Code keeps them (its memory documentation, "How Claude remembers your project"):

* instructions: ``CLAUDE.md`` or ``.claude/CLAUDE.md`` in a project (and in its subfolders),
  ``CLAUDE.local.md`` (personal, git-ignored), rules in ``.claude/rules/*.md`` (optionally with
  ``paths:`` front matter), the user's ``~/.claude/CLAUDE.md`` and ``~/.claude/rules/*.md``,
  and the managed policy file (``/etc/claude-code/CLAUDE.md`` on Linux,
  ``/Library/Application Support/ClaudeCode/CLAUDE.md`` on macOS);
* auto memory: ``~/.claude/projects/<project>/memory/``, the project folder named after its
  path (``/`` as ``-``): ``MEMORY.md``, an index of one-line pointers grouped under headings,
  and topic files, each with front matter ``name``, ``description`` and ``type`` (``user``,
  ``feedback``, ``project`` or ``reference``).

PATH may be a project folder, ``~/.claude`` (the user's files and every project's auto memory),
one ``memory/`` folder, or one file. An instruction file becomes one memory per section (a
heading and its text); a topic file one memory (its name, description and type kept);
``MEMORY.md`` the lines that are not pointers to a topic file. ``@path`` imports are kept as
written, not followed.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from pydantic import ValidationError

from .bounded import SourceError, check_count
from .items import MemoryItem, Read, invalid, kept, unreadable
from .markdown import FrontMatterError, sections, split_front_matter
from .source_files import read_text, root_of, shown, walk
from .sqlite_source import describe

SOURCE = "claude-code"
EXPECTED = (
    "Claude Code memory: a project folder with CLAUDE.md or .claude/, ~/.claude, "
    "a memory/ folder (MEMORY.md and topic files) or one of those .md files"
)
SKIP_DIRS = {"node_modules", "vendor", "dist", "build", "target", "venv", "__pycache__"}
AUTO_TYPES = {"user", "feedback", "project", "reference"}
POINTER = re.compile(r"^\s*[-*]\s+\[[^\]]*\]\(([^)]+\.md)\)")
MAX_DEPTH = 6


def display(path: Path) -> str:
    """A path as a stable id part: ``~/…`` under the home folder, else absolute."""
    p = path.resolve()
    home = Path.home().resolve()
    return f"~/{p.relative_to(home).as_posix()}" if p.is_relative_to(home) else p.as_posix()


def _is_user_home(folder: Path) -> bool:
    """``folder`` is a ``~/.claude`` (it holds the per-project folders)."""
    return folder.name == ".claude" and (folder / "projects").is_dir()


def _level(path: Path) -> str:
    if path.parent.name == "memory":
        return "auto-memory"
    if path.parent.name == "rules" and path.parent.parent.name == ".claude":
        return "user-rules" if _is_user_home(path.parent.parent) else "rules"
    if path.name == "CLAUDE.local.md":
        return "local"
    if _is_user_home(path.parent):
        return "user"
    if str(path).startswith(("/etc/claude-code", "/Library/Application Support/ClaudeCode")):
        return "managed"
    return "project"


def _walk(root: Path, names: set[str]) -> list[Path]:
    """Files named ``names`` under ``root`` (hidden folders and build output skipped; links
    out of the folder are left to :func:`read`, which reports them)."""
    found, _ = walk(
        root_of(root),
        want_file=lambda n: n in names,
        want_dir=lambda n, _depth: not n.startswith(".") and n not in SKIP_DIRS,
        max_depth=MAX_DEPTH,
        links=True,
    )
    return [root / f.relative_to(root_of(root)) for f in found]


def _rules(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    real = root_of(folder)
    found, _ = walk(real, want_file=lambda n: n.endswith(".md"), want_dir=lambda n, _d: True,
                    links=True)  # fmt: skip
    return sorted(folder / f.relative_to(real) for f in found)


def _memory_dirs(claude_home: Path) -> list[Path]:
    projects = claude_home / "projects"
    if not projects.is_dir():
        return []
    return sorted(p / "memory" for p in projects.iterdir() if (p / "memory").is_dir())


def files_of(path: Path) -> list[Path]:
    """The memory files PATH holds (see the module docstring)."""
    if path.is_file():
        return [path] if path.suffix == ".md" else []
    if not path.is_dir():
        return []
    if path.name == "memory" or (path / "MEMORY.md").is_file():
        return sorted(path.glob("*.md"))
    if (path / "memory").is_dir():  # a ~/.claude/projects/<project> folder
        return sorted((path / "memory").glob("*.md"))
    if (path / "projects").is_dir() and (
        path.name == ".claude" or (path / "settings.json").exists()
    ):  # ~/.claude
        user = [path / "CLAUDE.md"] if (path / "CLAUDE.md").is_file() else []
        return (
            user
            + _rules(path / "rules")
            + [f for d in _memory_dirs(path) for f in sorted(d.glob("*.md"))]
        )
    found = _walk(path, {"CLAUDE.md", "CLAUDE.local.md"})
    inner = path / ".claude" / "CLAUDE.md"  # hidden folders are not walked
    return found + ([inner] if inner.is_file() else []) + _rules(path / ".claude" / "rules")


def read(path: Path) -> Read:
    files = files_of(path)
    if not files:
        raise unreadable(SOURCE, path, EXPECTED, describe(path))
    root = root_of(path)  # nothing outside PATH is read (a link out of it is reported)
    out = Read()
    for f in files:
        try:
            text, when = read_text(f, root)
            meta, body = split_front_matter(text, lenient=True)  # written by a model
        except (SourceError, FrontMatterError) as exc:
            out.skipped.append((shown(f), str(exc)))
            continue
        level = _level(f)
        try:
            if level == "auto-memory" and f.name != "MEMORY.md":
                item = _topic(f, meta, body, when)
                if item is None:
                    out.skipped.append((display(f), "empty"))
                else:
                    out.items.append(item)
            else:
                out.items += _sections(f, meta, body, level, when)
        except ValidationError as exc:
            out.skipped.append((display(f), invalid(exc)))
        check_count(len(out.items) + len(out.skipped))
    return out


def _project(f: Path) -> str | None:
    """The auto-memory project folder's name (the project path with ``/`` as ``-``)."""
    return f.parent.parent.name if f.parent.name == "memory" else None


def _topic(f: Path, meta: dict, body: str, when: datetime) -> MemoryItem | None:
    text = body.strip()
    if not text:
        return None
    kind = str(meta.get("type") or "topic")
    return MemoryItem(
        sourceId=display(f), content=text, title=str(meta.get("name") or f.stem),
        category=kind, author="claude-code", project=_project(f), createdAt=when,
        updatedAt=when,
        fields=kept(**{**{k: v for k, v in meta.items() if k not in ("name", "type")},
                       "file": display(f), "level": "auto-memory"}),
    )  # fmt: skip


def _beside(f: Path, name: str) -> bool:
    """``name`` (a MEMORY.md pointer) is a topic file beside ``f``."""
    try:
        return (f.parent / name).is_file()
    except (OSError, ValueError):  # a name the system cannot hold (a NUL byte)
        return False


def _sections(f: Path, meta: dict, body: str, level: str, when: datetime) -> list[MemoryItem]:
    """One memory per section of an instruction file (or of MEMORY.md, without the lines that
    only point to a topic file beside it)."""
    if f.name == "MEMORY.md":
        body = "\n".join(
            ln for ln in body.split("\n")
            if not ((m := POINTER.match(ln)) and _beside(f, m.group(1)))
        )  # fmt: skip
    kind = {"auto-memory": "memory-index", "local": "local-instructions", "rules": "rules",
            "user-rules": "rules"}.get(level, "instructions")  # fmt: skip
    out = []
    seen: dict[str, int] = {}
    for s in sections(body):
        if s.path and not any(ln.strip() for ln in s.lines[1:]):
            continue  # a heading with nothing under it (its subsections carry its name)
        key = s.title or "(top)"
        seen[key] = seen.get(key, 0) + 1
        sid = f"{display(f)}#{key[:300]}" + (f" ({seen[key]})" if seen[key] > 1 else "")
        out.append(MemoryItem(
            sourceId=sid, content=s.text, title=s.title or f.name, category=kind,
            author="claude-code" if level == "auto-memory" else None, project=_project(f),
            createdAt=when, updatedAt=when,
            fields=kept(**{**meta, "file": display(f), "level": level, "section": s.title}),
        ))  # fmt: skip
    return out
