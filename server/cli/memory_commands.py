"""The commands on memories and graphs: ``demo``, ``recall``, ``export`` / ``import``,
``export-graph`` / ``import-graph`` and ``verify`` (memories whose cited code changed).

What they print from the store (recalled text, a memory's content, a cited file's diff, JSON)
goes through :func:`~server.service.trust.escapes.for_terminal`: a control character stored
in it is shown escaped, never sent to the terminal as a control sequence.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..service.trust.escapes import for_terminal
from .ownership import Owner, runtime, sole

if TYPE_CHECKING:
    import argparse

    from server.service.core.runtime import Runtime


def cmd_demo(args: argparse.Namespace) -> int:
    """Store the paragraphs of README.md and docs/ as team memories, then recall."""
    from server.service.core.demo import ask, doc_files, store_docs

    owner = sole("demo", "Its `remember` and `recall` tools do the same through the daemon. ")
    try:
        return _demo(args, ask, doc_files, store_docs)
    finally:
        owner.release()


def _demo(args, ask, doc_files, store_docs) -> int:
    rt = runtime(background=True)  # the status line below prints while the model loads
    root = Path(args.root).resolve()
    who = rt.identity
    print(f"store: {rt.settings.home}  (project {who.project_id}, agent {who.agent_id})")
    print(rt.settings.model_status(), flush=True)
    rt.wait_ready()
    if rt.model_error:
        print(f"warning: {rt.model_error}; ranking is lexical", file=sys.stderr)
    stored = store_docs(rt.service, who, root)
    print(f"stored {stored} new paragraphs from {len(doc_files(root))} files")
    for query in args.query or ["where is the fusion of lexical and vector scores done",
                                "how do I run the tests"]:  # fmt: skip
        print(f"\nrecall: {query!r}")
        for i, (item, source) in enumerate(ask(rt.service, who, query, args.k), 1):
            e = item.explanation
            text = " ".join(item.content.split())[:110]
            print(for_terminal(
                f"{i:2}. {item.score:.3f}  lex#{e.get('lexical_rank') or '-'} "
                f"vec={e.get('vector_similarity')}  [{source}] {text}"
            ))  # fmt: skip
    rt.close()
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    from server.service.core.models import RecallInput
    from server.service.recalling.recall import recall

    owner = Owner("recall")
    try:
        if owner.daemon is not None:  # the daemon answers (its model is loaded already)
            data = owner.call("recall", {"query": args.query, "budget": args.budget})
            if args.json:
                print(for_terminal(json.dumps(data, indent=2, ensure_ascii=False)))
            else:
                print(for_terminal(data.get("text") or "(nothing relevant)"))
            return 0
        rt = runtime()
        rt.wait_ready()
        res = recall(rt.service, rt.identity, RecallInput(query=args.query, budget=args.budget))
        rt.close()
    finally:
        owner.release()
    if args.json:
        print(for_terminal(res.model_dump_json(indent=2)))
    else:
        print(for_terminal(res.text or "(nothing relevant)"))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from server.service.transfers.transfer import export_memories

    owner = sole("export", "Its `export-memories` tool exports through the daemon. ")
    return _export(owner, lambda rt: export_memories(
        rt.service, rt.identity, [*rt.settings.allowed_for(rt.identity), Path.cwd()],
        args.output, args.scope, args.category, force=args.force))  # fmt: skip


def _export(owner: Owner, write: Callable[[Runtime], Any]) -> int:
    """``write`` (an export) on a runtime of this command's, ``owner`` released after; prints
    the files it replaced (kept as backups) and its result."""
    try:
        rt = runtime()
        try:
            res = write(rt)
        finally:
            rt.close()
    finally:
        owner.release()
    for line in res.backups:
        print(for_terminal(f"replaced (kept as a backup): {line}"), file=sys.stderr)
    print(for_terminal(res.model_dump_json()))
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from server.service.transfers.transfer import import_memories

    owner = Owner("import")
    try:
        if owner.daemon is not None:  # the daemon's rules: the file must be in allowed dirs
            args_ = {"inputPath": str(Path(args.file).resolve()),
                     "overwriteExisting": args.overwrite}  # fmt: skip
            print(for_terminal(json.dumps(owner.call("import-memories", args_),
                                          ensure_ascii=False)))  # fmt: skip
            return 0
        rt = runtime()
        dirs = [*rt.settings.allowed_for(rt.identity), Path(args.file).resolve().parent]
        rt.wait_ready()
        res = import_memories(rt.service, rt.identity, dirs, args.file, args.overwrite)
        rt.close()
    finally:
        owner.release()
    print(for_terminal(res.model_dump_json()))
    return 0


def cmd_import_graph(args: argparse.Namespace) -> int:
    """memory.jsonl of the official memory server and/or the lessons fork's lesson.json."""
    owner = sole(
        "import-graph", "Its `create_entities`, `create_relations` and `create_lesson` tools "
        "write a graph through the daemon. ",
    )  # fmt: skip
    try:
        rt = runtime()
        rt.wait_ready()
        res = rt.graphs.import_files(rt.identity, args.files, args.scope)
        rt.close()
    finally:
        owner.release()
    print(for_terminal(res.model_dump_json(indent=2 if res.skipped else None)))
    return 0


