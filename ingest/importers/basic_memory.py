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
metadata. Writing (:func:`note_files`): the same layout back, one note per entity, a note that
came from basic-memory at its own path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .bounded import SourceError, check_count
from .items import (
    EntityItem,
    MemoryItem,
    Read,
    RelationItem,
    invalid,
    kept,
    parse_time,
    unreadable,
)
from .markdown import FrontMatterError, dump_front_matter, outside_fences, split_front_matter
from .source_files import read_text, root_of, walk
from .sqlite_source import describe

SOURCE = "basic-memory"
EXPECTED = "a basic-memory folder of Markdown notes (~/basic-memory), or one note (.md)"
STANDARD = {"title", "type", "tags", "permalink", "created", "modified"}
ITEM = re.compile(r"^\s*[-*+]\s+(.*)$")
OBSERVATION = re.compile(r"^\[([^\[\]()]+)\]\s+(.+)$")
RELATION = re.compile(
    r"""^(?:"([^"]+)"|'([^']+)'|([^\s\[\]"']+))\s+\[\[([^\]]+)\]\](?:\s*\((.*)\))?\s*$"""
)
TAG = re.compile(r"(?:^|\s)#([\w/-]+)")
CHECKBOX = {"", "x", "X", "-"}
STRUCTURE = re.compile(r"^\s*#{1,6}\s+(Observations|Relations)\s*$")
MAX_NOTE_PARTS = 10_000  # observations and relations of one note


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "note"


SLUG_CHARS = 120  # of a file name an export makes from a title (a name of any length fits)


def file_slug(text: str) -> str:
    """:func:`slug`, at most :data:`SLUG_CHARS` characters: a note's file name in an export."""
    return slug(text)[:SLUG_CHARS].strip("-") or "note"


def wikilinks(line: str) -> list[str]:
    """The targets of the ``[[…]]`` links in ``line`` (what ``\\[\\[([^\\]]+)\\]\\]`` finds),
    in time linear in the line (the pattern backtracks on a line of ``[``)."""
    out: list[str] = []
    pos = 0
    while (start := line.find("[[", pos)) != -1:
        end = line.find("]", start + 2)
        if end == -1:
            break
        if end > start + 2 and line.startswith("]]", end):
            out.append(line[start + 2 : end])
            pos = end + 2
        else:
            pos = end + 1
    return out


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
            note.relations += [("links_to", _target(t)) for t in wikilinks(line)]
        prose.append(line)
    note.prose = _prose(prose, title)
    parts = len(note.observations) + len(dict.fromkeys(note.relations))
    if parts > MAX_NOTE_PARTS:
        raise SourceError(
            f"too large (a note of {parts} observations and relations; at most "
            f"{MAX_NOTE_PARTS} are read)"
        )
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
    links = wikilinks(text)
    if links == [text[2:-2]] and text.startswith("[[") and text.endswith("]]"):
        note.relations.append(("links_to", _target(links[0])))
        return True
    if not obs and TAG.search(text) and not links:
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


def _hidden(name: str, depth: int = 0) -> bool:
    return name.startswith(".")


def _notes(path: Path) -> tuple[Path, Path, list[Path], list[tuple[Path, str]]]:
    """(the folder everything read must lie in, the folder paths are relative to, the notes,
    what was not read and why) of PATH: a folder of notes, or one note."""
    root = root_of(path)
    if root.is_dir():
        files, skipped = walk(
            root,
            want_file=lambda n: n.endswith(".md") and not _hidden(n),
            want_dir=lambda n, _depth: not _hidden(n),
        )
        return root, root, files, skipped
    if root.is_file() and path.suffix == ".md":
        return root, root.parent, [root], []
    raise unreadable(SOURCE, path, EXPECTED, describe(path))


def read(path: Path) -> Read:
    root, base, files, not_read = _notes(path)
    if not files and not not_read:
        raise unreadable(SOURCE, path, EXPECTED, "a folder without Markdown notes")
    out = Read()
    out.skipped += [(f"note:{p.relative_to(base).as_posix()}", why) for p, why in not_read]
    notes: list[Note] = []
    parts = 0
    for f in files:
        rel = f.relative_to(base).as_posix()
        try:
            text, mtime = read_text(f, root)
            notes.append(parse_note(text, rel, mtime))
        except (SourceError, FrontMatterError) as exc:
            out.skipped.append((f"note:{rel}", str(exc)))
            continue
        parts += 1 + len(notes[-1].observations) + len(notes[-1].relations)
        check_count(parts + len(out.skipped))
    names = {}
    for n in notes:  # a link names a note by title or permalink
        for key in (n.title, n.permalink):
            names.setdefault(key, n.title)
            names.setdefault(key.lower(), n.title)
    for n in notes:
        items, skipped = _items(n, names)
        out.items += items
        out.skipped += skipped
    return out


def _items(n: Note, names: dict[str, str]) -> tuple[list, list[tuple[str, str]]]:
    """(the items of note ``n``, the ones that are not valid items with the reason): a note
    whose entity is not valid is skipped whole."""
    created = parse_time(n.meta.get("created")) or n.mtime
    updated = parse_time(n.meta.get("modified")) or n.mtime
    custom = {k: v for k, v in n.meta.items() if k not in STANDARD}
    common = dict(createdAt=created, updatedAt=updated)
    fields = kept(permalink=n.permalink, path=n.path, tags=_tags(n.meta.get("tags")), **custom)
    skipped: list[tuple[str, str]] = []
    try:
        out: list = [
            EntityItem(sourceId=f"note:{n.permalink}", name=n.title,
                       entityType=str(n.meta.get("type") or "note"),
                       observations=list(dict.fromkeys(n.observations)), fields=fields, **common)
        ]  # fmt: skip
    except ValidationError as exc:
        return [], [(f"note:{n.path}", invalid(exc))]
    for kind, target in dict.fromkeys(n.relations):
        to = names.get(target) or names.get(target.lower()) or target
        if to == n.title and kind == "links_to":
            continue
        sid = f"relation:{n.permalink}:{kind}:{to}"
        try:
            out.append(RelationItem(sourceId=sid, **{"from": n.title}, to=to, relationType=kind,
                                    **common))  # fmt: skip
        except ValidationError as exc:
            skipped.append((sid[:200], invalid(exc)))
    if n.prose:
        try:
            out.append(MemoryItem(
                sourceId=f"note:{n.permalink}:text", content=n.prose, title=n.title,
                category=str(n.meta.get("type") or "note"), tags=_tags(n.meta.get("tags")),
                fields={**fields, "entity": n.title}, **common,
            ))  # fmt: skip
        except ValidationError as exc:
            skipped.append((f"note:{n.path}:text", invalid(exc)))
    return out, skipped


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
    path: str = ""  # the note's own file (``notes/x.md``) when it came from basic-memory
    permalink: str = ""  # and its permalink there


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


def note_files(notes: list[NoteOut]) -> dict[str, str]:
    """{path under the folder: text} of ``notes``: a note that came from basic-memory at its
    own path (and permalink), any other at ``<folder>/<slug of title>.md`` (a path taken twice
    gets a numbered file)."""
    out: dict[str, str] = {}
    own = {n.path for n in notes if n.path}
    for note in notes:
        if note.path and note.path not in out:
            path = note.path
            permalink = note.permalink or default_permalink(path)
        else:
            base = "/".join(p for p in (note.folder, file_slug(note.title)) if p)
            permalink, n = base, 1
            while f"{permalink}.md" in out or f"{permalink}.md" in own:
                n += 1
                permalink = f"{base}-{n}"
            path = f"{permalink}.md"
        out[path] = render(note, permalink)
    return out
