"""The owning daemon: exclusive lock, HTTP bearer auth, identity isolation, crash safety."""

from __future__ import annotations

import http.client
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from retrieval.errors import StoreUnavailable
from server.http.auth import TokenStore
from server.http.daemon import StoreLock, read_info
from server.http.daemonfiles import wait_announced


def start_daemon(home: Path, *extra: str, env: dict | None = None) -> subprocess.Popen:
    env = {**os.environ, "PATTERN_HOME": str(home), "PATTERN_EMBEDDER": "hash",
           "PATTERN_PROJECT_ID": "p1", "PATTERN_AGENT_ID": "owner", **(env or {})}  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "server.cli", "daemon", "--home", str(home), *extra],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    wait_announced(home, proc)
    return proc


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def post(info: dict, message: dict, headers: dict) -> tuple[int, dict | None]:
    conn = http.client.HTTPConnection(info["host"], info["port"], timeout=60)
    conn.request("POST", "/mcp", json.dumps(message), {
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        **headers})  # fmt: skip
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, (json.loads(body) if body else None)


def call(info: dict, headers: dict, tool: str, args: dict) -> tuple[int, dict | None]:
    msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
           "params": {"name": tool, "arguments": args}}  # fmt: skip
    return post(info, msg, headers)


def bearer(token: str, project: str = "p1") -> dict:
    return {"Authorization": f"Bearer {token}", "X-Pattern-Project": project}


@pytest.fixture
def daemon(tmp_path):
    procs = []

    def make(*extra, env=None):
        p = start_daemon(tmp_path, *extra, env=env)
        procs.append(p)
        return p, read_info(tmp_path)

    yield make
    for p in procs:
        stop(p)


def test_second_owner_is_refused_with_the_holder_named(tmp_path):
    first = StoreLock(tmp_path)
    first.acquire()
    try:
        with pytest.raises(StoreUnavailable) as err:
            StoreLock(tmp_path).acquire()
        assert f"pid {os.getpid()}" in err.value.message
    finally:
        first.release()
    again = StoreLock(tmp_path)
    again.acquire()  # released locks can be taken again
    again.release()


def test_second_daemon_exits_with_a_clear_message(daemon, tmp_path):
    proc, info = daemon()
    second = subprocess.run(
        [sys.executable, "-m", "server.cli", "daemon", "--home", str(tmp_path)],
        env={**os.environ, "PATTERN_EMBEDDER": "hash"}, capture_output=True, timeout=60,
    )  # fmt: skip
    assert second.returncode == 2
    assert f"pid {proc.pid}" in second.stderr.decode()
    assert read_info(tmp_path)["pid"] == proc.pid  # the owner is untouched


def test_http_tokens(daemon, tmp_path):
    tokens = TokenStore(tmp_path)
    token_a = tokens.create("agent-a", "p1")
    token_b = tokens.create("agent-b", "p1")
    proc, info = daemon()
    remember = {"content": "agent A private note about the billing service", "scope": "private"}

    assert call(info, {}, "remember", remember)[0] == 401  # no token
    assert call(info, bearer("pm_wrong"), "remember", remember)[0] == 401  # wrong token
    status, body = call(info, bearer(token_a), "remember", remember)
    assert status == 200 and not body["result"]["isError"]

    status, body = call(info, bearer(token_b), "recall-context", {})
    assert status == 200
    seen = body["result"]["structuredContent"]
    assert seen["private"] == [] and seen["counts"]["private"] == 0  # B never sees A's private
    status, body = call(info, bearer(token_b), "recall", {"query": "billing service"})
    assert body["result"]["structuredContent"]["items"] == []
    # a token fixes the agent: headers cannot claim another one
    hdr = {**bearer(token_b), "X-Pattern-Agent": "agent-a"}
    status, body = call(info, hdr, "recall-context", {})
    assert body["result"]["structuredContent"]["counts"]["private"] == 0

    status, body = call(info, bearer(token_a), "recall-context", {})
    assert body["result"]["structuredContent"]["counts"]["private"] == 1

    tokens.revoke("agent-a")
    assert call(info, bearer(token_a), "recall-context", {})[0] == 401  # revoked


def cli(home: Path, *argv: str, project: str = "p1") -> subprocess.CompletedProcess:
    env = {**os.environ, "PATTERN_HOME": str(home), "PATTERN_EMBEDDER": "hash",
           "PATTERN_PROJECT_ID": project}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "server.cli", *argv], env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip


