"""``pattern-memory index-sessions [PATH ...] [--watch]``: transcripts -> ``kind=turn`` records.

The indexing runs in the store's daemon (the one writer; started when none runs), which this
client asks, transcript by transcript, to index a few batches at a time
(``POST /sessions/index``) until the file is done, printing progress. Each transcript is indexed
as the agent of its own project: the identity is derived from the ``cwd`` the transcript names
(the same derivation as every other identity, ``server/service/core/ids.py``), so its turns land in
that agent's private scope of that project.

Default paths: Claude Code's transcripts, ``~/.claude/projects/*/*.jsonl`` and their sub-agent
sidechains ``~/.claude/projects/*/*/subagents/*.jsonl`` (``$CLAUDE_CONFIG_DIR`` instead of
``~/.claude`` when set); Gemini CLI's sessions, ``~/.gemini/tmp/*/chats/`` (as
``server.hooks.clients.gemini.session_files`` finds them); Codex CLI's rollouts,
``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`` (``$CODEX_HOME`` instead of ``~/.codex`` when
set); GitHub Copilot CLI's sessions, ``~/.copilot/session-state/*/events.jsonl``
(``$COPILOT_HOME`` instead of ``~/.copilot`` when set). A folder given as PATH is searched for
``*.jsonl``. A transcript idle for ``IDLE_S`` is treated as finished (its pending tool calls
are recorded too).

Every request either moves a transcript forward or ends its turn: a tool call waiting for its
result does not hold the reading up (the daemon indexes around it, and gives it up after
``PATTERN_SESSION_DANGLING_S``), and an unfinished last line waits for the next run. Under
``--watch`` a transcript with a waiting call is visited again when that call is due to be given
up, even if the file did not change meanwhile; the other transcripts are indexed meanwhile.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from server.service.core.ids import identity_fields, project_root, store_home
from server.service.indexing.sessions import transcript_cwd

from .hookclient import HookError, call_daemon

IDLE_S = 1800
BATCHES_PER_CALL = 2
CONNECT_S = 600.0  # a request may embed a batch of turns: slow on a busy CPU


def claude_home() -> Path:
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")


def default_paths() -> list[Path]:
    root = claude_home() / "projects"
    from .clients.codex import rollouts as codex_rollouts
    from .clients.copilot import session_files as copilot_sessions
    from .clients.gemini import session_files as gemini_sessions

    found = [*root.glob("*/*.jsonl"), *root.glob("*/*/subagents/*.jsonl"),
             *gemini_sessions(), *codex_rollouts(), *copilot_sessions()]  # fmt: skip
    return sorted(p for p in found if p.is_file())  # a named pipe would block its reader


def expand(paths: list[str]) -> list[Path]:
    """The transcripts to index: the default paths, or those given (a folder: its
    ``*.jsonl``); regular files only."""
    if not paths:
        return default_paths()
    out: list[Path] = []
    for raw in paths:
        p = Path(raw).expanduser()
        if p.is_dir():
            out += sorted(x for x in p.rglob("*.jsonl") if x.is_file())
        elif p.is_file():
            out.append(p)
        else:
            print(f"skipped {p}: not a file or folder", file=sys.stderr)
    return list(dict.fromkeys(x.resolve() for x in out))


def index_one(path: Path, home: str, quiet: bool) -> tuple[dict, float | None]:
    """Index one transcript to its end: (totals, seconds until a waiting tool call is due to
    be given up, or None)."""
    cwd = transcript_cwd(path) or os.getcwd()
    who = {**identity_fields(os.environ, cwd), "root": project_root(os.path.realpath(cwd))}
    final = time.time() - path.stat().st_mtime > IDLE_S
    totals = {"added": 0, "updated": 0, "existing": 0, "withheld": 0}
    offset = None
    while True:
        payload = {"path": str(path), "flush": True, "final": final,
                   "maxBatches": BATCHES_PER_CALL}  # fmt: skip
        answer = call_daemon(home, os.environ, "/sessions/index", payload, who,
                             time.monotonic() + CONNECT_S)  # fmt: skip
        for k in totals:
            totals[k] += answer.get(k, 0)
        if answer.get("restarted") and not quiet:
            print(f"{path}: rewritten or truncated since the last run: read again from the start")
        moved = answer.get("offset", 0) != offset or answer.get("added") or answer.get("updated")
        offset = answer.get("offset", 0)
        if answer.get("done") or offset >= answer.get("size", 0) or not moved:
            break  # the end, or what is left cannot be read yet (an unfinished line)
        if not quiet:
            print(f"  {path.name}: {answer['offset']}/{answer['size']} bytes", flush=True)
    if answer.get("waiting") and not quiet:
        print(f"  {path.name}: {answer['waiting']} tool call(s) waiting for a result "
              f"(indexed without it in {answer.get('retryIn') or 0:.0f} s if none comes)",
              flush=True)  # fmt: skip
    if not quiet and (totals["added"] or totals["updated"] or totals["withheld"]):
        print(f"{path}: {totals['added']} exchange records added, {totals['updated']} updated"
              + (f", {totals['withheld']} withheld (write policy)" if totals["withheld"] else "")
              + f"  [{who['project_id']} / {who['agent_id']}]", flush=True)  # fmt: skip
    return totals, answer.get("retryIn") if answer.get("waiting") else None


def index_sessions(paths: list[str], *, watch: bool = False, quiet: bool = False,
                   interval: float = 2.0) -> int:  # fmt: skip
    home = store_home()
    seen: dict[Path, tuple[int, int]] = {}
    due: dict[Path, float] = {}  # a transcript with a waiting call: visit again at (monotonic)
    failed = 0
    while True:
        files = expand(paths)
        grand = {"added": 0, "updated": 0, "existing": 0, "withheld": 0, "files": 0}
        for path in files:
            try:
                st = path.stat()
            except OSError:
                continue
            unchanged = seen.get(path) == (st.st_size, st.st_mtime_ns)
            if unchanged and time.monotonic() < due.get(path, float("inf")):
                continue
            try:
                totals, retry = index_one(path, home, quiet)
            except (HookError, OSError, ValueError) as exc:
                failed += 1
                print(f"{path}: {exc}", file=sys.stderr)
                continue
            seen[path] = (st.st_size, st.st_mtime_ns)
            if retry is None:
                due.pop(path, None)
            else:
                due[path] = time.monotonic() + retry + 0.5
            grand["files"] += 1
            for k in totals:
                grand[k] += totals[k]
        if not watch:
            print(json.dumps(grand))
            return 1 if failed else 0
        time.sleep(interval)
