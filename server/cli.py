"""The ``pattern-memory`` command. One place turns errors into messages and exit codes."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when a command runs: ``hook`` must start in milliseconds
    import argparse


def _runtime(background: bool = False):
    from .service.runtime import Runtime

    return Runtime.start(background=background)


class _Owner:
    """Who writes the store for this command: this process (``lock`` held) or the daemon
    that owns it (``daemon``: its daemon.json). See server/ownership.py."""

    def __init__(self, command: str) -> None:
        from .ownership import take
        from .service.config import Settings

        self.command = command
        self.settings = Settings.from_env()
        got = take(self.settings.home, command)
        self.lock, self.daemon = (None, got) if isinstance(got, dict) else (got, None)

    def refuse_if_daemon(self, instead: str = "") -> None:
        if self.daemon is not None:
            from .ownership import refuse

            refuse(self.settings.home, self.daemon, self.command, instead)

    def call(self, tool: str, args: dict, project: str | None = None) -> dict:
        from .ownership import call_tool
        from .service.identity import identity_from_env

        who = identity_from_env(os.environ, self.settings.cwd)
        if project:
            who = who.model_copy(update={"project_id": project})
        return call_tool(self.daemon, who, tool, {k: v for k, v in args.items() if v is not None})

    def release(self) -> None:
        if self.lock is not None:
            self.lock.release()


def _sole(command: str, instead: str = "") -> _Owner:
    """The store lock for a command that has no way through a daemon (refused under one)."""
    owner = _Owner(command)
    owner.refuse_if_daemon(instead)
    return owner


def cmd_serve(args: argparse.Namespace) -> int:
    if args.standalone:
        from .http.daemon import StoreLock
        from .mcp.app import create_server
        from .service.config import Settings

        lock = StoreLock(Settings.from_env().home, "pattern-memory serve --standalone")
        lock.acquire()  # one owner per store: a second standalone server is refused
        try:
            create_server().run("stdio")
        finally:
            lock.release()
        return 0
    from .http.daemonfiles import start_early

    spawned_at = start_early(dict(os.environ))  # its start runs beside the bridge's
    from .http.bridge import run_bridge

    return run_bridge(spawned_at=spawned_at)


def cmd_daemon(args: argparse.Namespace) -> int:
    from .http.daemon import run_daemon

    env = dict(os.environ)
    if args.store_url:
        env["PATTERN_STORE_URL"] = args.store_url
    return run_daemon(
        Path(args.home) if args.home else None,
        args.http,
        env,
        allowed_hosts=args.allowed_host or (),
    )


def cmd_stop(args: argparse.Namespace) -> int:
    import signal
    import time

    from .http.daemon import read_info
    from .service.config import Settings

    home = Path(args.home) if args.home else Settings.from_env().home
    info = read_info(home)
    if not info:
        print(f"no daemon runs for {home}")
        return 0
    os.kill(info["pid"], signal.SIGTERM)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline and read_info(home):
        time.sleep(0.05)
    if read_info(home):
        print(f"daemon {info['pid']} did not stop within {args.timeout}s", file=sys.stderr)
        return 1
    print(f"stopped daemon {info['pid']}")
    return 0


def cmd_ui(args: argparse.Namespace) -> int:
    """Open the dashboard: find (or start) the store's daemon, sign a one-time login link."""
    import webbrowser

    from .http.bridge import DaemonLink
    from .service.config import Settings
    from .ui.logins import LINK_TTL, base_url, login_url

    home = Path(args.home) if args.home else Settings.from_env().home
    info = DaemonLink(home, {}, dict(os.environ)).connect()  # started if none runs
    url = login_url(info)
    print(f"pattern-memory dashboard: {base_url(info)}/ui/ (store {home})")
    print(f"one-time sign-in link (valid {LINK_TTL} s, once):\n{url}", flush=True)
    if not args.no_browser and not webbrowser.open(url):
        print("could not open a browser: open the link above", file=sys.stderr)
    return 0


