"""The client-integration commands: ``hook`` (answered by the hook client, standard library
only), ``hooks`` (install, uninstall, status), ``hook-preview`` and ``index-sessions``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

# the clients' names (server.hooks.clients.NAMES, repeated: the parser is built without
# importing the clients; a name whose module is missing is refused when used)
CLIENT_NAMES = ("claude", "codex", "gemini", "cursor", "copilot")


def cmd_hooks(args: argparse.Namespace) -> int:
    """``hooks install|uninstall|status [--client NAME|auto]``: one client (Claude Code by
    default), or with ``auto`` every client found on this machine (``status``: every
    registered client unless ``--client`` names one)."""
    from ..hooks import install as hook_install

    scope = "user" if args.user else "project"
    if args.action == "status":
        lines = hook_install.status(client=None if args.client in (None, "auto") else args.client)
    elif args.client == "auto":  # each client all or nothing; every one's outcome said
        lines, failed = hook_install.apply_found(args.action == "install", scope)
        print("\n".join(lines))
        if failed:
            from retrieval.errors import InvalidInput

            raise InvalidInput(f"{args.action} failed for {', '.join(failed)} (why, and any file "
                               "left changed, is said above); the other clients are done")  # fmt: skip
        return 0
    else:
        fn = hook_install.install if args.action == "install" else hook_install.uninstall
        lines = fn(scope, client=args.client or "claude")
    print("\n".join(lines))
    return 0


PREVIEW_TIMEOUT_S = 120.0  # a daemon started for the preview loads its model first


def cmd_hook_preview(args: argparse.Namespace) -> int:
    """What the UserPromptSubmit hook would inject for a prompt, asked of the store's daemon
    (started when none runs) exactly as the hook asks it, with the client's settings."""
    import json
    import os
    import time

    from server.service.core.errors import StoreUnavailable
    from server.service.core.ids import identity_fields, project_root, store_home

    from ..hooks.hookclient import call_daemon, config_from_env

    env, cwd = os.environ, os.getcwd()
    who = {**identity_fields(env, cwd), "root": project_root(os.path.realpath(cwd))}
    config = config_from_env(env)
    if args.threshold is not None:
        config["threshold"] = args.threshold
    payload = {"prompt": args.prompt, "session": args.session, "config": config}
    try:
        data = call_daemon(store_home(env), env, "/hook-preview", payload, who,
                           time.monotonic() + PREVIEW_TIMEOUT_S)  # fmt: skip
    except Exception as exc:  # the hook client's errors are plain: say what failed
        raise StoreUnavailable(f"the store's daemon did not answer the preview: {exc}") from None
    if "error" in data:
        raise StoreUnavailable(f"{data['error']}: {data.get('message', '')}")
    print(json.dumps(data, indent=2, ensure_ascii=False) if args.json else render_preview(data))
    return 0


def render_preview(data: dict) -> str:
    """The preview as a table: every candidate in the search's order, its relevance and what the
    hook did with it; then the injected text."""
    cands = data.get("candidates") or []
    lines = [f"prompt: {data.get('prompt', '')}",
             f"threshold {data.get('threshold')}: {len(data.get('injected') or [])} of "
             f"{len(cands)} candidates injected", "",
             f"{'#':>3} {'relevance':>9} {'cosine':>7} {'coverage':>8}  verdict / source / text"]  # fmt: skip
    for i, c in enumerate(cands, 1):
        cos = "-" if c.get("cosine") is None else f"{c['cosine']:.3f}"
        lines.append(f"{i:>3} {c['relevance']:>9.3f} {cos:>7} {c['coverage']:>8.3f}  "
                     f"{c['verdict']}")  # fmt: skip
        lines.append(f"{'':>33}{c['source']}")
        lines.append(f"{'':>33}{c['excerpt']}")
    text = data.get("text") or ""
    lines += [
        "",
        "injected text:" if text else "nothing would be injected.",
        *([text] if text else []),
    ]
    return "\n".join(lines)


def cmd_index_sessions(args: argparse.Namespace) -> int:
    from ..hooks.session_client import index_sessions

    return index_sessions(args.paths, watch=args.watch, quiet=args.quiet,
                          interval=args.interval)  # fmt: skip


def register(sub) -> None:
    """Add this group's commands to the ``pattern-memory`` parser's subparsers."""
    hk = sub.add_parser(
        "hook", help="answer a client hook event (reads its JSON on stdin; see docs/clients.md)"
    )
    hk.add_argument("--client", choices=CLIENT_NAMES, default="claude",
                    help="whose hook JSON is on stdin (default claude)")  # fmt: skip
    hk.add_argument("event", help="the client's event name (for claude: SessionStart, "
                    "UserPromptSubmit, PostToolUse, PostToolUseFailure, PreCompact, Stop or "
                    "SessionEnd)")  # fmt: skip
    hs = sub.add_parser("hooks", help="install our hooks and MCP server entry in an agent client")
    hs.add_argument("action", choices=["install", "uninstall", "status"],
                    help="install (idempotent, backs up first), uninstall (exactly what install "
                         "added) or status")  # fmt: skip
    hs.add_argument("--client", choices=[*CLIENT_NAMES, "auto"], default=None,
                    help="the agent client (default claude; auto: every client found on this "
                         "machine; status without it: every client)")  # fmt: skip
    where = hs.add_mutually_exclusive_group()
    where.add_argument("--project", action="store_true",
                       help="the client's files in this project (default; for claude "
                            ".claude/settings.json and .mcp.json)")  # fmt: skip
    where.add_argument("--user", action="store_true",
                       help="the client's files for you, everywhere (for claude "
                            "~/.claude/settings.json and ~/.claude.json)")  # fmt: skip
    hs.set_defaults(fn=cmd_hooks)
    hp = sub.add_parser(
        "hook-preview", help="what the prompt hook would inject for PROMPT, and why (per candidate)"
    )
    hp.add_argument("prompt", help="the prompt, as the user would type it")
    hp.add_argument("--session", help="as this session (its injected items and own turns "
                    "are left out, as the hook leaves them)")  # fmt: skip
    hp.add_argument("--threshold", type=float, help="another relevance threshold (0-1)")
    hp.add_argument("--json", action="store_true", help="the decision as JSON")
    hp.set_defaults(fn=cmd_hook_preview)
    ix = sub.add_parser("index-sessions", help="index agent transcripts as searchable exchanges")
    ix.add_argument("paths", nargs="*", metavar="PATH",
                    help="transcripts (.jsonl) or folders (default: ~/.claude/projects)")  # fmt: skip
    ix.add_argument("--watch", action="store_true", help="keep indexing as transcripts grow")
    ix.add_argument("--interval", type=float, default=2.0, help="--watch poll seconds")
    ix.add_argument("--quiet", action="store_true", help="no per-file lines")
    ix.set_defaults(fn=cmd_index_sessions)
