"""What the session indexer stores (``server/service/indexing/sessions.py``): the records of an
exchange's units and their ids, and the progress row kept per transcript.

An exchange's parts are named by its bucket, its session and the key of its first turn, so a
part keeps its id as the exchange grows and after a transcript is read again. An exchange
that starts with a prompt is keyed by the prompt's position among the session's prompts
(``prompt:<n>``), which a client's prompt hook knows too (the daemon reads the transcript up
to it first). So the hook stores the user's part the moment the prompt is sent, before the
client writes it to its transcript (``SessionState.early``), and the indexer completes that
very record when it reads the prompt and its answer: no duplicate, the same id. A prompt the
transcript never holds (another hook refused it) gives its position, and its record, to the
next prompt read.

A tool call that names a file made to hold secrets keeps its name and not its output
(:func:`without_secret_output`).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from datetime import UTC, datetime

from pydantic import BaseModel, Field

from ingest.sessions import exchanges
from ingest.sessions.transcript_base import NAMESPACE, Turn
from retrieval.records import Kind, Record, Scope
from server.service.core.identity import Identity
from server.service.trust.secret_scan.secret_files import secret_bearing

CATEGORY = "turn"
ARG_WORDS = re.compile(r"[\s=,()'\"`;|&<>]+")  # what separates a call's words (a class: linear)
MAX_OPEN_CALLS = 2 * exchanges.MAX_TOOL_CALLS  # tool calls of the open exchange kept as text
MAX_EARLY = 8  # prompts stored early and not read yet, per session


class OpenTurn(BaseModel):
    role: str
    text: str
    index: int


class EarlyPrompt(BaseModel):
    """A prompt the prompt hook stored before the transcript held it."""

    hash: str  # prompt_hash of its text
    ids: list[str]  # its parts


class SessionState(BaseModel):
    turns: int = 0  # turns read so far (the next turn's position)
    open: list[OpenTurn] = Field(default_factory=list)  # the open exchange's turns
    open_ids: list[str] = Field(default_factory=list)  # its stored parts
    open_calls: int = 0  # tool calls of the open exchange beyond the kept ones
    open_meta: dict = Field(default_factory=dict)  # its first turn's key, timestamp, cwd, …
    prompts: int = 0  # prompts read so far (the next one's exchange: prompt:<prompts>)
    early: dict[str, EarlyPrompt] = Field(default_factory=dict)  # stored by the prompt hook


class FileProgress(BaseModel):
    offset: int = 0
    line_hash: str = ""
    line_len: int = 0
    format: str | None = None
    sessions: dict[str, SessionState] = Field(default_factory=dict)
    pending: dict = Field(default_factory=dict)  # tool calls waiting at offset (read_turns)
    partial: int = 0  # bytes after offset of an unfinished line, known to hold no newline
    updated_at: str | None = None


def turn_date(ts: str | None) -> tuple[datetime | None, str]:
    """ISO 8601 -> (UTC datetime, '8 May 2023 13:56'); (None, '') when absent or unreadable."""
    if not ts:
        return None, ""
    try:
        dt = datetime.fromisoformat(str(ts).replace("Z", "+00:00"))
        dt = dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
    except (ValueError, OverflowError):  # not a date, or off the calendar in UTC
        return None, ""
    return dt, f"{dt.day} {dt:%B %Y %H:%M}"


def unit_records(who: Identity, transcript: str, session: str, units: list[exchanges.Unit],
                 meta: dict, ids: list[str]) -> list[Record]:  # fmt: skip
    """The stored records of one exchange's ``units`` (module docstring): ``meta`` holds its
    first turn's ``timestamp``, ``cwd``, ``gitBranch`` and ``parentSession`` when known."""
    when, date = turn_date(meta.get("timestamp"))
    stamp = {"created_at": when, "updated_at": when} if when else {}
    out = []
    for rid, u in zip(ids, units, strict=True):
        m = {"session": session, "role": "exchange", "turn": u.first, "last_turn": u.last,
             "part": u.part, "parts": u.parts, "transcript": transcript, "source": "transcript"}  # fmt: skip
        if meta.get("timestamp"):
            m["timestamp"] = when.isoformat() if when else str(meta["timestamp"])
        for name in ("parentSession", "gitBranch", "cwd"):
            if meta.get(name):
                m[name] = meta[name]
        context = f"[{date}]" if date else ""
        if u.part and u.head:
            context = f"{context}\nPrompt: {u.head}".strip()
        out.append(Record(
            id=rid, kind=Kind.turn, project_id=who.project_id, agent_id=who.agent_id,
            scope=Scope.private, category=CATEGORY, content=u.text, context=context,
            metadata=m, **stamp,
        ))  # fmt: skip
    return out


