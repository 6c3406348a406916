"""Claude Code's transcripts read as turns: the reader the Codex CLI and Copilot CLI readers
extend.

``~/.claude/projects/<folder>/<session>.jsonl`` (a sub-agent's sidechain in
``<session>/subagents/agent-<id>.jsonl``): one JSON object per line; the entries of ``type``
``user`` and ``assistant`` are read (:func:`message_blocks`), every other type is skipped. A
reply is read across entries until something else comes (:class:`ClaudeCodeTurns`); a tool call
waits for its result, at most :data:`MAX_WAITING` at once (the oldest are recorded without it).
"""

from __future__ import annotations

from pathlib import Path

from ingest.sessions.transcript_base import (
    COMPACT_PREFIX,
    KEY_ARGS,
    Reply,
    Turn,
    clip,
    result_text,
    str_field,
    tool_turn_text,
    waiting_since,
)

ABANDONED_KEPT = 32  # given-up calls remembered, so a late result still names its tool
MAX_WAITING = 256  # calls waiting for their results; beyond, the oldest is given up
_ENTRY_FIELDS = ("sessionId", "isSidechain", "agentId", "timestamp", "cwd", "gitBranch", "_at")


def small_args(name: str, args: object) -> dict:
    """The arguments :func:`~ingest.sessions.transcript_base.key_args` shows, as short strings
    (a waiting call is kept in the progress row: a Write's whole content must not be)."""
    if not isinstance(args, dict):
        return {}
    keys = (
        KEY_ARGS.get(name) or [k for k, v in args.items() if isinstance(v, str | int | float)][:2]
    )
    out = {}
    for k in keys:
        v = args.get(k)
        if v is not None and v != "":
            out[k] = " ".join(str(v).split())[:201]  # key_args clips at 200 and marks the cut
    return out


def message_blocks(e: dict) -> tuple[str | None, list]:
    """(``user`` or ``assistant``, its content blocks) of a Claude Code entry; no blocks for any
    other entry (a meta line, a summary, a message without content blocks). A string content is
    one text block."""
    kind, msg = e.get("type"), e.get("message")
    if kind not in ("user", "assistant") or not isinstance(msg, dict) or e.get("isMeta"):
        return None, []
    content = msg.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    return (kind, blocks) if isinstance(blocks, list) else (None, [])


