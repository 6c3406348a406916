"""Many daemons, one PostgreSQL: nothing acknowledged lost or duplicated, cross-node visibility,
a node killed mid-run, a new node that ranks like the others.

    python benchmarks/cluster.py --nodes 2 --agents 8 --writes 200 [--kill] [--json OUT]
        [--store-url URL]  (default: a temporary pgserver)  [--embedder hash|sentence-transformers]

Writes: N daemons (``pattern-memory daemon --store-url``), each on its own store folder as if
on its own host, share one PostgreSQL database. A agents, split across them round-robin, each
run the official MCP client over stdio against their own ``pattern-memory serve`` bridge and
make W ``remember`` calls (team scope, one idempotency key per write; an error is retried with
the same key). A watcher per node polls that node's replica (its SQLite file, read-only) and
notes when each memory appears. ``--kill``: when half the writes are in, node 1's daemon gets
``kill -9``; its agents' bridges start it again and carry on.

Then every node's replica and PostgreSQL are counted: ``expected`` (A x W), ``present_per_node``
(acknowledged writes found on each node), ``duplicated`` (records beyond one per write, on any
node or in PostgreSQL), ``lost_acknowledged`` (acknowledged writes missing anywhere),
``visible_p95_ms`` (acknowledgement -> present on every other node), ``writes_per_s``
(acknowledged writes / wall time), ``killed``.

Recall: node 1 (in-process engine, the real model) stores the SciFact corpus in a fresh
database (``recall_indexed_s``, beside ``recall_bulk_sqlite_s``: the same ``Engine.add`` bulk
path on one node with SQLite alone, in the same run; the vectors are made once before either is
timed); a third node starts on an empty folder, catches up (snapshot + log, embedding nothing:
the vectors come from PostgreSQL) until its own vector index answers
(``new_node_catch_up_s``), and must return the same ids in the same order as node 1 for 50
SciFact queries (``recall_equal``; ``recall_same_scores``: the queries whose scores are equal
too; ``recall_other_vector_candidates``: of the others, those whose two vector indexes proposed
other candidates; ``new_node_embedded`` counts the texts it embedded: 0).

Baseline, same run: the same agents and writes against one daemon with SQLite alone
(``baseline_sqlite``; ``--no-baseline`` skips it).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.harness.report import write_json  # noqa: E402

PROJECT = "bench"


def env_for(home: Path, url: str, embedder: str, agent: str = "bench-daemon") -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PATTERN_HOME": str(home),
            "PATTERN_STORE_URL": url, "PATTERN_EMBEDDER": embedder,
            "PATTERN_PROJECT_ID": PROJECT, "PATTERN_AGENT_ID": agent,
            "HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}  # fmt: skip


def content_of(agent: str, i: int) -> str:
    return f"{agent} write {i}: cache key {i * 7919 % 1000} for build step {i % 37}"


# ---------------------------------------------------------------------- agents (subprocesses)
async def agent_run(home: str, url: str, name: str, writes: int, embedder: str) -> dict:
    from mcp import Client, StdioServerParameters

    env = env_for(Path(home), url, embedder, name)
    acks: list[list] = []  # [i, memory id, ack time, attempts]
    errors: list[str] = []
    params = StdioServerParameters(command=sys.executable, args=["-m", "server.cli", "serve"],
                                   env=env, cwd=str(ROOT))  # fmt: skip
    async with Client(params) as client:
        await client.list_tools()
        t_start = time.time()
        for i in range(writes):
            args = {"content": content_of(name, i), "scope": "team", "category": "learnings",
                    "idempotencyKey": f"{name}-{i}"}  # fmt: skip
            for attempt in range(1, 21):
                try:
                    res = await client.call_tool("remember", args)
                    if not res.is_error:
                        mid = json.loads(res.content[0].text)["memoryId"]
                        acks.append([i, mid, time.time(), attempt])
                        break
                    errors.append(res.content[0].text[:200])
                except Exception as exc:  # the bridge lost its daemon: retry, same key
                    errors.append(f"{type(exc).__name__}: {exc}"[:200])
                time.sleep(0.2 * attempt)
        health = await client.call_tool("pattern_health", {})
        replica = (json.loads(health.content[0].text) or {}).get("replica") or {}
    return {"acks": acks, "errors": errors, "t_start": t_start, "replica": replica}


def worker_main(args) -> int:
    import anyio

    out = anyio.run(agent_run, args.home, args.url, args.name, args.writes, args.embedder)
    Path(args.out).write_text(json.dumps(out))
    return 0


# ---------------------------------------------------------------------- watchers
class Watcher(threading.Thread):
    """Polls one node's replica for new memories: {content: first time seen}."""

    def __init__(self, home: Path) -> None:
        super().__init__(daemon=True)
        self.db = home / "pattern.sqlite3"
        self.seen: dict[str, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        last, conn = 0, None
        while not self.stop.is_set():
            try:
                if conn is None:
                    conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=5)
                rows = conn.execute(
                    "SELECT rowid, content FROM records WHERE rowid > ? AND kind = 'memory' "
                    "ORDER BY rowid", (last,)
                ).fetchall()  # fmt: skip
            except sqlite3.Error:
                conn = None
                time.sleep(0.05)
                continue
            now = time.time()
            for rowid, content in rows:
                self.seen.setdefault(content, now)
                last = max(last, rowid)
            time.sleep(0.005)