def team_note(info: dict, project: str, text: str) -> None:
    """A team memory of ``project``, written through the local bridge's envelope."""
    hdr = {"Authorization": f"Bearer {info['secret']}", "X-Pattern-Project": project,
           "X-Pattern-Agent": "writer"}  # fmt: skip
    status, body = call(info, hdr, "remember", {"content": text, "scope": "team",
                                                 "category": "decisions"})  # fmt: skip
    assert status == 200 and not body["result"]["isError"], body


def team_seen(info: dict, headers: dict) -> tuple[int, list[str] | None]:
    status, body = call(info, headers, "recall-context", {})
    if status != 200:
        return status, None
    return status, [m["content"] for m in body["result"]["structuredContent"]["team"]]


def test_a_token_reaches_only_its_project(daemon, tmp_path):
    """``token create`` binds the token to the CLI's current project; another project's
    header gets 403 and nothing of that project; --any-project tokens choose by header."""
    made = cli(tmp_path, "token", "create", "--agent", "alice", project="p1")
    assert made.returncode == 0, made.stderr
    bound = made.stdout.strip()
    anywhere = cli(tmp_path, "token", "create", "bob", "--any-project").stdout.strip()
    assert "project=p1" in cli(tmp_path, "token", "list").stdout
    proc, info = daemon()
    team_note(info, "p1", "p1 decision: deploy on Fridays")
    team_note(info, "p2", "p2 secret plan: migrate billing to Rust")

    assert team_seen(info, bearer(bound, "p1")) == (200, ["p1 decision: deploy on Fridays"])
    # no header: the token's own project
    assert team_seen(info, {"Authorization": f"Bearer {bound}"})[1] == [
        "p1 decision: deploy on Fridays"
    ]
    status, body = call(info, bearer(bound, "p2"), "recall", {"query": "billing Rust plan"})
    assert status == 403 and body["error"] == "forbidden"
    assert "Rust" not in json.dumps(body)
    assert team_seen(info, bearer(bound, "p2")) == (403, None)
    # a write to the other project is refused as well, and stores nothing
    status, _ = call(info, bearer(bound, "p2"), "remember",
                     {"content": "planted", "scope": "team", "category": "decisions"})  # fmt: skip
    assert status == 403
    assert team_seen(info, bearer(anywhere, "p2")) == (200, ["p2 secret plan: migrate billing to Rust"])  # fmt: skip
    assert team_seen(info, bearer(anywhere, "p1"))[1] == ["p1 decision: deploy on Fridays"]


def test_legacy_tokens_are_bound_to_the_daemons_project(daemon, tmp_path):
    """tokens.json entries from before project binding (project null) reach only the
    daemon's default project (p1 here), and token list says so."""
    tokens = TokenStore(tmp_path)
    token = tokens.create("old-agent", "p1")
    data = json.loads(tokens.path.read_text())
    for entry in data.values():  # as the previous version wrote them
        entry["project"] = None
        del entry["any_project"]
    tokens.path.write_text(json.dumps(data))
    assert "legacy" in cli(tmp_path, "token", "list").stdout
    proc, info = daemon()
    team_note(info, "p2", "p2 only")
    assert team_seen(info, bearer(token, "p1")) == (200, [])
    assert team_seen(info, bearer(token, "p2")) == (403, None)


def test_token_cli_accepts_what_the_readme_shows(tmp_path):
    """``token revoke alice`` (an agent) and ``token revoke PREFIX…`` (as token list prints
    it) both revoke; the revoked token no longer authenticates."""
    first = cli(tmp_path, "token", "create", "--agent", "alice").stdout.strip()
    cli(tmp_path, "token", "create", "--agent", "carol")
    out = cli(tmp_path, "token", "revoke", "alice")
    assert out.returncode == 0 and "alice" in out.stdout, out.stderr
    assert TokenStore(tmp_path).lookup(first) is None
    carol = [line for line in cli(tmp_path, "token", "list").stdout.splitlines() if "carol" in line]
    prefix = carol[0].split()[0]  # "pm_xxxxxxx…"
    assert cli(tmp_path, "token", "revoke", prefix).returncode == 0
    assert all(t["revoked"] for t in TokenStore(tmp_path).list())
    missing = cli(tmp_path, "token", "revoke", "nobody")
    assert missing.returncode == 2 and "not_found" in missing.stderr


