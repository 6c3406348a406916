"""The official MCP conformance suite against ``pattern-memory daemon --http``.

    python benchmarks/conformance.py [--json OUT] [--all]

Installs ``@modelcontextprotocol/conformance`` (0.1.12: the last version that runs on Node 20)
with npm into ``.bench-cache/conformance`` (git-ignored) when it is not there yet, starts a
daemon on a free loopback port over a temporary store (hash embedder: protocol, not relevance),
creates a bearer token, and puts a small local proxy in front that adds
``Authorization: Bearer <token>`` and passes every other header as it came (``Host`` and
``Origin`` included, so the DNS-rebinding scenario reaches the daemon's own check). Then it runs
the scenarios that apply to this server (:data:`SCENARIOS`; the others exercise fixture tools
such as ``test_simple_text`` that only the suite's reference server has) one by one, prints a
table and writes JSON: ``{"version", "scenarios": {name: {"passed", "failed", "warnings",
"checks"}}, "passed_all"}``. ``--all`` also runs the rest of the active suite, reported apart.
Exit status 1 when a required scenario fails.
"""

from __future__ import annotations

import argparse
import http.client
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.harness.report import write_json  # noqa: E402
from server.http.auth import TokenStore  # noqa: E402
from server.http.daemonfiles import wait_announced  # noqa: E402

VERSION = "0.1.12"
CACHE = ROOT / ".bench-cache" / "conformance"
SCENARIOS = [
    "server-initialize",
    "ping",
    "tools-list",
    "resources-list",
    "prompts-list",
    "logging-set-level",
    "dns-rebinding-protection",
]
HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
       "proxy-authorization", "proxy-connection"}  # fmt: skip


def conformance_bin() -> Path:
    exe = CACHE / "node_modules" / ".bin" / "conformance"
    pkg = CACHE / "node_modules" / "@modelcontextprotocol" / "conformance" / "package.json"
    if not exe.exists() or json.loads(pkg.read_text())["version"] != VERSION:
        if shutil.which("npm") is None:
            sys.exit("npm is needed to install @modelcontextprotocol/conformance")
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--prefix", str(CACHE), "--no-audit", "--no-fund",
             f"@modelcontextprotocol/conformance@{VERSION}"],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
    return exe


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def token_proxy(upstream: tuple[str, int], token: str) -> http.server.ThreadingHTTPServer:
    """A loopback HTTP proxy to ``upstream`` that adds the bearer token; Host and Origin pass
    unchanged. Responses are relayed whole (the daemon answers JSON, not streams)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet
            pass

        def relay(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else None
            conn = http.client.HTTPConnection(*upstream, timeout=120)
            conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                if name.lower() not in HOP and name.lower() != "authorization":
                    conn.putheader(name, value)
            conn.putheader("Authorization", f"Bearer {token}")
            conn.endheaders(body)
            resp = conn.getresponse()
            self.send_response(resp.status, resp.reason)
            for name, value in resp.getheaders():
                if name.lower() not in HOP and name.lower() != "content-length":
                    self.send_header(name, value)
            if resp.getheader("content-type", "").startswith("text/event-stream"):
                self.stream(resp)  # a server-sent event stream: pass it on as it comes
            else:
                data = resp.read()
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            conn.close()

        def stream(self, resp) -> None:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                while chunk := resp.read1(65536):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            except (http.client.IncompleteRead, OSError):  # either side hung up: stop
                self.close_connection = True

        do_GET = do_POST = do_DELETE = relay

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def run_scenario(exe: Path, url: str, name: str, out_dir: Path) -> dict:
    target = out_dir / name
    proc = subprocess.run(
        [str(exe), "server", "--url", url, "--scenario", name, "-o", str(target)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    checks = []
    for path in sorted(target.rglob("checks.json")):
        checks += json.loads(path.read_text())
    status = [c.get("status") for c in checks]
    return {
        "passed": status.count("SUCCESS"),
        "failed": status.count("FAILURE"),
        "warnings": status.count("WARNING"),
        "exit_code": proc.returncode,
        "checks": [{k: c.get(k) for k in ("id", "status", "errorMessage")} for c in checks],
    }


def all_scenarios(exe: Path) -> list[str]:
    listing = subprocess.run([str(exe), "list"], capture_output=True, text=True).stdout
    names, in_server = [], False
    for line in listing.splitlines():
        if line.startswith("Server scenarios"):
            in_server = True
        elif line.startswith("Client scenarios"):
            in_server = False
        elif in_server and line.strip().startswith("- "):
            names.append(line.strip()[2:])
    return names


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", metavar="OUT", help="write the results here")
    ap.add_argument("--all", action="store_true", help="also run the rest of the active suite")
    args = ap.parse_args()
    exe = conformance_bin()
    home = Path(tempfile.mkdtemp(prefix="pm-conformance-"))
    port = free_port()
    env = {**os.environ, "PATTERN_HOME": str(home), "PATTERN_EMBEDDER": "hash",
           "PATTERN_PROJECT_ID": "conformance", "PYTHONPATH": str(ROOT)}  # fmt: skip
    token = TokenStore(home).create("conformance", "conformance")
    daemon = subprocess.Popen(
        [sys.executable, "-m", "server.cli", "daemon", "--http", f"127.0.0.1:{port}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT,
    )  # fmt: skip
    proxy = None
    try:
        try:
            wait_announced(home, daemon, timeout=120)
        except RuntimeError as exc:
            sys.exit(str(exc))
        proxy = token_proxy(("127.0.0.1", port), token)
        url = f"http://127.0.0.1:{proxy.server_address[1]}/mcp"
        out_dir = home / "results"
        results = {name: run_scenario(exe, url, name, out_dir) for name in SCENARIOS}
        others = {}
        if args.all:
            for name in all_scenarios(exe):
                if name not in results:
                    others[name] = run_scenario(exe, url, name, out_dir)
    finally:
        if proxy is not None:
            proxy.shutdown()
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
        shutil.rmtree(home, ignore_errors=True)
    ok = all(r["failed"] == 0 and r["passed"] > 0 for r in results.values())
    print(f"@modelcontextprotocol/conformance {VERSION} against daemon --http (token proxy)")
    print(f"{'scenario':32} {'passed':>6} {'failed':>6} {'warn':>5}")
    for title, group in (
        ("required", results),
        ("rest of the active suite (mostly its fixture tools, resources, prompts)", others),
    ):
        if group and title != "required":
            print(f"-- {title}")
        for name, r in group.items():
            print(f"{name:32} {r['passed']:6} {r['failed']:6} {r['warnings']:5}")
            for c in r["checks"]:
                if c["status"] == "FAILURE" and group is results:
                    print(f"    {c['id']}: {c['errorMessage']}")
    print(f"all required scenarios pass: {ok}")
    if args.json:
        doc = {"version": VERSION, "scenarios": results, "passed_all": ok}
        if others:
            doc["other_scenarios"] = others
        write_json(args.json, doc)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
