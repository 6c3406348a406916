"""The ``pattern-memory`` command. One place turns errors into messages and exit codes.

The commands are grouped: :mod:`.serve_commands` (serve, daemon, stop, ui, token),
:mod:`.memory_commands` (demo, recall, export, import, export-graph, import-graph, verify),
:mod:`.shell_commands` (remember, forget, lessons: the tools of an MCP client, from a shell),
:mod:`.migrate_commands` (import-from, export-to), :mod:`.store_commands` (ingest, reindex,
stats, compact-changes) and :mod:`.hook_commands` (hook, hooks, index-sessions);
:mod:`.ownership` decides who writes the store for a command.
Nothing is imported before a command runs: ``hook`` must start in milliseconds.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse


def build_parser() -> argparse.ArgumentParser:
    import argparse

    from . import (
        hook_commands,
        memory_commands,
        migrate_commands,
        serve_commands,
        shell_commands,
        store_commands,
    )

    p = argparse.ArgumentParser(prog="pattern-memory", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    groups = (serve_commands, memory_commands, shell_commands, migrate_commands, store_commands,
              hook_commands)  # fmt: skip
    for group in groups:
        group.register(sub)
    return p


def command() -> int:
    """The ``pattern-memory`` console command: :func:`main`, then the process ends without
    crashing on a thread still at work (``process_exit``)."""
    if _hook_fast_path(sys.argv[1:]):  # standard library only, no thread: nothing to guard
        return main()
    from .process_exit import run

    return run(main)


def _hook_fast_path(argv: list[str]) -> bool:
    return argv[:1] == ["hook"] and len(argv) > 1 and argv[1] not in ("-h", "--help")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if _hook_fast_path(argv):
        from ..hooks.hookclient import main as hook_main  # the fast path: standard library only

        return hook_main(argv[1:])
    from retrieval.regexes import derived
    from server.service.core.errors import PatternError

    derived.write_new()  # what this process derives from the code's patterns, kept for the next
    if argv == ["serve"]:  # what MCP clients start every session: no argparse (~10 ms)
        from types import SimpleNamespace

        from .serve_commands import cmd_serve

        args = SimpleNamespace(fn=cmd_serve, standalone=False)
    else:
        args = build_parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        return args.fn(args)
    except PatternError as exc:
        print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
