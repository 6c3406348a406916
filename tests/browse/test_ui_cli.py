"""``pattern-memory ui``: starts the store's daemon when none runs, prints a one-time sign-in
link that works once; the daemon stops promptly even while a dashboard stream is open."""

from __future__ import annotations

import http.client
import os
import re
import signal
import subprocess
import sys
import time
from urllib.parse import urlsplit

from server.http.daemon import read_info


def ui_command(home) -> tuple[str, str]:
    env = {**os.environ, "PATTERN_HOME": str(home), "PATTERN_EMBEDDER": "hash",
           "PATTERN_PROJECT_ID": "p1", "PATTERN_AGENT_ID": "owner"}  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-m", "server.cli", "ui", "--no-browser"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    link = re.search(r"^(http://\S+/ui/login\?t=\S+)$", out.stdout, re.M)
    assert link, out.stdout
    return out.stdout, link.group(1)


def get(url: str, headers: dict | None = None) -> http.client.HTTPResponse:
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    conn.request("GET", u.path + (f"?{u.query}" if u.query else ""), headers=headers or {})
    resp = conn.getresponse()
    resp.read()
    conn.close()
    return resp


def test_ui_starts_the_daemon_and_signs_in_once(tmp_path):
    out, link = ui_command(tmp_path)
    info = read_info(tmp_path)
    try:
        assert info and f":{info['port']}/ui/" in out
        first = get(link)
        assert first.status == 303 and first.getheader("location") == "/ui/"
        cookie = first.getheader("set-cookie").split(";")[0]
        page = get(link.split("/ui/")[0] + "/ui/health", {"Cookie": cookie})
        assert page.status == 200
        assert get(link).status == 403  # once
        _, second = ui_command(tmp_path)  # the running daemon is reused
        assert read_info(tmp_path)["pid"] == info["pid"] and second != link
        assert get(second).status == 303
    finally:
        os.kill(info["pid"], signal.SIGTERM)
        deadline = time.monotonic() + 60
        while read_info(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.05)


def test_daemon_stops_promptly_with_a_live_stream_open(tmp_path):
    _, link = ui_command(tmp_path)
    info = read_info(tmp_path)
    first = get(link)
    cookie = first.getheader("set-cookie").split(";")[0]
    conn = http.client.HTTPConnection(info["host"], info["port"], timeout=30)
    conn.request("GET", "/ui/activity/stream", headers={"Cookie": cookie})
    stream = conn.getresponse()
    assert stream.status == 200 and stream.getheader("content-type").startswith("text/event-stream")
    assert stream.readline().startswith(b"retry:")
    t0 = time.monotonic()
    os.kill(info["pid"], signal.SIGTERM)
    while read_info(tmp_path) and time.monotonic() - t0 < 60:
        time.sleep(0.05)
    took = time.monotonic() - t0
    conn.close()
    assert read_info(tmp_path) is None
    assert took < 10, f"the open event stream held the shutdown for {took:.1f} s"
