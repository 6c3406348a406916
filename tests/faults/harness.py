"""A real daemon for the fault-injection tests: started as ``pattern-memory daemon`` on a store
folder (the deterministic hash embedder: no model to load), called over its HTTP face with the
local secret (as the stdio bridge does), stopped with SIGTERM. Every call has a deadline: a
call that hangs fails its test instead of hanging the suite."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from server.http.daemonfiles import read_info, wait_announced

ROOT = Path(__file__).resolve().parents[2]  # the checkout under test (its daemon's code)
SHIM = Path(__file__).resolve().parent / "shim"  # sitecustomize: injected clock and disk faults
PROJECT, AGENT = "p1", "owner"


class Daemon:
    def __init__(self, home: Path, env: dict[str, str] | None = None) -> None:
        self.home = Path(home)
        self.env = {
            **os.environ,
            "PATTERN_HOME": str(self.home),
            "PATTERN_EMBEDDER": "hash",
            "PATTERN_PROJECT_ID": PROJECT,
            "PATTERN_AGENT_ID": AGENT,
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(SHIM), str(ROOT), os.environ.get("PYTHONPATH")) if p
            ),
            **(env or {}),
        }
        self.proc: subprocess.Popen | None = None
        self.info: dict = {}

    # ------------------------------------------------------------------ life
    def start(self, timeout: float = 60.0) -> Daemon:
        """Start the daemon and wait until it serves; its stderr goes to :attr:`log` (a pipe
        nobody reads would stall a daemon that logs much)."""
        with open(self.log, "ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "server.cli", "daemon", "--home", str(self.home)],
                env=self.env, stdout=subprocess.DEVNULL, stderr=err, cwd=str(ROOT),
            )  # fmt: skip
        try:
            self.info = wait_announced(self.home, self.proc, timeout)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}: {self.stderr()}") from None
        return self

    @property
    def log(self) -> Path:
        return self.home.with_name(self.home.name + ".stderr")

    def stderr(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def run_to_exit(self, timeout: float = 60.0) -> tuple[int, str]:
        """Start a daemon expected to refuse the store: (exit status, stderr)."""
        done = subprocess.run(
            [sys.executable, "-m", "server.cli", "daemon", "--home", str(self.home)],
            env=self.env, capture_output=True, text=True, timeout=timeout, cwd=str(ROOT),
        )  # fmt: skip
        return done.returncode, done.stderr

    def stop(self, timeout: float = 60.0) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout)
        self.proc = None
        return code

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def vector_child(self, timeout: float = 60.0) -> int:
        """The pid of the daemon's vector index process (once it runs): the living child of the
        spawner the daemon started (retrieval/vector/vector_spawner.py)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for spawner in children(self.proc.pid):
                if (
                    b"retrieval.vector.vector_spawner"
                    not in Path(f"/proc/{spawner}/cmdline").read_bytes()
                ):
                    continue
                living = [pid for pid in children(spawner) if _alive(pid)]
                if living:
                    return living[-1]
            time.sleep(0.05)
        raise AssertionError("the daemon has no vector index process")

    # ------------------------------------------------------------------ calls
    def post(self, path: str, payload: dict, timeout: float = 30.0) -> tuple[int, dict | None]:
        info = read_info(self.home) or self.info
        headers = {"Authorization": f"Bearer {info['secret']}", "X-Pattern-Project": PROJECT,
                   "X-Pattern-Agent": AGENT, "Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream"}  # fmt: skip
        conn = http.client.HTTPConnection(info["host"], info["port"], timeout=timeout)
        try:
            conn.request("POST", path, json.dumps(payload), headers)
            resp = conn.getresponse()
            body = resp.read()
        finally:
            conn.close()
        return resp.status, (json.loads(body) if body else None)

    def call(self, tool: str, args: dict, timeout: float = 30.0) -> dict:
        """A tool's result (``isError``, ``structuredContent``, ``content``)."""
        msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": tool, "arguments": args}}  # fmt: skip
        status, body = self.post("/mcp", msg, timeout)
        assert status == 200, (status, body)
        return body["result"]

    def ok(self, tool: str, args: dict, timeout: float = 30.0) -> dict:
        result = self.call(tool, args, timeout)
        assert not result["isError"], result["content"]
        return result["structuredContent"]

    def error(self, tool: str, args: dict, timeout: float = 30.0) -> str:
        result = self.call(tool, args, timeout)
        assert result["isError"], result
        return result["content"][0]["text"]

    def health(self) -> dict:
        return self.ok("pattern_health", {})

    def remember(self, text: str, **args) -> str:
        """Store a team memory; returns its id (the acknowledgement)."""
        args = {"scope": "team", "category": "decisions", **args}
        return self.ok("remember", {"content": text, **args})["memoryId"]

    def recall(self, query: str, deadline: float, **args) -> dict:
        """``recall``, asserting it answered within ``deadline`` seconds."""
        t0 = time.monotonic()
        out = self.ok("recall", {"query": query, **args}, timeout=deadline + 5)
        took = time.monotonic() - t0
        assert took < deadline, f"recall took {took:.2f} s (deadline {deadline} s)"
        return out

    def visible_ids(self) -> set[str]:
        """Every memory id the caller sees (recall-context's team section, paged whole)."""
        seen = self.ok("recall-context", {"limit": 100})
        return {m["id"] for m in seen["team"]}


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        out += [int(c) for c in text]
    return out


def wait_for(cond, timeout: float, what: str):
    """``cond()``'s first truthy value within ``timeout`` seconds, else a failure naming
    ``what``."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout} s: {what}")


def issues_naming(health: dict, *words: str) -> list[str]:
    """The health issues that contain every one of ``words``."""
    return [i for i in health["issues"] if all(w in i for w in words)]
