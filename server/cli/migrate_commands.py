"""Coming from another memory server, and leaving: ``import-from`` and ``export-to``.

``import-from SOURCE PATH`` reads the source in this process (the user's own files, wherever
they are), then writes the items itself under the store lock, or, when a daemon owns the store,
sends them to the daemon's ``import-from`` tool in batches (the daemon writes with this shell's
identity). Either way every item passes the store's write policy, a second run writes nothing
and an interrupted run resumes. ``export-to`` writes a scope's graph and memories in another
server's format (refused while a daemon owns the store, like ``export``); it never replaces a
file without ``--force``, and then keeps each one it replaces as a backup, named on stderr.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from .ownership import Owner, sole

if TYPE_CHECKING:
    import argparse

DAEMON_BATCH = 500  # items per import-from call through the daemon
PLURAL = {"memory": "memories", "entity": "entities", "observation": "observations",
          "relation": "relations", "lesson": "lessons"}  # fmt: skip
SOURCES_HELP = "claude-mem, mcp-memory-service, mem0, basic-memory, memory-jsonl, claude-code"


def _progress(args):
    from ingest.workspace.progress import ProgressPrinter

    if args.quiet or args.json:
        return None
    return ProgressPrinter(sys.stderr, label="import", units=("items", "records"))


def _batches(items: list) -> list[list]:
    """Memories in batches of :data:`DAEMON_BATCH`; then the graph's items (entities before
    relations, lessons last) in batches as large as the tool takes, so a dry run sees a
    relation's endpoints in the same call."""
    from ..mcp.import_tools import MAX_ITEMS

    order = {"entity": 0, "relation": 1, "lesson": 2}
    mems = [i for i in items if i.kind == "memory"]
    graph = sorted((i for i in items if i.kind != "memory"), key=lambda i: order[i.kind])
    return [mems[s : s + DAEMON_BATCH] for s in range(0, len(mems), DAEMON_BATCH)] + [
        graph[s : s + MAX_ITEMS] for s in range(0, len(graph), MAX_ITEMS)
    ]


def _through_daemon(owner: Owner, source: str, items: list, args, progress):
    """Send ``items`` to the daemon's ``import-from`` tool (:func:`_batches`); their reports
    added up."""
    import time

    from ingest.workspace.pipeline import Progress
    from server.service.transfers.import_from import ImportFromResult, merge

    total = ImportFromResult(source=source, scope=args.scope, dryRun=args.dry_run)
    started, done = time.monotonic(), 0
    for part in _batches(items):
        data = owner.call("import-from", {
            "source": source, "items": [i.model_dump(mode="json", by_alias=True) for i in part],
            "scope": args.scope, "dryRun": args.dry_run,
        }, project=args.project)  # fmt: skip
        merge(total, ImportFromResult.model_validate(data))
        done += len(part)
        if progress is not None:
            progress(Progress(done, len(items), total.imported, time.monotonic() - started))
    total.seconds = round(time.monotonic() - started, 3)
    if progress is not None:
        progress(Progress(done, len(items), total.imported, total.seconds, "done"))
    return total


def cmd_import_from(args: argparse.Namespace) -> int:
    """Import another memory server's memories (see the module docstring)."""
    import time

    from server.service.core.runtime import Runtime
    from server.service.transfers.import_from import fold, read_source, source_name
    from server.service.transfers.import_write import import_items

    source = source_name(args.source)
    started = time.monotonic()
    read = read_source(source, args.path, args.source_project)  # this process: the user's files
    progress = _progress(args)
    owner = Owner("import-from")
    try:
        if owner.daemon is not None:
            res = _through_daemon(owner, source, read.items, args, progress)
        else:
            rt = Runtime.start(model="on_demand")
            try:
                who = rt.identity
                if args.project:
                    who = who.model_copy(update={"project_id": args.project})
                if not args.dry_run:
                    rt.wait_ready()  # the records are embedded as they are written
                res = import_items(rt.service, rt.graphs, who, source, read.items, args.scope,
                                   dry_run=args.dry_run, progress=progress)  # fmt: skip
            finally:
                rt.close()
    except KeyboardInterrupt:
        print("\ninterrupted: what was written is kept; run the same command again to resume",
              file=sys.stderr)  # fmt: skip
        return 130
    finally:
        owner.release()
    res.path = str(args.path)
    fold(res, read)
    res.seconds = round(time.monotonic() - started, 3)
    print(res.model_dump_json(indent=2) if args.json else summary(res))
    return 130 if res.interrupted else 0


