"""The commands that run or manage the store's processes: ``serve`` (the stdio bridge),
``daemon``, ``stop``, ``ui`` (the dashboard's sign-in link) and ``token`` (remote agents'
bearer tokens).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

# numpy's BLAS in a process that serves searches: one thread, the caller's. A search's products
# are small (a query against a few hundred records' windows); on a shared machine BLAS threads
# waiting on each other cost more than the product (docs/benchmarks.md, hook latency). Set
# before numpy loads; a user's own setting is kept.
SERVING_ENV = {"OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# How long a thread that runs Python keeps the GIL from one that asks for it back (CPython's
# default is 5 ms). A search hands the GIL over at every SQLite statement, every row a cursor
# returns and every model pass; while another thread of the server runs Python (a bulk write,
# an import, the session indexer), each of those hand-overs waited up to the interval: a recall
# of 2,000 records took 1.8 s instead of 11 ms (docs/benchmarks.md, "Recall beside Python").
SWITCH_INTERVAL_S = 0.0005


def serving_threads() -> None:
    """:data:`SERVING_ENV` where the environment does not say otherwise (before numpy loads),
    and the interpreter's :data:`SWITCH_INTERVAL_S`."""
    for name, value in SERVING_ENV.items():
        os.environ.setdefault(name, value)
    sys.setswitchinterval(SWITCH_INTERVAL_S)


def cmd_serve(args: argparse.Namespace) -> int:
    if args.standalone:
        serving_threads()
        from server.service.core.config import Settings

        from ..http.daemon import StoreLock
        from ..mcp.app import create_server

        lock = StoreLock(Settings.from_env().home, "pattern-memory serve --standalone")
        lock.acquire()  # one owner per store: a second standalone server is refused
        try:
            create_server().run("stdio")
        finally:
            lock.release()
        return 0
    from ..http.daemonfiles import start_early

    spawned_at = start_early(dict(os.environ))  # its start runs beside the bridge's
    from ..http.bridge import run_bridge

    return run_bridge(spawned_at=spawned_at)


def cmd_daemon(args: argparse.Namespace) -> int:
    serving_threads()
    from ..http.daemon import run_daemon

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

    from server.service.core.config import Settings

    from ..http.daemon import read_info

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

    from server.service.core.config import Settings

    from ..http.bridge import DaemonLink
    from ..ui.logins import LINK_TTL, base_url, login_url

    home = Path(args.home) if args.home else Settings.from_env().home
    info = DaemonLink(home, {}, dict(os.environ)).connect()  # started if none runs
    url = login_url(info)
    print(f"pattern-memory dashboard: {base_url(info)}/ui/ (store {home})")
    print(f"one-time sign-in link (valid {LINK_TTL} s, once):\n{url}", flush=True)
    if not args.no_browser and not webbrowser.open(url):
        print("could not open a browser: open the link above", file=sys.stderr)
    return 0


def cmd_token(args: argparse.Namespace) -> int:
    from server.service.core.bearer_tokens import TokenStore
    from server.service.core.config import Settings
    from server.service.core.errors import InvalidInput

    from ..http.auth import binding

    settings = Settings.from_env()
    tokens = TokenStore(settings.home, settings.store_url)
    if args.action == "create":
        if args.agent and args.name and args.agent != args.name:
            raise InvalidInput(f"two agents given: {args.name!r} and --agent {args.agent!r}")
        project = args.project
        if project is None and not args.any_project:
            from server.service.core.identity import identity_from_env

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


def register(sub) -> None:
    """Add this group's commands to the ``pattern-memory`` parser's subparsers."""
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