def test_sigterm_as_soon_as_daemon_json_appears_drains_cleanly(tmp_path):
    """daemon.json announces the pid only once SIGTERM means "drain and stop": a stop sent
    the moment it appears exits 0 and removes the file (it used to kill the daemon outright
    when it came before uvicorn installed its handlers)."""
    for round_no in range(2):
        home = tmp_path / f"h{round_no}"
        env = {**os.environ, "PATTERN_HOME": str(home), "PATTERN_EMBEDDER": "hash"}
        proc = subprocess.Popen([sys.executable, "-m", "server.cli", "daemon"], env=env,
                                stderr=subprocess.DEVNULL)  # fmt: skip
        deadline = time.monotonic() + 60
        while (read_info(home) or {}).get("pid") != proc.pid:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.001)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        assert read_info(home) is None


@pytest.mark.slow
def test_sigkill_during_bulk_writes_loses_no_acknowledged_write(tmp_path):
    """8 times: write continuously, SIGKILL the daemon at a random moment after its first
    acknowledged write of the round (so every kill lands among writes), restart; every
    acknowledged write is present afterwards and the store passes its integrity check."""
    acked: list[str] = []
    rng = random.Random(7)
    for round_no in range(8):
        proc = start_daemon(tmp_path)
        info = read_info(tmp_path)
        headers = {"Authorization": f"Bearer {info['secret']}", "X-Pattern-Agent": "w",
                   "X-Pattern-Project": "p1"}  # fmt: skip
        done, first = threading.Event(), threading.Event()

        def writer(n=round_no, done=done, first=first, info=info, headers=headers):
            i = 0
            while not done.is_set():
                batch = [{"content": f"round {n} item {i} {j}", "scope": "team"} for j in range(5)]
                try:
                    status, body = call(info, headers, "remember-bulk", {"memories": batch})
                except (OSError, http.client.HTTPException):  # killed mid-answer
                    return
                if status == 200 and not body["result"]["isError"]:
                    acked.extend(body["result"]["structuredContent"]["memoryIds"])
                    first.set()
                i += 1

        t = threading.Thread(target=writer)
        t.start()
        assert first.wait(timeout=60), "no write was acknowledged"
        time.sleep(rng.uniform(0.05, 0.6))
        proc.kill()  # SIGKILL mid-write
        proc.wait()
        done.set()
        t.join(timeout=60)
    proc = start_daemon(tmp_path)  # recovery: outbox replay + integrity check at start-up
    try:
        db = sqlite3.connect(tmp_path / "pattern.sqlite3")
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        present = {r[0] for r in db.execute("SELECT id FROM records")}
        assert len(acked) > 20
        missing = [i for i in acked if i not in present]
        assert missing == []
        assert (
            db.execute(
                "SELECT (SELECT count(*) FROM records) = (SELECT count(*) FROM records_fts)"
            ).fetchone()[0]
            == 1
        )
        db.close()
    finally:
        stop(proc)