def summary(res) -> str:
    """The report of an import, for a person."""
    verb = "would create" if res.dryRun else "created"
    lines = [
        f"{res.source}: {res.path} -> {res.scope} scope"
        + (" (dry run: nothing was written)" if res.dryRun else ""),
        f"read {res.read} items in {res.seconds:.1f} s"
        + (f" ({res.read / res.seconds:.0f} items/s)" if res.seconds > 0 and res.read else ""),
        f"{verb}: "
        + (", ".join(f"{n} {PLURAL.get(k, k)}" for k, n in res.created.items()) or "nothing"),
    ]
    for kind, n in res.byKind.items():
        sample = res.samples.get(kind, "")
        lines.append(f"  {kind:<20} {n:>6}  e.g. {sample}")
    if res.categories:
        lines.append("  into " + ", ".join(f"{k}: {n}" for k, n in res.categories.items()))
    lines.append(f"already imported: {res.alreadyImported}")
    if res.pending:
        lines.append(
            f"pending: {res.pending} relations to entities in neither the graph nor the source "
            "(kept; each is made when its entity is created)"
        )
    if res.filtered:
        lines.append(f"other source projects (--source-project): {res.filtered}")
    skipped = sum(res.skipped.values())
    lines.append(f"skipped: {skipped}" + (" (" + ", ".join(
        f"{why}: {n}" for why, n in res.skipped.items()) + ")" if skipped else ""))  # fmt: skip
    lines += [f"  {s}" for s in res.skippedItems[:20]]
    if skipped > 20:
        lines.append("  … (--json lists the first 50)")
    if res.warningCount:
        lines.append(f"warnings: {res.warningCount}")
        lines += [f"  {w}" for w in res.warnings[:10]]
    if res.interrupted:
        lines.append("interrupted: what was written is kept; run again to resume")
    return "\n".join(lines)


def cmd_export_to(args: argparse.Namespace) -> int:
    from server.service.core.runtime import Runtime
    from server.service.transfers.export_to import export_to

    owner = sole("export-to", "Its `read_graph` and `export-memories` tools read through it. ")
    try:
        rt = Runtime.start(model="off")
        try:
            res = export_to(rt.service, rt.graphs, rt.identity, args.format, args.path,
                            args.scope, force=args.force)  # fmt: skip
        finally:
            rt.close()
    finally:
        owner.release()
    for line in res.backups:
        print(f"replaced (kept as a backup): {line}", file=sys.stderr)
    print(json.dumps(res.model_dump(), ensure_ascii=False))
    return 0


def register(sub) -> None:
    """Add this group's commands to the ``pattern-memory`` parser's subparsers."""
    f = sub.add_parser(
        "import-from", help="import another memory server's memories (safe to repeat)",
        description=f"Sources: {SOURCES_HELP}. See docs/migrate.md.",
    )  # fmt: skip
    f.add_argument("source", help=SOURCES_HELP)
    f.add_argument("path", help="the source's database, export file or folder")
    f.add_argument("--project", help="project to import into (default: from the environment)")
    f.add_argument("--scope", default="team",
                   help="private, personal, team (default) or public")  # fmt: skip
    f.add_argument("--source-project", metavar="NAME",
                   help="only the memories of this project of the source")  # fmt: skip
    f.add_argument("--dry-run", action="store_true",
                   help="report what would be created, by kind, with a sample; write nothing")  # fmt: skip
    f.add_argument("--json", action="store_true", help="print the full report as JSON")
    f.add_argument("--quiet", action="store_true", help="no progress bar")
    f.set_defaults(fn=cmd_import_from)
    t = sub.add_parser("export-to", help="export a scope's graph and memories for another server")
    t.add_argument("format", choices=["basic-memory", "memory-jsonl"], help="the format to write")
    t.add_argument("path", help="basic-memory: a folder of notes; memory-jsonl: the file")
    t.add_argument("--scope", default="team", help="scope to export (default team)")
    t.add_argument("--force", action="store_true",
                   help="replace files already there, each kept first as <name>.bak-<time>")  # fmt: skip
    t.set_defaults(fn=cmd_export_to)