# ---------------------------------------------------------------------- daemons
def start_daemon(home: Path, url: str, embedder: str) -> subprocess.Popen:
    home.mkdir(parents=True, exist_ok=True)
    log = open(home / "daemon.log", "ab")  # noqa: SIM115 - handed to the child
    return subprocess.Popen(
        [sys.executable, "-m", "server.cli", "daemon", "--home", str(home), "--store-url", url],
        env=env_for(home, url, embedder), stdout=log, stderr=log, cwd=str(ROOT),
        start_new_session=True,
    )  # fmt: skip


def daemon_pid(home: Path, timeout: float = 120.0, not_pid: int | None = None) -> int | None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            info = json.loads((home / "daemon.json").read_text())
            if info["pid"] != not_pid:
                with urllib.request.urlopen(f"http://{info['host']}:{info['port']}/health",
                                            timeout=2) as r:  # fmt: skip
                    if r.status == 200:
                        return int(info["pid"])
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.1)
    return None


def stop_daemon(home: Path) -> None:
    subprocess.run([sys.executable, "-m", "server.cli", "stop", "--home", str(home)],
                   env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                   timeout=120, check=False)  # fmt: skip


def pct(values: list[float], q: int) -> float:
    if len(values) < 2:
        return round(values[0], 1) if values else 0.0
    return round(statistics.quantiles(values, n=100)[q - 1], 1)


def write_phase(args, url: str, work: Path, nodes: int | None = None, kill: bool | None = None):
    """The write load on ``nodes`` daemons sharing ``url`` ("" = one SQLite store alone, the
    baseline)."""
    nodes = args.nodes if nodes is None else nodes
    kill = args.kill if kill is None else kill
    homes = [work / f"node{n + 1}" for n in range(nodes)]
    for h in homes:
        start_daemon(h, url, args.embedder)
    pids = [daemon_pid(h) for h in homes]
    if None in pids:
        raise SystemExit(f"a daemon did not start: see {work}/node*/daemon.log")
    watchers = [Watcher(h) for h in homes]
    for w in watchers:
        w.start()
    names = [f"a{a}" for a in range(args.agents)]
    node_of = {name: a % nodes for a, name in enumerate(names)}
    outs = {name: work / f"{name}.json" for name in names}
    t0 = time.time()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--worker",
                "--home",
                str(homes[node_of[n]]),
                "--url",
                url,
                "--name",
                n,
                "--writes",
                str(args.writes),
                "--embedder",
                args.embedder,
                "--out",
                str(outs[n]),
            ],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        for n in names
    ]
    expected = args.agents * args.writes
    killed = False
    if kill:
        while len(watchers[0].seen) < expected // 2 and any(p.poll() is None for p in procs):
            time.sleep(0.02)
        old = pids[0]
        os.kill(old, signal.SIGKILL)
        print(f"kill -9 node1 daemon (pid {old}) after {len(watchers[0].seen)} writes", flush=True)
        new = daemon_pid(homes[0], timeout=120, not_pid=old)  # its agents' bridges restart it
        killed = new is not None
        print(f"node1 daemon back as pid {new}", flush=True)
    codes = [p.wait() for p in procs]
    results = {n: json.loads(outs[n].read_text()) for n in names if outs[n].exists()}
    # from the first call (handshakes and daemon start-up left out) to the last acknowledgement
    first = min((r["t_start"] for r in results.values()), default=t0)
    last = max((a[2] for r in results.values() for a in r["acks"]), default=first + 1)
    wall = last - first
    serial = {f"node{node_of[n] + 1}": (r["replica"].get("lock_held_ms_p50"),
                                        r["replica"].get("lock_held_ms_p95"))
              for n, r in results.items()}  # fmt: skip
    acked = {
        content_of(n, i): (node_of[n], t) for n, r in results.items() for i, _, t, _ in r["acks"]
    }
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(set(acked) <= set(w.seen) for w in watchers):
        time.sleep(0.1)
    for w in watchers:
        w.stop.set()
    visible = [
        max(0.0, (w.seen[c] - t) * 1000)
        for c, (node, t) in acked.items()
        for j, w in enumerate(watchers)
        if j != node and c in w.seen
    ]
    for h in homes:
        stop_daemon(h)
    per_node, dup_node = [], []
    for h in homes:
        db = sqlite3.connect(f"file:{h}/pattern.sqlite3?mode=ro", uri=True)
        rows = db.execute(
            "SELECT content, count(*) FROM records WHERE kind='memory' GROUP BY content"
        ).fetchall()
        db.close()
        have = {c for c, _ in rows}
        per_node.append(len(set(acked) & have))
        dup_node.append(sum(n - 1 for _, n in rows if n > 1))
    canon = {c: 1 for c in acked}  # SQLite alone: the node is the store
    if url:
        import psycopg

        with psycopg.connect(url) as pg:
            canon = dict(pg.execute(
                "SELECT content, count(*) FROM records WHERE kind='memory' GROUP BY content"
            ).fetchall())  # fmt: skip
    missing = {c for c in acked if c not in canon} | {
        c for h_i, _h in enumerate(homes) for c in acked if c not in watchers[h_i].seen
    }
    errors = [e for r in results.values() for e in r["errors"]]
    return {
        "expected": expected,
        "present_per_node": per_node,
        "duplicated": max([sum(n - 1 for n in canon.values() if n > 1), *dup_node]),
        "lost_acknowledged": len(missing),
        "acknowledged": len(acked),
        "visible_p50_ms": pct(visible, 50),
        "visible_p95_ms": pct(visible, 95),
        "writes_per_s": round(len(acked) / wall, 1),
        "killed": killed,
        "lock_held_ms_p50_p95": serial,
        "retried_calls": sum(1 for r in results.values() for a in r["acks"] if a[3] > 1),
        "tool_errors": errors[:5],
        "agent_exit_codes": codes,
        "wall_s": round(wall, 1),
    }