def test_bridge_starts_the_daemon_and_survives_its_restart(tmp_path):
    import anyio
    from mcp import Client, StdioServerParameters

    env = {**os.environ, "PATTERN_HOME": str(tmp_path), "PATTERN_EMBEDDER": "hash",
           "PATTERN_PROJECT_ID": "p1", "PATTERN_AGENT_ID": "a1",
           "XDG_CACHE_HOME": str(tmp_path / "cache")}  # fmt: skip
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "server.cli", "serve"], env=env
    )

    async def scenario():
        async with Client(params) as c:
            assert len((await c.list_tools()).tools) >= 15
            r = await c.call_tool("remember", {"content": "before the restart"})
            assert not r.is_error
            first = read_info(tmp_path)["pid"]
            os.kill(first, signal.SIGKILL)  # the daemon dies under the bridge
            r = await c.call_tool("remember", {"content": "after the restart"})
            assert not r.is_error, r.content
            second = read_info(tmp_path)["pid"]
            assert second != first
            r = await c.call_tool("recall-context", {})
            got = sorted(m["content"] for m in r.structured_content["private"])
            assert got == ["after the restart", "before the restart"]
            return second

    pid = anyio.run(scenario)
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while read_info(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert read_info(tmp_path) is None  # clean shutdown removed daemon.json


def test_graph_and_lesson_tools_act_as_the_caller_not_the_daemon(daemon, tmp_path):
    """Through the daemon, the graph tools used the daemon's own identity (project p1, agent
    owner) whatever the caller: agent B of project p2 wrote into p1's team graph."""
    tokens = TokenStore(tmp_path)
    token_b = tokens.create("agent-b", "p2")
    token_c = tokens.create("agent-c", "p1")
    proc, info = daemon()
    entity = {"name": "billing_service", "entityType": "service", "observations": ["owns invoices"]}
    status, body = call(info, bearer(token_b, "p2"), "create_entities", {"entities": [entity]})
    assert status == 200 and not body["result"]["isError"], body
    lesson = {
        "name": "PG_TIMEOUT", "entityType": "lesson", "observations": ["raise the timeout"],
        "errorPattern": {"type": "TimeoutError", "message": "read timed out", "context": "api"},
        "metadata": {"severity": "medium", "environment": {}, "frequency": 1, "successRate": 1.0},
        "verificationSteps": [{"command": "make test", "expectedOutput": "ok",
                               "successIndicators": ["passed"]}],
    }  # fmt: skip
    status, body = call(info, bearer(token_b, "p2"), "create_lesson", {"lesson": lesson})
    assert status == 200 and not body["result"]["isError"], body

    # the daemon's project (p1) sees neither: they are in p2's team graph
    status, body = call(info, bearer(token_c, "p1"), "read_graph", {})
    assert body["result"]["structuredContent"]["entities"] == []
    query = {
        "errorPattern": {"type": "TimeoutError", "message": "read timed out", "context": "api"}
    }
    status, body = call(info, bearer(token_c, "p1"), "find_similar_errors", query)
    assert body["result"]["structuredContent"]["lessons"] == []
    # the caller's project does
    status, body = call(info, bearer(token_b, "p2"), "read_graph", {})
    names = [e["name"] for e in body["result"]["structuredContent"]["entities"]]
    assert "billing_service" in names
    status, body = call(info, bearer(token_b, "p2"), "find_similar_errors", query)
    assert [m["name"] for m in body["result"]["structuredContent"]["lessons"]] == ["PG_TIMEOUT"]


def test_a_bridged_caller_ingests_and_exports_in_its_own_project_folder(
    daemon, tmp_path, tmp_path_factory
):
    """The daemon's cwd is whichever project first started it; a caller from another project
    folder must get its own folder as the default ingest path and allowed directory (it got the
    daemon's), and a remote agent, which has no folder here, must name one."""
    from server.http.auth import envelope_headers
    from server.service.core.identity import Identity

    proj_b = tmp_path_factory.mktemp("proj b é")  # outside the store; percent-encoded
    (proj_b / "notes.md").write_text("# Billing\n\nInvoices are sent by the billing worker.\n")
    proc, info = daemon()
    secret = json.loads((tmp_path / "daemon.json").read_text())["secret"]
    who = Identity(project_id="pb", agent_id="agent-b", root=str(proj_b))
    headers = envelope_headers(who, secret)
    status, body = call(info, headers, "ingest_workspace", {})
    assert status == 200 and not body["result"]["isError"], body
    assert body["result"]["structuredContent"]["files_indexed"] == 1, body
    status, body = call(
        info, headers, "recall", {"query": "who sends invoices", "kinds": ["chunk"]}
    )
    items = body["result"]["structuredContent"]["items"]
    assert items and items[0]["location"].startswith("notes.md:")
    status, body = call(info, headers, "export-memories", {"outputPath": "backup.json"})
    assert not body["result"]["isError"], body
    assert (proj_b / "backup.json").is_file()  # relative to the caller's folder

    token = TokenStore(tmp_path).create("remote-agent", "pb")
    status, body = call(info, bearer(token, "pb"), "ingest_workspace", {})
    assert body["result"]["isError"] and "give a path" in body["result"]["content"][0]["text"]


def test_serve_starts_the_daemon_before_its_own_imports_and_only_once(tmp_path):
    from server.http.daemonfiles import start_early

    env = {**os.environ, "PATTERN_HOME": str(tmp_path), "PATTERN_EMBEDDER": "hash",
           "PATTERN_PROJECT_ID": "p1", "PATTERN_AGENT_ID": "a1"}  # fmt: skip
    assert isinstance(start_early(env), float)
    deadline = time.monotonic() + 60
    while not read_info(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    info = read_info(tmp_path)
    try:
        assert info is not None
        assert start_early(env) is None  # a daemon owns the store: nothing started
        assert read_info(tmp_path)["pid"] == info["pid"]
    finally:
        os.kill(info["pid"], signal.SIGTERM)
        while read_info(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.05)
    assert read_info(tmp_path) is None


def _rows(home: Path) -> tuple[int, int]:
    """(records, change-stream rows) of the store, read without writing."""
    with sqlite3.connect(f"file:{home / 'pattern.sqlite3'}?mode=ro", uri=True) as conn:
        return (conn.execute("SELECT count(*) FROM records").fetchone()[0],
                conn.execute("SELECT count(*) FROM changes").fetchone()[0])  # fmt: skip


def test_cli_commands_go_through_the_daemon_or_refuse(tmp_path, monkeypatch, capsys):
    """While a daemon owns the store no CLI command writes its files: recall, import, verify
    and ingest go through the daemon (its local secret, this shell's identity); the commands
    without a tool (demo, compact-changes, reindex, import-graph, export, stats) refuse."""

    home = tmp_path / "home"
    proj = tmp_path / "proj"
    (proj / ".git").mkdir(parents=True)
    (proj / "README.md").write_text(
        "# Shop\n\nThe checkout service retries card payments three times.\n\n"
        "Refunds are processed nightly by the ledger job.\n", encoding="utf-8"
    )  # fmt: skip
    home.mkdir()
    proc = start_daemon(home)
    try:
        _cli_under_a_daemon(home, proj, read_info(home), monkeypatch, capsys)
    finally:
        stop(proc)


def _cli_under_a_daemon(home: Path, proj: Path, info: dict, monkeypatch, capsys) -> None:
    from server.cli import main

    for k, v in {"PATTERN_HOME": str(home), "PATTERN_EMBEDDER": "hash",
                 "PATTERN_PROJECT_ID": "p1", "PATTERN_AGENT_ID": "shell"}.items():  # fmt: skip
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("PATTERN_ALLOWED_DIRS", raising=False)
    monkeypatch.chdir(proj)
    before = _rows(home)
    for argv in (["demo"], ["compact-changes", "--before-seq", "1000"], ["reindex"],
                 ["import-graph", str(proj / "graph.jsonl")], ["export"], ["stats"]):  # fmt: skip
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "owns store" in err and "second writer" in err and "pattern-memory stop" in err
        assert _rows(home) == before, argv
    # through the daemon: ingest, import, recall, verify
    assert main(["ingest", str(proj)]) == 0
    assert "1 indexed" in capsys.readouterr().out
    backup = proj / "backup.json"
    backup.write_text(json.dumps({"version": 1, "memories": [{
        "id": "00000000-0000-4000-8000-000000000001", "agentId": "x", "projectId": "y",
        "scope": "private", "category": "longterm", "content": "Invoices go out on the 1st.",
        "metadata": {}, "createdAt": "2030-01-01T00:00:00Z", "updatedAt": "2030-01-01T00:00:00Z",
    }]}), encoding="utf-8")  # fmt: skip
    assert main(["import", str(backup)]) == 0
    assert '"imported":1' in capsys.readouterr().out.replace(" ", "")
    assert main(["recall", "when do invoices go out"]) == 0
    assert "Invoices go out on the 1st." in capsys.readouterr().out
    assert main(["verify"]) == 0
    assert "stale of" in capsys.readouterr().out
    # the daemon wrote them, as the shell's agent
    status, body = call(info, envelope_for(info, "shell"), "recall",
                        {"query": "invoices go out"})  # fmt: skip
    assert status == 200 and "Invoices go out" in body["result"]["structuredContent"]["text"]
    # a watch would outlive the daemon's answer: refused, not run beside it
    assert main(["ingest", str(proj), "--watch"]) == 2
    assert "owns store" in capsys.readouterr().err


def envelope_for(info: dict, agent: str) -> dict:
    from server.http.auth import envelope_headers
    from server.service.core.identity import Identity

    return envelope_headers(Identity(project_id="p1", agent_id=agent), info["secret"])


def test_waiting_for_a_daemon_that_exits_or_never_announces_itself(tmp_path):
    died = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit('no store here')"],
                            stderr=subprocess.PIPE)  # fmt: skip
    with pytest.raises(RuntimeError, match="exited with 1 before it served: no store here"):
        wait_announced(tmp_path, died)
    silent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with pytest.raises(RuntimeError, match="did not start within 0.5 s"):
        wait_announced(tmp_path, silent, timeout=0.5)
    assert silent.wait(timeout=10) != 0  # killed, not left running