def part_id(bucket: str, session: str, first_key: str, part: int) -> str:
    """A stored part's id: the bucket it is stored in (two agents indexing the same transcript
    store their own copies), its session, the key of its exchange's first turn, its number."""
    return str(uuid.uuid5(NAMESPACE, f"{bucket}\x00{session}\x00{first_key}\x00part{part}"))


def first_turn_meta(t: Turn, key: str | None = None) -> dict:
    """What an exchange keeps of its first turn: its ``key`` (``key``: a prompt's, see
    :func:`read_prompt`, with the prompt's hash; else the turn's own), timestamp, cwd, git
    branch, parent session."""
    prompt = prompt_hash(t.text) if key else None
    return {k: v for k, v in (("key", key or t.key), ("hash", prompt), ("timestamp", t.timestamp),
                              ("cwd", t.cwd), ("gitBranch", t.git_branch),
                              ("parentSession", t.parent_session)) if v}  # fmt: skip


def prompt_hash(text: str) -> str:
    """A prompt's text, as the transcript reader keeps it (clipped), by its words."""
    return hashlib.sha256(" ".join(text.split()).encode()).hexdigest()[:16]


def _position(key: str) -> int:
    return int(key.rsplit(":", 1)[1])


def read_prompt(state: SessionState, text: str) -> tuple[str, list[str]]:
    """The prompt ``text`` was read: (the key of the exchange it starts, ids to delete). The
    record the prompt hook stored for its position becomes its exchange's (the same ids; the
    parts the exchange no longer has are removed); one stored for it at a later position, and
    those of positions now passed, were never written."""
    key = f"prompt:{state.prompts}"
    state.prompts += 1
    mine = state.early.pop(key, None)
    if mine is not None:
        state.open_ids = mine.ids
    h, gone = prompt_hash(text), []
    for k in [k for k, e in state.early.items() if e.hash == h or _position(k) < state.prompts]:
        gone += state.early.pop(k).ids
    return key, gone


def holds_prompt(state: SessionState, text: str, sent_at: float, within: float) -> bool:
    """Whether the exchange open in ``state`` starts with the prompt ``text`` that a client sent
    at ``sent_at`` (its entry stamped within ``within`` seconds), or the prompt hook stored it
    already: the transcript, or an earlier run, holds it."""
    h = prompt_hash(text)
    if any(e.hash == h for e in state.early.values()):
        return True
    m = state.open_meta
    if not state.open or m.get("key") != f"prompt:{state.prompts - 1}" or m.get("hash") != h:
        return False
    when, _ = turn_date(m.get("timestamp"))
    # an entry without a time (a client that writes none) is that prompt: nothing tells them
    # apart, and a second copy would stand until the next prompt is read
    return when is None or abs(when.timestamp() - sent_at) <= within


def early_key(state: SessionState, text: str, ids_of) -> tuple[str, list[str], list[str]]:
    """Register the prompt ``text`` the hook stores before it is read: (its key, its part ids
    from ``ids_of(key)``, ids to delete). Its position is the next prompt's, or the next one
    free when an earlier prompt, never written, holds that (see :func:`read_prompt`); at most
    :data:`MAX_EARLY` are kept, the oldest go."""
    n = state.prompts
    while f"prompt:{n}" in state.early:
        n += 1
    key = f"prompt:{n}"
    ids = ids_of(key)
    state.early[key] = EarlyPrompt(hash=prompt_hash(text), ids=ids)
    gone: list[str] = []
    while len(state.early) > MAX_EARLY:
        gone += state.early.pop(next(iter(state.early))).ids
    return key, ids, gone


def keep_turn(state: SessionState, turn: OpenTurn) -> None:
    """Add ``turn`` to the open exchange; beyond ``MAX_OPEN_CALLS`` tool calls only failed ones
    are kept as text (the others are counted: the summary shows at most a few)."""
    if turn.role == "tool":
        calls = [t for t in state.open if t.role == "tool"]
        if len(calls) >= MAX_OPEN_CALLS and " → error" not in turn.text:
            state.open_calls += 1
            return
        if len(calls) >= 4 * MAX_OPEN_CALLS:
            state.open_calls += 1
            return
    state.open.append(turn)


def without_secret_output(turn: Turn) -> str:
    """A turn's text; a tool call that names a file made to hold secrets (``Read(file_path=
    .env)``, ``cat .env``, ``grep KEY .env``; ``trust.secret_files.secret_bearing``) without
    its output (the first lines the indexer keeps of it): the file's name, never its lines."""
    if turn.role != "tool":
        return turn.text
    head, arrow, _output = turn.text.partition(" → ")
    if arrow and any(secret_bearing(w) for w in ARG_WORDS.split(head) if w):
        return f"{head} → (output not kept: the call names a file that holds secrets)"
    return turn.text
