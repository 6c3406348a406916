"""Many agents, the same records: concurrent edits merge, none is lost.

    python benchmarks/concurrency.py --same-record [--agents 8 --edits 50]
        [--store-url pgserver|URL] [--nodes 2] [--embedder hash] [--json OUT]

A agent processes each run the official MCP client over stdio against their own
``pattern-memory serve`` bridge; the bridges share one daemon (SQLite), or, with
``--store-url``, ``--nodes`` daemons on their own folders that share one PostgreSQL database
(agents split round-robin). The agents run as sessions of one identity, because only a memory's
creator may update it; the graph is the team's.

Every agent makes E edits, alternating between 5 shared memories and 5 shared entities:

- **memory**: read the memory (``recall-context``: its text and revision), wait 0-30 ms (an
  agent thinking), change the value in *its own* sentence (each memory has one sentence per
  agent: edits of different agents touch different sentences), ``update-memory`` with the
  revision it read. Another agent's write in between makes it stale: the server merges it
  (``merged``) or refuses it (``conflicts``; the agent reads again and retries, ``retries``).
- **entity**: read it (``open_nodes``: observations and revision), then add a new observation,
  or (every fourth entity edit) delete one of its own observations with ``expectedRevision`` =
  the revision it read.

Then each node's store is read: ``lost`` counts an agent's last acknowledged value missing from
its sentence, and an acknowledged observation missing (unless its own writer deleted it);
``nodes_equal`` says every node holds the same texts and observations. Targets: ``lost`` = 0,
``conflicts`` <= 10 % of the memory edits.
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.cluster import ROOT, daemon_pid, env_for, start_daemon, stop_daemon
from benchmarks.harness.report import write_json

MEMORIES = 5
ENTITIES = 5
AGENT_ID = "editor"


def sentence(k: int, value: str) -> str:
    return f"Sentence {k} is owned by agent a{k} and holds {value}."


def initial_text(m: int, agents: int) -> str:
    return f"Shared memory {m}. " + " ".join(sentence(k, f"a{k}v0") for k in range(agents))


def find(obj, key: str, value):
    """The first dict in a JSON tree whose ``key`` is ``value``."""
    if isinstance(obj, dict):
        if obj.get(key) == value:
            return obj
        obj = list(obj.values())
    if isinstance(obj, list):
        for item in obj:
            hit = find(item, key, value)
            if hit is not None:
                return hit
    return None


async def agent_run(home: str, url: str, name: str, edits: int, embedder: str, ids: list) -> dict:
    from mcp import Client, StdioServerParameters

    a = int(name[1:])
    rnd = random.Random(a)
    params = StdioServerParameters(command=sys.executable, args=["-m", "server.cli", "serve"],
                                   env=env_for(Path(home), url, embedder, AGENT_ID),
                                   cwd=str(ROOT))  # fmt: skip
    st = {"acknowledged": 0, "merged": 0, "conflicts": 0, "retries": 0, "gave_up": 0,
          "memory_edits": 0, "entity_edits": 0, "deletes": 0, "kept_unseen": 0,
          "last": {}, "live": [], "deleted": [], "errors": []}  # fmt: skip

    async def call(tool: str, args: dict):
        res = await client.call_tool(tool, args)
        return (
            res.is_error,
            res.structured_content,
            "".join(getattr(c, "text", "") for c in res.content),
        )

    async with Client(params) as client:
        await client.list_tools()
        n = 0  # this agent's value counter
        for i in range(edits):
            if i % 2 == 0:
                mid = ids[(i // 2) % MEMORIES]
                st["memory_edits"] += 1
                n += 1
                value = f"a{a}v{n}"
                for attempt in range(6):
                    _, ctx, _ = await call("recall-context", {"scopes": ["team"], "limit": 50})
                    mem = find(ctx, "id", mid)
                    new = re.sub(rf"holds a{a}v\d+\.", f"holds {value}.", mem["content"])
                    time.sleep(rnd.uniform(0, 0.03))
                    err, out, text = await call("update-memory", {
                        "memoryId": mid, "content": new, "expectedRevision": mem["revision"]})  # fmt: skip
                    if not err:
                        st["acknowledged"] += 1
                        st["merged"] += bool(out.get("merged"))
                        st["last"][mid] = value
                        break
                    if "[conflict]" not in text:
                        st["errors"].append(text[:300])
                        break
                    st["conflicts"] += 1
                    if attempt < 5:
                        st["retries"] += 1
                else:
                    st["gave_up"] += 1
            else:
                ent = f"Shared entity {(i // 2) % ENTITIES}"
                st["entity_edits"] += 1
                _, graph, _ = await call("open_nodes", {"names": [ent]})
                node = graph["entities"][0]
                mine = [o for o in st["live"] if o in node["observations"]]
                if i % 8 == 7 and mine:
                    drop = rnd.choice(mine)
                    err, out, text = await call("delete_observations", {"deletions": [{
                        "entityName": ent, "observations": [drop],
                        "expectedRevision": node["revision"]}]})  # fmt: skip
                    if not err:
                        st["acknowledged"] += 1
                        st["deletes"] += out["deleted"]
                        st["kept_unseen"] += sum(len(k["observations"]) for k in out["kept"])
                        if out["deleted"]:
                            st["live"].remove(drop)
                            st["deleted"].append([ent, drop])
                    else:
                        st["errors"].append(text[:300])
                    continue
                fact = f"{name} observed fact {i} of {ent}"
                err, out, text = await call("add_observations", {"observations": [
                    {"entityName": ent, "contents": [fact]}]})  # fmt: skip
                if not err:
                    st["acknowledged"] += 1
                    st["live"].append(fact)
                    st["live_where"] = {**st.get("live_where", {}), fact: ent}
                else:
                    st["errors"].append(text[:300])
    return st


def worker_main(args) -> int:
    import anyio

    ids = json.loads(args.ids)
    out = anyio.run(agent_run, args.home, args.url, args.name, args.edits, args.embedder, ids)
    Path(args.out).write_text(json.dumps(out))
    return 0


async def setup(home: Path, url: str, embedder: str, agents: int) -> list[str]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "server.cli", "serve"],
                                   env=env_for(home, url, embedder, AGENT_ID), cwd=str(ROOT))  # fmt: skip
    ids = []
    async with Client(params) as client:
        for m in range(MEMORIES):
            res = await client.call_tool("remember", {
                "content": initial_text(m, agents), "scope": "team", "category": "decisions"})  # fmt: skip
            ids.append(res.structured_content["memoryId"])
        await client.call_tool("create_entities", {"entities": [
            {"name": f"Shared entity {e}", "entityType": "component", "observations": []}
            for e in range(ENTITIES)]})  # fmt: skip
    return ids


def read_node(home: Path, ids: list[str]) -> dict:
    db = sqlite3.connect(f"file:{home}/pattern.sqlite3?mode=ro", uri=True)
    texts = dict(db.execute(
        f"SELECT id, content FROM records WHERE id IN ({','.join('?' * len(ids))})", ids
    ).fetchall())  # fmt: skip
    obs = sorted(db.execute(
        "SELECT entity_name, content FROM records WHERE kind='observation'").fetchall())  # fmt: skip
    db.close()
    return {"texts": texts, "observations": [list(o) for o in obs]}


def run(args, url: str, nodes: int) -> dict:
    import anyio

    work = Path(tempfile.mkdtemp(prefix="pm-merge-race-"))
    homes = [work / f"node{n + 1}" for n in range(nodes)]
    for h in homes:
        start_daemon(h, url, args.embedder)
    if None in [daemon_pid(h) for h in homes]:
        raise SystemExit(f"a daemon did not start: see {work}/node*/daemon.log")
    try:
        ids = anyio.run(setup, homes[0], url, args.embedder, args.agents)
        names = [f"a{a}" for a in range(args.agents)]
        t0 = time.time()
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.concurrency",
                    "--same-record",
                    "--worker",
                    "--home",
                    str(homes[a % nodes]),
                    "--url",
                    url,
                    "--name",
                    name,
                    "--edits",
                    str(args.edits),
                    "--embedder",
                    args.embedder,
                    "--ids",
                    json.dumps(ids),
                    "--out",
                    str(work / f"{name}.json"),
                ],
                cwd=str(ROOT),
            )  # fmt: skip
            for a, name in enumerate(names)
        ]
        codes = [p.wait() for p in procs]
        wall = time.time() - t0
        time.sleep(2)  # replicas apply the last log entries
        stats = [
            json.loads((work / f"{n}.json").read_text())
            for n in names
            if (work / f"{n}.json").exists()
        ]
        views = [read_node(h, ids) for h in homes]
    finally:
        for h in homes:
            stop_daemon(h)
    final = views[0]
    have_obs = {tuple(o) for o in final["observations"]}
    lost = 0
    for s in stats:
        for mid, value in s["last"].items():
            lost += f"holds {value}." not in final["texts"].get(mid, "")
        for fact in s["live"]:
            lost += (s["live_where"][fact], fact) not in have_obs
    resurrected = sum(tuple(d) in have_obs for s in stats for d in s["deleted"])
    total = {k: sum(s[k] for s in stats) for k in (
        "acknowledged", "merged", "conflicts", "retries", "gave_up", "memory_edits",
        "entity_edits", "deletes", "kept_unseen")}  # fmt: skip
    return {
        "backend": "sqlite" if not url else f"postgresql x{nodes} nodes",
        "agents": args.agents, "edits_per_agent": args.edits,
        "edits": args.agents * args.edits, **total, "lost": lost,
        "resurrected": resurrected,
        "conflict_rate": round(total["conflicts"] / max(1, total["memory_edits"]), 3),
        "nodes_equal": all(v == final for v in views),
        "errors": [e for s in stats for e in s["errors"]][:5],
        "agent_exit_codes": codes, "wall_s": round(wall, 1),
    }  # fmt: skip


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--same-record", action="store_true")
    ap.add_argument("--agents", type=int, default=8)
    ap.add_argument("--edits", type=int, default=50)
    ap.add_argument("--embedder", default="hash")
    ap.add_argument("--store-url", help="pgserver or an admin URL: PostgreSQL nodes")
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--json", dest="json_out")
    for hidden in ("--home", "--url", "--name", "--ids", "--out"):
        ap.add_argument(hidden, help=argparse.SUPPRESS)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker_main(args)
    if args.store_url:
        from benchmarks.harness.pg import postgres

        with postgres(args.store_url) as fresh:
            result = run(args, fresh("pm_merge_race"), args.nodes)
    else:
        result = run(args, "", 1)
    keys = ("backend", "edits", "acknowledged", "merged", "conflicts", "conflict_rate", "retries",
            "gave_up", "lost", "resurrected", "deletes", "kept_unseen", "nodes_equal", "wall_s")  # fmt: skip
    for key in keys:
        print(f"{key:<16}{result[key]!s:>24}")
    if args.json_out:
        write_json(args.json_out, result)
    ok = result["lost"] == 0 and result["conflict_rate"] <= 0.10 and result["nodes_equal"]
    return 0 if ok and not result["errors"] else 1
