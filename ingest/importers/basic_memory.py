"""basic-memory: a folder of Markdown notes (``~/basic-memory`` by default), both directions.

The format (basic-memory's ``docs/NOTE-FORMAT.md``): YAML front matter (``title``, default the
file name; ``type``, default ``note``; ``tags``, a list or a comma-separated string;
``permalink``; ``created``/``modified``, default the file's time; any other key is custom
metadata), then a body in which

* an observation is a list item ``- [category] content #tag1 #tag2 (context)`` (not a checkbox
  ``[ ]``/``[x]``/``[-]``, not a link ``[text](url)``); a list item with ``#tags`` and no
  category is an observation of category ``Note``;
* a relation is a list item ``- relation_type [[Target]] (context)`` (a quoted type may hold
  spaces); a bare ``- [[Target]]``, a list item with a link in its prose and a ``[[link]]``
  anywhere in the text are ``links_to`` relations. A target is a note's title or permalink, and
  may not exist yet (a forward reference).

Reading: each note is an entity (its title and type) whose observations are its observation
lines as written (``[category] content #tags (context)``); its relations are relations; its
remaining prose, if any, is a memory carrying the note's tags, permalink, dates and custom
metadata. Writing (:func:`write_notes`): the same layout back, one note per entity.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .items import EntityItem, MemoryItem, Read, RelationItem, kept, parse_time, unreadable
from .markdown import FrontMatterError, dump_front_matter, outside_fences, split_front_matter
from .sqlite_source import describe

SOURCE = "basic-memory"
EXPECTED = "a basic-memory folder of Markdown notes (~/basic-memory), or one note (.md)"
STANDARD = {"title", "type", "tags", "permalink", "created", "modified"}
ITEM = re.compile(r"^\s*[-*+]\s+(.*)$")
OBSERVATION = re.compile(r"^\[([^\[\]()]+)\]\s+(.+)$")
RELATION = re.compile(
    r"""^(?:"([^"]+)"|'([^']+)'|([^\s\[\]"']+))\s+\[\[([^\]]+)\]\](?:\s*\((.*)\))?\s*$"""
)
WIKILINK = re.compile(r"\[\[([^\]]+)\]\]")
TAG = re.compile(r"(?:^|\s)#([\w/-]+)")
CHECKBOX = {"", "x", "X", "-"}
STRUCTURE = re.compile(r"^\s*#{1,6}\s+(Observations|Relations)\s*$")


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "note"


def _target(link: str) -> str:
    return link.split("|", 1)[0].strip()


def _tags(value: Any) -> list[str]:
    if isinstance(value, str):
        return [t.strip().lstrip("#") for t in value.split(",") if t.strip()]
    if isinstance(value, list):
        return [str(t).strip().lstrip("#") for t in value if str(t).strip()]
    return []


@dataclass
class Note:
    """One note as read: its front matter, observations, relations (type, target) and prose."""

    path: str
    meta: dict[str, Any]
    title: str
    permalink: str
    observations: list[str] = field(default_factory=list)
    relations: list[tuple[str, str]] = field(default_factory=list)
    prose: str = ""
    mtime: datetime | None = None


def parse_note(text: str, rel_path: str, mtime: datetime | None = None) -> Note:
    """A note's parts; raises :class:`FrontMatterError` for broken front matter."""
    meta, body = split_front_matter(text)
    stem = Path(rel_path).stem
    title = str(meta.get("title") or stem)
    permalink = str(meta.get("permalink") or default_permalink(rel_path))
    note = Note(rel_path, meta, title, permalink, mtime=mtime)
    prose: list[str] = []
    for _, line, fenced in outside_fences(body):
        item = None if fenced else ITEM.match(line)
        if item and _list_item(note, item.group(1).strip()):
            continue
        if not fenced:
            note.relations += [("links_to", _target(t)) for t in WIKILINK.findall(line)]
        prose.append(line)
    note.prose = _prose(prose, title)
    return note


def _list_item(note: Note, text: str) -> bool:
    """Record ``text`` (a list item) as an observation or relation; False when it is prose."""
    obs = OBSERVATION.match(text)
    if obs and obs.group(1).strip() not in CHECKBOX and not text.startswith("[["):
        note.observations.append(text)
        return True
    rel = RELATION.match(text)
    if rel:
        kind = rel.group(1) or rel.group(2) or rel.group(3)
        note.relations.append((kind, _target(rel.group(4))))
        return True
    if WIKILINK.fullmatch(text):
        note.relations.append(("links_to", _target(text[2:-2])))
        return True
    if not obs and TAG.search(text) and not WIKILINK.search(text):
        note.observations.append(f"[Note] {text}")
        return True
    return False


def _prose(lines: list[str], title: str) -> str:
    """The note's text other than observations and relations (and their headings); empty when
    only the title heading is left."""
    kept_lines = [ln for ln in lines if not STRUCTURE.match(ln)]
    text = "\n".join(kept_lines).strip()
    rest = [ln for ln in text.split("\n") if ln.strip() and ln.strip().lstrip("#").strip() != title]
    return text if rest else ""


def default_permalink(rel_path: str) -> str:
    """basic-memory's permalink of a note without one: its path, each part slugged."""
    return "/".join(slug(part) for part in Path(rel_path).with_suffix("").parts)