def cmd_token(args: argparse.Namespace) -> int:
    from .http.auth import binding
    from .service.bearer_tokens import TokenStore
    from .service.config import Settings
    from .service.errors import InvalidInput

    settings = Settings.from_env()
    tokens = TokenStore(settings.home, settings.store_url)
    if args.action == "create":
        if args.agent and args.name and args.agent != args.name:
            raise InvalidInput(f"two agents given: {args.name!r} and --agent {args.agent!r}")
        project = args.project
        if project is None and not args.any_project:
            from .service.identity import identity_from_env

            project = identity_from_env(None, settings.cwd).project_id  # the current project
        token = tokens.create(
            args.agent or args.name or "",
            project,
            args.label or "",
            any_project=args.any_project,
            reviewer=args.reviewer,
        )
        print(token)
        where = "any project" if args.any_project else f"project {project}"
        role = ", a reviewer" if args.reviewer else ""
        print(f"token for agent {args.agent or args.name}, bound to {where}{role}; store it now: "
              "it is not shown again", file=sys.stderr)  # fmt: skip
    elif args.action == "revoke":
        given = [(by, v) for by, v in (("any", args.name), ("agent", args.agent),
                                       ("prefix", args.prefix)) if v]  # fmt: skip
        if len(given) != 1:
            raise InvalidInput("name one agent id or token prefix: token revoke NAME")
        for t in tokens.revoke(given[0][1], by=given[0][0]):
            print(f"revoked {t['prefix']}…  agent={t['agent']}  project={binding(t)}")
    else:
        for t in tokens.list():
            state = f"revoked {t['revoked'][:10]}" if t["revoked"] else "active"
            label = f"  label={t['label']}" if t.get("label") else ""
            role = "  reviewer" if t.get("reviewer") else ""
            print(f"{t['prefix']}…  agent={t['agent']}  project={binding(t)}  {state}{role}{label}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Store the paragraphs of README.md and docs/ as team memories, then recall."""
    from .service.demo import ask, doc_files, store_docs

    owner = _sole("demo", "Its `remember` and `recall` tools do the same through the daemon. ")
    try:
        return _demo(args, ask, doc_files, store_docs)
    finally:
        owner.release()


def _demo(args, ask, doc_files, store_docs) -> int:
    rt = _runtime(background=True)  # the status line below prints while the model loads
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
            print(
                f"{i:2}. {item.score:.3f}  lex#{e.get('lexical_rank') or '-'} "
                f"vec={e.get('vector_similarity')}  [{source}] {text}"
            )
    rt.close()
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    from .service.models import RecallInput
    from .service.recall import recall

    owner = _Owner("recall")
    try:
        if owner.daemon is not None:  # the daemon answers (its model is loaded already)
            data = owner.call("recall", {"query": args.query, "budget": args.budget})
            if args.json:
                print(json.dumps(data, indent=2, ensure_ascii=False))
            else:
                print(data.get("text") or "(nothing relevant)")
            return 0
        rt = _runtime()
        rt.wait_ready()
        res = recall(rt.service, rt.identity, RecallInput(query=args.query, budget=args.budget))
        rt.close()
    finally:
        owner.release()
    if args.json:
        print(res.model_dump_json(indent=2))
    else:
        print(res.text or "(nothing relevant)")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .service.transfer import export_memories

    owner = _sole("export", "Its `export-memories` tool exports through the daemon. ")
    try:
        rt = _runtime()
        dirs = [*rt.settings.allowed_for(rt.identity), Path.cwd()]
        res = export_memories(rt.service, rt.identity, dirs, args.output, args.scope, args.category)
        rt.close()
    finally:
        owner.release()
    print(res.model_dump_json())
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from .service.transfer import import_memories

    owner = _Owner("import")
    try:
        if owner.daemon is not None:  # the daemon's rules: the file must be in allowed dirs
            args_ = {"inputPath": str(Path(args.file).resolve()),
                     "overwriteExisting": args.overwrite}  # fmt: skip
            print(json.dumps(owner.call("import-memories", args_), ensure_ascii=False))
            return 0
        rt = _runtime()
        dirs = [*rt.settings.allowed_for(rt.identity), Path(args.file).resolve().parent]
        rt.wait_ready()
        res = import_memories(rt.service, rt.identity, dirs, args.file, args.overwrite)
        rt.close()
    finally:
        owner.release()
    print(res.model_dump_json())
    return 0


def cmd_import_graph(args: argparse.Namespace) -> int:
    """memory.jsonl of the official memory server and/or the lessons fork's lesson.json."""
    owner = _sole(
        "import-graph", "Its `create_entities`, `create_relations` and `create_lesson` tools "
        "write a graph through the daemon. ",
    )  # fmt: skip
    try:
        rt = _runtime()
        rt.wait_ready()
        res = rt.graphs.import_files(rt.identity, args.files, args.scope)
        rt.close()
    finally:
        owner.release()
    print(res.model_dump_json(indent=2 if res.skipped else None))
    return 0


def cmd_export_graph(args: argparse.Namespace) -> int:
    owner = _sole("export-graph", "Its `read_graph` tool reads the graph through the daemon. ")
    try:
        rt = _runtime()
        res = rt.graphs.export_files(rt.identity, args.file, args.lessons, args.scope)
        rt.close()
    finally:
        owner.release()
    print(res.model_dump_json())
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    from .service.maintenance import reindex

    owner = _sole("reindex")
    try:
        return _reindex(args, reindex)
    finally:
        owner.release()


def _reindex(args, reindex) -> int:
    from .service.errors import PatternError

    rt = _runtime(background=False)
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


def cmd_ingest(args: argparse.Namespace) -> int:
    """Ingest a folder's files as searchable chunks; the model loads only if something changed."""
    from ingest.pipeline import IngestReport
    from ingest.progress import ProgressPrinter, summary

    from .service.config import Settings
    from .service.runtime import Runtime
    from .service.workspace import check_root, ingest_workspace, watch_workspace

    settings = Settings.from_env()
    root = check_root(args.path, settings.allowed_dirs, settings.cwd)  # this process = caller
    owner = _Owner("ingest")  # one writer per store: this process, or the daemon that owns it
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


def cmd_stats(args: argparse.Namespace) -> int:
    from .service.maintenance import health, orphan_vectors

    owner = _sole("stats", "Its `pattern_health` tool reports through the daemon. ")
    try:
        rt = _runtime(background=False)  # the orphan count needs the model and the vector index
        res = health(rt.service, rt.identity, rt.model_error, store_wide=True)  # the machine's user
        res.orphanVectors = orphan_vectors(rt.service)
        rt.close()
    finally:
        owner.release()
    print(res.model_dump_json(indent=2))
    return 0


def _show_verify(res) -> None:
    if res.action != "list":
        done = "deleted" if res.deleted else f"revision {res.revision}"
        print(f"{res.action}: {res.memoryId} ({done})")
        for m in res.memories:
            for c in m.citations:
                print(f"  {c.label}: {c.status}")
        return
    print(f"{len(res.memories)} stale of {res.checked} memories with citations")
    for m in res.memories:
        print(f"\n{m.id}  [{m.scope}/{m.category}] revision {m.revision}")
        print("  " + " ".join(m.content.split())[:200])
        for c in m.citations:
            where = f" -> now {c.currentStartLine}-{c.currentEndLine}" if c.currentStartLine else ""
            print(f"  {c.label}: {c.status}{where if c.status != 'fresh' else ''}")
        for d in m.diffs:
            if d.note:
                print(f"  ({d.cited}: {d.note})")
            if d.diff:
                print("\n".join("    " + line for line in d.diff.rstrip("\n").split("\n")))


def cmd_verify(args: argparse.Namespace) -> int:
    """List your memories whose cited code changed (with diffs); confirm, update or forget one."""
    from .service.errors import InvalidInput
    from .service.runtime import Runtime
    from .service.verify import verify

    actions = [a for a in ("confirm", "update", "forget") if getattr(args, a)]
    if len(actions) > 1:
        raise InvalidInput("give one of --confirm, --update, --forget")
    action = actions[0] if actions else "list"
    if action == "update" and not args.content:
        raise InvalidInput("--update needs --content (the corrected text)")
    owner = _Owner("verify")
    try:
        if owner.daemon is not None:
            from .service.verify import VerifyResult

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
        print(res.model_dump_json(indent=2))
    else:
        _show_verify(res)
    return 0


def cmd_compact_changes(args: argparse.Namespace) -> int:
    """Delete old change-stream rows (consumers behind the new horizon get reset_required)."""
    from datetime import timedelta

    from .service.changes import compact
    from .service.runtime import Runtime

    owner = _sole("compact-changes")
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


def cmd_hooks(args: argparse.Namespace) -> int:
    from .hooks import install as hook_install

    if args.action == "status":
        lines = hook_install.status()
    else:
        fn = hook_install.install if args.action == "install" else hook_install.uninstall
        lines = fn("user" if args.user else "project")
    print("\n".join(lines))
    return 0


def cmd_index_sessions(args: argparse.Namespace) -> int:
    from .hooks.session_client import index_sessions

    return index_sessions(args.paths, watch=args.watch, quiet=args.quiet,
                          interval=args.interval)  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    import argparse

    p = argparse.ArgumentParser(prog="pattern-memory", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="MCP over stdio, bridged to the store's daemon")
    s.add_argument(
        "--standalone", action="store_true", help="serve in-process (one process per store)"
    )
    s.set_defaults(fn=cmd_serve)
    dm = sub.add_parser("daemon", help="own the store and serve MCP over HTTP")
    dm.add_argument("--http", metavar="HOST:PORT", help="listen here for remote agents (tokens)")
    dm.add_argument(
        "--allowed-host", action="append", metavar="NAME[:PORT]",
        help="a host name remote clients use (Host/Origin check against DNS rebinding; the "
        "loopback names and the bound address are always allowed); repeatable",
    )  # fmt: skip
    dm.add_argument("--home", help="store folder (default $PATTERN_HOME)")
    dm.add_argument(
        "--store-url",
        metavar="URL",
        help="postgresql://… : PostgreSQL is the canonical store shared by many daemons, this "
        "folder holds the node's replica (default $PATTERN_STORE_URL; unset: SQLite alone)",
    )
    dm.set_defaults(fn=cmd_daemon)
    st = sub.add_parser("stop", help="stop the store's daemon (SIGTERM, graceful)")
    st.add_argument("--home", help="store folder (default $PATTERN_HOME)")
    st.add_argument(
        "--timeout", type=float, default=60, help="seconds to wait for it to stop (default 60)"
    )
    st.set_defaults(fn=cmd_stop)
    ui = sub.add_parser("ui", help="open the web dashboard (starts the daemon if needed)")
    ui.add_argument("--home", help="store folder (default $PATTERN_HOME)")
    ui.add_argument(
        "--no-browser", action="store_true", help="only print the one-time sign-in link"
    )
    ui.set_defaults(fn=cmd_ui)
    tk = sub.add_parser("token", help="bearer tokens for remote agents (each bound to one project)")
    tks = tk.add_subparsers(dest="action", required=True, metavar="{create,revoke,list}")
    tc = tks.add_parser(
        "create", help="print a new token for an agent (shown once, stored hashed)",
        description="A token reaches one project: --project, else the current one "
        "(PATTERN_PROJECT_ID or the working directory's); --any-project lets it choose any "
        "project with the X-Pattern-Project header.",
    )  # fmt: skip
    tc.add_argument("name", nargs="?", metavar="AGENT", help="the agent id (or --agent)")
    tc.add_argument("--agent", help="the agent id")
    tc.add_argument("--project", help="the one project the token reaches (default: current)")
    tc.add_argument(
        "--any-project", action="store_true",
        help="let the token choose any project with the X-Pattern-Project header",
    )  # fmt: skip
    tc.add_argument("--label", help="a note shown by token list")
    tc.add_argument(
        "--reviewer", action="store_true",
        help="the token's agent reviews team proposals (PATTERN_TEAM_REVIEW; review inbox)",
    )  # fmt: skip
    tr = tks.add_parser("revoke", help="revoke an agent's tokens or one token by its prefix")
    tr.add_argument(
        "name", nargs="?", metavar="AGENT|PREFIX",
        help="an agent id (all its tokens) or a token prefix as token list shows it",
    )  # fmt: skip
    tr.add_argument("--agent", help="revoke every token of this agent")
    tr.add_argument("--prefix", help="revoke the token with this prefix")
    tks.add_parser("list", help="every token: prefix, agent, project, state")
    tk.set_defaults(fn=cmd_token)
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
    g = sub.add_parser("ingest", help="index a folder's files (incremental; .gitignore respected)")
    g.add_argument("path", help="the folder to index (inside PATTERN_ALLOWED_DIRS)")
    g.add_argument("--project", help="project id (default: from the environment / cwd)")
    g.add_argument("--watch", action="store_true", help="keep re-indexing as files change")
    g.add_argument("--max-file-kb", type=int, default=None, help="skip larger files (default 512)")
    g.add_argument("--json", action="store_true", help="print the full report as JSON")
    g.add_argument("--quiet", action="store_true", help="no progress output")
    g.set_defaults(fn=cmd_ingest)
    e = sub.add_parser("export", help="export visible memories to JSON")
    e.add_argument(
        "output", nargs="?", help="file to write (default memories-backup-TIMESTAMP.json)"
    )
    e.add_argument("--scope", help="only this scope (private, personal, team, public)")
    e.add_argument("--category", help="only this category")
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
    eg.set_defaults(fn=cmd_export_graph)
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
    cc = sub.add_parser("compact-changes", help="delete old change-stream rows (sets the horizon)")
    cc.add_argument("--before-seq", type=int, help="delete changes with a lower sequence number")
    cc.add_argument("--older-than-days", type=float, default=30.0,
                    help="delete changes older than this (default 30; ignored with --before-seq)")  # fmt: skip
    cc.set_defaults(fn=cmd_compact_changes)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["hook"] and len(argv) > 1 and not argv[1].startswith("-"):
        from .hooks.hookclient import main as hook_main  # the fast path: standard library only

        return hook_main(argv[1:])
    from .service.errors import PatternError

    if argv == ["serve"]:  # what MCP clients start every session: no argparse (~10 ms)
        from types import SimpleNamespace

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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