def cmd_export_graph(args: argparse.Namespace) -> int:
    owner = sole("export-graph", "Its `read_graph` tool reads the graph through the daemon. ")
    return _export(owner, lambda rt: rt.graphs.export_files(
        rt.identity, args.file, args.lessons, args.scope, force=args.force))  # fmt: skip


def _say(text: str) -> None:
    """A line of stored content or of a cited file's diff, printed escaped."""
    print(for_terminal(text))


def _show_verify(res) -> None:
    if res.action != "list":
        done = "deleted" if res.deleted else f"revision {res.revision}"
        _say(f"{res.action}: {res.memoryId} ({done})")
        for m in res.memories:
            for c in m.citations:
                _say(f"  {c.label}: {c.status}")
        return
    _say(f"{len(res.memories)} stale of {res.checked} memories with citations")
    for m in res.memories:
        _say(f"\n{m.id}  [{m.scope}/{m.category}] revision {m.revision}")
        _say("  " + " ".join(m.content.split())[:200])
        for c in m.citations:
            where = f" -> now {c.currentStartLine}-{c.currentEndLine}" if c.currentStartLine else ""
            _say(f"  {c.label}: {c.status}{where if c.status != 'fresh' else ''}")
        for d in m.diffs:
            if d.note:
                _say(f"  ({d.cited}: {d.note})")
            if d.diff:
                _say("\n".join("    " + line for line in d.diff.rstrip("\n").split("\n")))


def cmd_verify(args: argparse.Namespace) -> int:
    """List your memories whose cited code changed (with diffs); confirm, update or forget one."""
    from server.service.core.errors import InvalidInput
    from server.service.core.runtime import Runtime
    from server.service.recalling.verify import verify

    actions = [a for a in ("confirm", "update", "forget") if getattr(args, a)]
    if len(actions) > 1:
        raise InvalidInput("give one of --confirm, --update, --forget")
    action = actions[0] if actions else "list"
    if action == "update" and not args.content:
        raise InvalidInput("--update needs --content (the corrected text)")
    owner = Owner("verify")
    try:
        if owner.daemon is not None:
            from server.service.recalling.verify import VerifyResult

            data = owner.call("verify-memories", {
                "action": action, "memoryId": getattr(args, action) if actions else None,
                "content": args.content, "expectedRevision": args.expected_revision,
                "includeMoved": args.include_moved, "limit": args.limit, "force": args.force,
            })  # fmt: skip
            res = VerifyResult.model_validate(data)
        else:
            rt = Runtime.start(model="on_demand")  # the model loads only to embed an update
            try:
                if action == "update":
                    rt.wait_ready()
                res = verify(
                    rt.service, rt.identity, action, getattr(args, action) if actions else None,
                    content=args.content, expected_revision=args.expected_revision,
                    include_moved=args.include_moved, limit=args.limit, force=args.force,
                )  # fmt: skip
            finally:
                rt.close()
    finally:
        owner.release()
    if args.json:
        print(for_terminal(res.model_dump_json(indent=2)))
    else:
        _show_verify(res)
    return 0