def _notes(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        found += [Path(dirpath) / f for f in sorted(filenames)
                  if f.endswith(".md") and not f.startswith(".")]  # fmt: skip
    return found


def read(path: Path) -> Read:
    if not (path.is_dir() or (path.is_file() and path.suffix == ".md")):
        raise unreadable(SOURCE, path, EXPECTED, describe(path))
    files = _notes(path)
    if not files:
        raise unreadable(SOURCE, path, EXPECTED, "a folder without Markdown notes")
    base = path if path.is_dir() else path.parent
    out = Read()
    notes: list[Note] = []
    for f in files:
        rel = f.relative_to(base).as_posix()
        try:
            text = f.read_text(encoding="utf-8")
            mtime = datetime.fromtimestamp(f.stat().st_mtime, UTC)
            notes.append(parse_note(text, rel, mtime))
        except (OSError, UnicodeDecodeError) as exc:
            out.skipped.append((f"note:{rel}", f"unreadable ({type(exc).__name__})"))
        except FrontMatterError as exc:
            out.skipped.append((f"note:{rel}", str(exc)))
    names = {}
    for n in notes:  # a link names a note by title or permalink
        for key in (n.title, n.permalink):
            names.setdefault(key, n.title)
            names.setdefault(key.lower(), n.title)
    for n in notes:
        out.items += _items(n, names)
    return out


def _items(n: Note, names: dict[str, str]) -> list:
    created = parse_time(n.meta.get("created")) or n.mtime
    updated = parse_time(n.meta.get("modified")) or n.mtime
    custom = {k: v for k, v in n.meta.items() if k not in STANDARD}
    common = dict(createdAt=created, updatedAt=updated)
    fields = kept(permalink=n.permalink, path=n.path, tags=_tags(n.meta.get("tags")), **custom)
    out: list = [
        EntityItem(sourceId=f"note:{n.permalink}", name=n.title,
                   entityType=str(n.meta.get("type") or "note"),
                   observations=list(dict.fromkeys(n.observations)), fields=fields, **common)
    ]  # fmt: skip
    for kind, target in dict.fromkeys(n.relations):
        to = names.get(target) or names.get(target.lower()) or target
        if to == n.title and kind == "links_to":
            continue
        out.append(RelationItem(sourceId=f"relation:{n.permalink}:{kind}:{to}",
                                **{"from": n.title}, to=to, relationType=kind, **common))  # fmt: skip
    if n.prose:
        out.append(MemoryItem(
            sourceId=f"note:{n.permalink}:text", content=n.prose, title=n.title,
            category=str(n.meta.get("type") or "note"), tags=_tags(n.meta.get("tags")),
            fields={**fields, "entity": n.title}, **common,
        ))  # fmt: skip
    return out


# ---------------------------------------------------------------------- writing
@dataclass
class NoteOut:
    """A note to write: an entity (or a memory) with what belongs in it."""

    title: str
    type: str = "note"
    observations: list[str] = field(default_factory=list)
    relations: list[tuple[str, str]] = field(default_factory=list)  # (type, target title)
    prose: str = ""
    tags: list[str] = field(default_factory=list)
    created: datetime | None = None
    modified: datetime | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    folder: str = ""


def render(note: NoteOut, permalink: str) -> str:
    """A note in basic-memory's format (parsed back by :func:`parse_note` to the same parts)."""
    meta: dict[str, Any] = {"title": note.title, "type": note.type}
    if note.tags:
        meta["tags"] = note.tags
    meta["permalink"] = permalink
    for key, value in (("created", note.created), ("modified", note.modified)):
        if value is not None:
            meta[key] = value.isoformat()
    meta.update({k: v for k, v in note.extra.items() if k not in meta})
    parts = [dump_front_matter(meta), f"# {note.title}\n"]
    prose = note.prose.strip()
    if prose.startswith(f"# {note.title}"):
        prose = prose[len(f"# {note.title}") :].strip()
    if prose:
        parts.append(prose + "\n")
    if note.observations:
        lines = [o if OBSERVATION.match(o) else f"[note] {o}" for o in note.observations]
        parts.append("## Observations\n" + "".join(f"- {o}\n" for o in lines))
    if note.relations:
        rel = [(f'"{k}"' if re.search(r"\s", k) else k, t) for k, t in note.relations]
        parts.append("## Relations\n" + "".join(f"- {k} [[{t}]]\n" for k, t in rel))
    return "\n".join(parts)


def write_notes(folder: Path, notes: list[NoteOut]) -> list[Path]:
    """Write ``notes`` under ``folder`` (one file each, ``<folder>/<slug of title>.md``; a title
    taken twice gets a numbered file); returns the files written."""
    written: list[Path] = []
    taken: set[str] = set()
    for note in notes:
        base = "/".join(p for p in (note.folder, slug(note.title)) if p)
        permalink, n = base, 1
        while permalink in taken:
            n += 1
            permalink = f"{base}-{n}"
        taken.add(permalink)
        target = folder / f"{permalink}.md"
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        tmp.write_text(render(note, permalink), encoding="utf-8")
        os.replace(tmp, target)
        written.append(target)
    return written