class ClaudeCodeTurns:
    """Parser state of a Claude Code transcript: a reply being read, calls awaiting results.

    A waiting call is kept in a JSON form (its tool, shown arguments, the entry fields its turn
    needs, when it was first seen), so the state at a line end can be committed with it
    (:attr:`Checkpoint.pending`) and a later read can start from there."""

    def __init__(self, path: Path, pending: dict | None = None, now: float = 0.0) -> None:
        self.path = path
        self.now = now
        pending = pending or {}
        self.reply: Reply[dict] = Reply(pending.get("cut") is True)  # a cut one's rest passed over
        self.calls: dict[str, dict] = dict(pending.get("calls") or {})  # tool_use id -> call
        self.gave_up: dict[str, dict] = dict(pending.get("gave_up") or {})

    def clean(self) -> bool:
        """No reply half-read: the state here is the waiting calls (and a cut reply's rest
        being passed over) alone."""
        return not self.reply.parts

    def pending(self) -> dict:
        out: dict = {}
        if self.calls:
            out["calls"] = dict(self.calls)
        if self.gave_up:
            out["gave_up"] = dict(self.gave_up)
        if self.reply.cut:
            out["cut"] = True
        return out

    def add_reply(self, e: dict, text: str) -> list[Turn]:
        """One more text of the reply being read (``e``: its entry). Past
        :data:`REPLY_CUT_CHARS` the reply is given at once, cut (:func:`cut_reply`), and its
        rest is passed over until it ends (:meth:`flush_reply`)."""
        return self._reply_turn(self.reply.add(e, text))

    def _reply_turn(self, done: tuple[dict | None, str] | None) -> list[Turn]:
        if done is None:
            return []
        e = done[0] or {}
        return [self._turn(e, "assistant", done[1], f"{e.get('uuid') or e.get('_at')}#a")]

    def _session(self, e: dict) -> tuple[str, str | None]:
        sid = str(e.get("sessionId") or self.path.stem)
        if e.get("isSidechain"):
            agent = e.get("agentId") or self.path.stem.removeprefix("agent-")
            return f"{sid}/agent-{agent}", sid
        return sid, None

    def _turn(self, e: dict, role: str, text: str, key: str) -> Turn:
        session, parent = self._session(e)
        return Turn(session, role, text, key, str_field(e.get("timestamp")),
                    str_field(e.get("cwd")), str_field(e.get("gitBranch")), parent)  # fmt: skip

    def flush_reply(self) -> list[Turn]:
        """The reply read, ended (a cut one's rest is over: the next text is a new reply)."""
        return self._reply_turn(self.reply.end())

    def _abandon(self, cids: list[str]) -> list[Turn]:
        """Record these waiting calls without their results (remembered for a late result)."""
        out = []
        for cid in cids:
            c = self.calls.pop(cid)
            out.append(self._turn(c["entry"], "tool", tool_turn_text(c["name"], c["args"], None,
                                                                     False), f"tool:{cid}"))  # fmt: skip
            self.gave_up[cid] = {"name": c["name"], "args": c["args"]}
        while len(self.gave_up) > ABANDONED_KEPT:
            del self.gave_up[next(iter(self.gave_up))]
        return out

    def flush_calls(self) -> list[Turn]:
        return self._abandon(list(self.calls))

    def give_up(self, now: float, after_s: float) -> list[Turn]:
        """The calls waiting at least ``after_s`` (:func:`waiting_since`), recorded without
        their results."""
        return self._abandon(
            [c for c, v in self.calls.items() if now - waiting_since(v, now) >= after_s]
        )

    def feed(self, e: dict) -> list[Turn]:
        kind, blocks = message_blocks(e)
        if kind is None:
            return []
        out: list[Turn] = []
        if kind == "assistant":
            for b in blocks:
                if not isinstance(b, dict):
                    continue
                if b.get("type") == "text" and str(b.get("text", "")).strip():
                    out += self.add_reply(e, str(b["text"]))
                elif b.get("type") == "tool_use":
                    out += self.flush_reply()
                    name = str(b.get("name") or "tool")[:200]
                    self.calls[str(b.get("id") or f"{e.get('_at')}")[:200]] = {
                        "name": name, "args": small_args(name, b.get("input")),
                        "entry": {k: e[k] for k in _ENTRY_FIELDS
                                  if k in e and isinstance(e[k], str | bool)}, "seen": self.now,
                    }  # fmt: skip
                    if len(self.calls) > MAX_WAITING:
                        out += self._abandon(list(self.calls)[: len(self.calls) - MAX_WAITING])
            return out
        out += self.flush_reply()
        texts = []
        for b in blocks:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "tool_result":
                cid = str(b.get("tool_use_id") or "")
                call = self.calls.pop(cid, None) or self.gave_up.pop(cid, None)
                name, args = (call["name"], call["args"]) if call else ("tool", None)
                text = tool_turn_text(name, args, result_text(b.get("content")),
                                      bool(b.get("is_error")))  # fmt: skip
                out.append(self._turn(e, "tool", text, f"tool:{cid or e.get('_at')}"))
            elif b.get("type") == "text" and str(b.get("text", "")).strip():
                texts.append(str(b["text"]))
        text = "\n\n".join(texts).strip()
        if text and not e.get("isCompactSummary") and not text.startswith(COMPACT_PREFIX):
            if not text.startswith(("<command-", "<local-command-")):
                out.append(self._turn(e, "user", clip(text), f"{e.get('uuid') or e.get('_at')}#u"))
        return out
