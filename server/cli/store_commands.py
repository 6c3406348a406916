"""The commands on the store itself: ``ingest`` (a workspace folder), ``reindex``, ``stats``
and ``compact-changes``.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from .ownership import Owner, runtime, sole

if TYPE_CHECKING:
    import argparse


def cmd_ingest(args: argparse.Namespace) -> int:
    """Ingest a folder's files as searchable chunks; the model loads only if something changed."""
    from ingest.workspace.pipeline import IngestReport
    from ingest.workspace.progress import ProgressPrinter, summary
    from server.service.core.config import Settings
    from server.service.core.runtime import Runtime
    from server.service.transfers.workspace import check_root, ingest_workspace, watch_workspace

    settings = Settings.from_env()
    root = check_root(args.path, settings.allowed_dirs, settings.cwd)  # this process = caller
    owner = Owner("ingest")  # one writer per store: this process, or the daemon that owns it
    if owner.daemon is not None:
        if args.watch:
            owner.refuse_if_daemon("Without --watch it ingests through the daemon. ")
        data = owner.call("ingest_workspace", {"path": str(root), "maxFileKb": args.max_file_kb},
                          project=args.project)  # fmt: skip
        report = IngestReport.model_validate(data)
        print(report.model_dump_json(indent=2) if args.json else summary(report), flush=True)
        return 130 if report.interrupted else 0
    rt = Runtime.start(model="on_demand")
    who = rt.identity
    if args.project:
        who = who.model_copy(update={"project_id": args.project})

    def show(report) -> None:
        print(report.model_dump_json(indent=2) if args.json else summary(report), flush=True)

    progress = None if args.quiet else ProgressPrinter(sys.stderr)
    try:
        if args.watch:
            print(f"watching {root} (Ctrl-C to stop)", file=sys.stderr)
            watch_workspace(rt, who, root, show, max_file_kb=args.max_file_kb, progress=progress)
        else:
            report = ingest_workspace(
                rt, who, root, max_file_kb=args.max_file_kb, progress=progress
            )
            show(report)
            return 130 if report.interrupted else 0
    finally:
        rt.close()
        owner.release()
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    from server.service.core.maintenance import reindex

    owner = sole("reindex")
    try:
        return _reindex(args, reindex)
    finally:
        owner.release()


def _reindex(args, reindex) -> int:
    from server.service.core.errors import PatternError

    rt = runtime(background=False)
    try:
        if rt.model_error:
            raise PatternError(rt.model_error)
        records, orphans = reindex(rt.service, orphans_only=args.orphans)
        if args.orphans:
            print(f"removed {orphans} orphan vectors")
        else:
            print(f"reindexed {records} records, removed {orphans} orphan vectors")
    finally:
        rt.close()
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from server.service.core.maintenance import health, orphan_vectors

    owner = sole("stats", "Its `pattern_health` tool reports through the daemon. ")
    try:
        rt = runtime(background=False)  # the orphan count needs the model and the vector index
        res = health(rt.service, rt.identity, rt.model_error, store_wide=True)  # the machine's user
        res.orphanVectors = orphan_vectors(rt.service)
        rt.close()
    finally:
        owner.release()
    print(res.model_dump_json(indent=2))
    return 0


def cmd_compact_changes(args: argparse.Namespace) -> int:
    """Delete old change-stream rows (consumers behind the new horizon get reset_required)."""
    from datetime import timedelta

    from server.service.core.runtime import Runtime
    from server.service.memories.changes import compact

    owner = sole("compact-changes")
    try:
        rt = Runtime.start(model="off")  # no model, no Chroma
        try:
            if args.before_seq is not None:
                res = compact(rt.service, before_seq=args.before_seq)
            else:
                res = compact(rt.service, older_than=timedelta(days=args.older_than_days))
        finally:
            rt.close()
    finally:
        owner.release()
    print(res.model_dump_json())
    return 0


def register(sub) -> None:
    """Add this group's commands to the ``pattern-memory`` parser's subparsers."""
    g = sub.add_parser("ingest", help="index a folder's files (incremental; .gitignore respected)")
    g.add_argument("path", help="the folder to index (inside PATTERN_ALLOWED_DIRS)")
    g.add_argument("--project", help="project id (default: from the environment / cwd)")
    g.add_argument("--watch", action="store_true", help="keep re-indexing as files change")
    g.add_argument("--max-file-kb", type=int, default=None, help="skip larger files (default 512)")
    g.add_argument("--json", action="store_true", help="print the full report as JSON")
    g.add_argument("--quiet", action="store_true", help="no progress output")
    g.set_defaults(fn=cmd_ingest)
    ri = sub.add_parser("reindex", help="rebuild the vector index from SQLite")
    ri.add_argument(
        "--orphans",
        action="store_true",
        help="only delete orphan vectors (record gone or moved); no rebuild",
    )
    ri.set_defaults(fn=cmd_reindex)
    sub.add_parser("stats", help="store and model status, counting the whole store").set_defaults(
        fn=cmd_stats
    )
    cc = sub.add_parser("compact-changes", help="delete old change-stream rows (sets the horizon)")
    cc.add_argument("--before-seq", type=int, help="delete changes with a lower sequence number")
    cc.add_argument("--older-than-days", type=float, default=30.0,
                    help="delete changes older than this (default 30; ignored with --before-seq)")  # fmt: skip
    cc.set_defaults(fn=cmd_compact_changes)