def register(sub) -> None:
    """Add this group's commands to the ``pattern-memory`` parser's subparsers."""
    d = sub.add_parser("demo", help="store README/docs paragraphs, then recall")
    d.add_argument("query", nargs="*", help="questions to recall (default: two examples)")
    d.add_argument("--root", default=".", help="folder with README.md and docs/ (default .)")
    d.add_argument("-k", type=int, default=5, help="results per question (default 5)")
    d.set_defaults(fn=cmd_demo)
    r = sub.add_parser("recall", help="recall from the shell")
    r.add_argument("query", help="what to recall, in plain words")
    r.add_argument(
        "--budget", type=int, default=1500, help="size of the text block in tokens (default 1500)"
    )
    r.add_argument("--json", action="store_true", help="print the whole result as JSON")
    r.set_defaults(fn=cmd_recall)
    e = sub.add_parser("export", help="export visible memories to JSON")
    e.add_argument(
        "output", nargs="?", help="file to write (default memories-backup-TIMESTAMP.json)"
    )
    e.add_argument("--scope", help="only this scope (private, personal, team, public)")
    e.add_argument("--category", help="only this category")
    e.add_argument("--force", action="store_true",
                   help="replace the file if it exists, kept first as <name>.bak-<time>")  # fmt: skip
    e.set_defaults(fn=cmd_export)
    i = sub.add_parser("import", help="import an export file")
    i.add_argument("file", help="a file written by export (or export-memories)")
    i.add_argument("--overwrite", action="store_true", help="replace memories with the same id")
    i.set_defaults(fn=cmd_import)
    ig = sub.add_parser(
        "import-graph", help="import a knowledge graph (official memory.jsonl, lesson.json)"
    )
    ig.add_argument("files", nargs="+", metavar="FILE", help="JSON lines or a JSON array")
    ig.add_argument("--scope", default="team", help="graph to import into (default team)")
    ig.set_defaults(fn=cmd_import_graph)
    eg = sub.add_parser(
        "export-graph", help="export the knowledge graph as the official memory.jsonl"
    )
    eg.add_argument("file", metavar="FILE", help="the memory.jsonl to write")
    eg.add_argument(
        "--lessons", metavar="FILE", help="write lessons here (lesson.json) instead of FILE"
    )
    eg.add_argument("--scope", default="team", help="graph to export (default team)")
    eg.add_argument("--force", action="store_true",
                    help="replace files already there, each kept first as <name>.bak-<time>")  # fmt: skip
    eg.set_defaults(fn=cmd_export_graph)
    v = sub.add_parser(
        "verify",
        help="your memories whose cited code changed: list (diffs), confirm, update, forget",
    )
    v.add_argument("--confirm", metavar="ID", help="still right: re-anchor to the current lines")
    v.add_argument("--update", metavar="ID", help="replace its content (with --content)")
    v.add_argument("--forget", metavar="ID", help="delete it")
    v.add_argument("--content", help="the corrected text for --update")
    v.add_argument("--expected-revision", type=int, help="--update only at this revision")
    v.add_argument("--include-moved", action="store_true", help="also list moved-only citations")
    v.add_argument("--limit", type=int, default=50, help="most memories listed (default 50)")
    v.add_argument("--force", action="store_true", help="--forget a core memory")
    v.add_argument("--json", action="store_true", help="print the result as JSON")
    v.set_defaults(fn=cmd_verify)
