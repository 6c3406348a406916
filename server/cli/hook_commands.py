"""The client-integration commands: ``hook`` (answered by the hook client, standard library
only), ``hooks`` (install, uninstall, status) and ``index-sessions``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse


def cmd_hooks(args: argparse.Namespace) -> int:
    from ..hooks import install as hook_install

    if args.action == "status":
        lines = hook_install.status()
    else:
        fn = hook_install.install if args.action == "install" else hook_install.uninstall
        lines = fn("user" if args.user else "project")
    print("\n".join(lines))
    return 0


def cmd_index_sessions(args: argparse.Namespace) -> int:
    from ..hooks.session_client import index_sessions

    return index_sessions(args.paths, watch=args.watch, quiet=args.quiet,
                          interval=args.interval)  # fmt: skip


def register(sub) -> None:
    """Add this group's commands to the ``pattern-memory`` parser's subparsers."""
    hk = sub.add_parser(
        "hook", help="answer a client hook event (reads its JSON on stdin; see docs/clients.md)"
    )
    hk.add_argument("event", help="SessionStart, UserPromptSubmit, PostToolUse, "
                    "PostToolUseFailure, PreCompact, Stop or SessionEnd")  # fmt: skip
    hs = sub.add_parser("hooks", help="install our Claude Code hooks and MCP server entry")
    hs.add_argument("action", choices=["install", "uninstall", "status"],
                    help="install (idempotent, backs up first), uninstall (exactly what install "
                         "added) or status")  # fmt: skip
    where = hs.add_mutually_exclusive_group()
    where.add_argument("--project", action="store_true",
                       help=".claude/settings.json and .mcp.json here (default)")  # fmt: skip
    where.add_argument("--user", action="store_true",
                       help="~/.claude/settings.json and ~/.claude.json")  # fmt: skip
    hs.set_defaults(fn=cmd_hooks)
    ix = sub.add_parser("index-sessions", help="index agent transcripts as searchable exchanges")
    ix.add_argument("paths", nargs="*", metavar="PATH",
                    help="transcripts (.jsonl) or folders (default: ~/.claude/projects)")  # fmt: skip
    ix.add_argument("--watch", action="store_true", help="keep indexing as transcripts grow")
    ix.add_argument("--interval", type=float, default=2.0, help="--watch poll seconds")
    ix.add_argument("--quiet", action="store_true", help="no per-file lines")
    ix.set_defaults(fn=cmd_index_sessions)