# ---------------------------------------------------------------------- recall equality
def recall_phase(args, url: str, work: Path) -> dict:
    from benchmarks.harness.data import load_beir
    from benchmarks.harness.embed_cache import make_embedder
    from benchmarks.harness.sets import beir_record
    from retrieval.engine import Engine
    from retrieval.records import RecordFilter

    folder = Path(args.scifact)
    corpus, queries, qrels, _ = load_beir(folder, "train")
    records = [beir_record(d, "beir-scifact", "context") for d in corpus]
    records = records[: args.recall_docs or None]
    bucket = records[0].bucket
    qs = [queries[q] for q in list(qrels)[: args.queries] if q in queries]
    embedder = make_embedder(True)

    class Counting:
        def __init__(self, inner) -> None:
            self.inner, self.documents = inner, 0
            self.model_id, self.dimension = inner.model_id, inner.dimension
            self.max_words = getattr(inner, "max_words", 150)

        def embed_query(self, text):
            return self.inner.embed_query(text)

        def embed_documents(self, texts):
            self.documents += len(texts)
            return self.inner.embed_documents(texts)

    # the vectors are made once before anything is timed (the cache): both timings below are
    # the store's work, the same texts embedded either way
    solo = Engine(work / "recall-solo", embedder)
    try:
        solo.vectors_for(records, embedder)
        t0 = time.time()
        solo.add([r.model_copy(deep=True) for r in records])  # one node, SQLite alone: bulk
        solo.wait_vectors(600)
        bulk_s = time.time() - t0
    finally:
        solo.close()

    t0 = time.time()
    one = Engine(work / "recall-node1", embedder, store_url=url)
    try:
        one.add(records)
        one.wait_vectors(600)
        indexed_s = time.time() - t0
        one.cluster.compact_log(before_seq=one.cluster.head() // 2)  # part of the log is gone
        t1 = time.time()
        counting = Counting(embedder)
        three = Engine(work / "recall-node3", counting, store_url=url)
        try:
            # caught up: its replica at the log's head and its own vector index answering
            for node in (one, three):
                node.wait_vectors(300)
                if node.vector_search_way() == "index":  # (a small store has no index)
                    node.vectors.wait_ready(300)
            caught_up_s = time.time() - t1
            f = RecordFilter(buckets=[bucket])
            same = same_scores = 0
            diff = 0.0  # the largest score difference of one record between the two nodes
            tails = 0  # of the queries whose scores differ: those whose 100 vector candidates do
            modes: set[str] = set()
            for q in qs:
                a = [(h.record.id, h.score) for h in one.search(q, f, 10)]
                hits = three.search(q, f, 10)
                b = [(h.record.id, h.score) for h in hits]
                modes.update(h.explanation.mode for h in hits)
                same += [r for r, _ in a] == [r for r, _ in b]
                same_scores += a == b
                if a != b:  # do the two approximate indexes propose other candidates?
                    qvec = embedder.embed_query(q)
                    va, vb = (
                        {r for r, _ in n.ranker.vector_candidates(qvec, f, 100, [bucket]) or []}
                        for n in (one, three)
                    )
                    tails += va != vb
                theirs = dict(b)
                diff = max([diff, *(abs(s - theirs[r]) for r, s in a if r in theirs)])
            new_node_embedded = counting.documents
        finally:
            three.close()
    finally:
        one.close()
    return {
        "recall_equal": same == len(qs),
        "recall_queries": len(qs),
        "recall_same_order": same,
        "recall_same_scores": same_scores,
        "recall_score_diff_max": float(f"{diff:.3g}"),
        "recall_other_vector_candidates": tails,
        "recall_modes": sorted(modes),
        "new_node_embedded": new_node_embedded,
        "recall_docs": len(records),
        "recall_indexed_s": round(indexed_s, 1),
        "recall_bulk_sqlite_s": round(bulk_s, 1),
        "recall_indexed_ratio": round(indexed_s / max(bulk_s, 1e-9), 2),
        "new_node_catch_up_s": round(caught_up_s, 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--agents", type=int, default=8)
    ap.add_argument("--writes", type=int, default=200)
    ap.add_argument("--kill", action="store_true", help="kill -9 node 1's daemon mid-run")
    ap.add_argument("--json", dest="json_out")
    ap.add_argument("--store-url", help="an admin URL of a PostgreSQL server (default: pgserver)")
    ap.add_argument("--embedder", default="hash", help="the daemons' embedder for the writes")
    ap.add_argument("--scifact", default="/work/shared/data/scifact")
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--recall-docs", type=int, default=0, help="the corpus' first N (0: all)")
    ap.add_argument("--skip-recall", action="store_true")
    ap.add_argument("--no-baseline", action="store_true",
                    help="skip the same load on one daemon with SQLite alone")  # fmt: skip
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    for hidden in ("--home", "--url", "--name", "--out"):
        ap.add_argument(hidden, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        args.writes = int(args.writes)
        return worker_main(args)

    from benchmarks.harness.pg import postgres

    load = os.getloadavg()
    result: dict = {}
    with (
        tempfile.TemporaryDirectory(prefix="pm-cluster-") as tmp,
        postgres(args.store_url) as fresh,
    ):
        work = Path(tmp)
        result.update(write_phase(args, fresh("pm_cluster_writes"), work / "pg"))
        if not args.no_baseline:  # the same load on one daemon with SQLite alone, same run
            base = write_phase(args, "", work / "sqlite", nodes=1, kill=False)
            result["baseline_sqlite"] = {k: base[k] for k in (
                "expected", "present_per_node", "duplicated", "lost_acknowledged",
                "writes_per_s", "wall_s")}  # fmt: skip
        if not args.skip_recall:
            result.update(recall_phase(args, fresh("pm_cluster_recall"), work))
        else:
            result["recall_equal"] = None
    result["loadavg"] = [round(x, 2) for x in load]
    result["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    result.update(nodes=args.nodes, agents=args.agents, writes_per_agent=args.writes,
                  embedder=args.embedder)  # fmt: skip
    print(f"{'metric':<32}{'value':>24}")
    for key in ("expected", "present_per_node", "duplicated", "lost_acknowledged",
                "visible_p50_ms", "visible_p95_ms", "writes_per_s", "killed", "retried_calls",
                "recall_equal", "recall_same_order", "recall_same_scores",
                "recall_score_diff_max", "recall_other_vector_candidates", "new_node_embedded",
                "recall_indexed_s", "recall_bulk_sqlite_s", "recall_indexed_ratio",
                "new_node_catch_up_s", "wall_s", "baseline_sqlite", "loadavg",
                "loadavg_end"):  # fmt: skip
        if key in result:
            print(f"{key:<32}{result[key]!s:>24}")
    if args.json_out:
        write_json(args.json_out, result)
    ok = (
        result["lost_acknowledged"] == 0
        and result["duplicated"] == 0
        and all(n == result["expected"] for n in result["present_per_node"])
        and result["recall_equal"] is not False
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
