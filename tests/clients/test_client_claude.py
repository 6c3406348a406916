"""The Claude Code plugin (``.claude-plugin/``, ``packaging/claude/``): its manifests validate
against the published schemas (SchemaStore's, vendored in tests/fixtures/clients/claude/, see
SOURCES.md there), its hooks are our events, and its launchers never break Claude Code: a hook
with nothing installed prints nothing and exits 0 at once; with the plugin's environment it is
the hook client; the server runs this checkout's ``serve`` from that environment."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import jsonschema
import pytest

from server.hooks.clients import claude
from server.hooks.clients.spec import HANDLERS

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "clients" / "claude"
PLUGIN = ROOT / ".claude-plugin" / "plugin.json"
MARKETPLACE = ROOT / ".claude-plugin" / "marketplace.json"
PACKAGING = ROOT / "packaging" / "claude"
SH = shutil.which("sh") or "/bin/sh"


def schema(name: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(json.loads((FIXTURES / name).read_text()))


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- manifests
def test_the_plugin_manifest_validates_and_names_its_hooks_and_server():
    manifest = schema("claude-code-plugin-manifest.schema.json")
    plugin = load(PLUGIN)
    manifest.validate(plugin)
    assert plugin["name"] == "pattern-memory"
    hooks_path = ROOT / plugin["hooks"]
    assert plugin["hooks"].startswith("./") and hooks_path.is_file()
    server = plugin["mcpServers"]["pattern-memory"]
    assert server["command"] == "sh"
    assert server["args"] == ["${CLAUDE_PLUGIN_ROOT}/packaging/claude/serve.sh"]
    # the validator does refuse what the schema forbids
    assert list(manifest.iter_errors({**plugin, "hooks": "hooks.yaml"}))
    assert list(manifest.iter_errors({**plugin, "hooks": {"OnPrompt": []}}))


def test_the_marketplace_lists_the_plugin_at_the_repository_root():
    market = load(MARKETPLACE)
    schema("claude-code-marketplace.schema.json").validate(market)
    (entry,) = market["plugins"]
    assert entry["name"] == load(PLUGIN)["name"] and entry["source"] == "./"


def test_the_plugin_hooks_are_our_events_through_the_launcher():
    doc = load(PACKAGING / "hooks.json")
    assert doc == claude.plugin_hooks()  # regenerate from claude.py after changing a binding
    schema("claude-code-plugin-manifest.schema.json").validate({"name": "x", "hooks": doc["hooks"]})
    assert set(doc["hooks"]) == set(HANDLERS) == set(claude.MATCHERS)
    for event, groups in doc["hooks"].items():
        (group,) = groups
        assert group.get("matcher") == claude.MATCHERS[event]
        (hook,) = group["hooks"]
        assert hook["command"] == f'sh "${{CLAUDE_PLUGIN_ROOT}}/packaging/claude/hook.sh" {event}'
        assert 0 < hook["timeout"] <= 60


# --------------------------------------------------------------------------- the hook launcher
def run_hook(
    env: dict, event: str = "UserPromptSubmit", stdin: bytes = b"{}"
) -> tuple[bytes, float]:
    t0 = time.monotonic()
    proc = subprocess.run([SH, str(PACKAGING / "hook.sh"), event], input=stdin, env=env,
                          capture_output=True, timeout=30)  # fmt: skip
    took = time.monotonic() - t0
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    return proc.stdout, took


@pytest.mark.parametrize("path", ["", "/nonexistent"])
def test_a_cold_hook_prints_nothing_and_exits_0_at_once(tmp_path, path):
    """Nothing installed yet, no Python or uv on PATH: nothing printed, exit 0, no process."""
    env = {"PATH": path, "CLAUDE_PLUGIN_DATA": str(tmp_path / "data"), "HOME": str(tmp_path)}
    out, took = run_hook(env, stdin=json.dumps({"prompt": "hello"}).encode())
    assert out == b"" and took < 1.0
    assert not (tmp_path / "data").exists()  # the hook creates nothing
    out, _ = run_hook({"PATH": path, "HOME": str(tmp_path)})  # no CLAUDE_PLUGIN_DATA either
    assert out == b""


class _Daemon(http.server.BaseHTTPRequestHandler):
    seen: list = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Daemon.seen.append((self.path, body))
        ctx = {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                      "additionalContext": "remembered"}}  # fmt: skip
        answer = json.dumps({"output": ctx, "note": "", "injected": []}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *a):
        pass


def test_a_warm_hook_is_the_hook_client_with_the_plugins_python(tmp_path):
    data = tmp_path / "data"
    (data / "venv" / "bin").mkdir(parents=True)
    (data / "venv" / "bin" / "python").symlink_to(sys.executable)
    server = http.server.HTTPServer(("127.0.0.1", 0), _Daemon)
    threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    home = tmp_path / "store"
    home.mkdir()
    (home / "daemon.json").write_text(json.dumps({"host": "127.0.0.1", "port": server.server_port,
                                                  "secret": "s", "pid": os.getpid()}))  # fmt: skip
    env = {"PATH": "", "CLAUDE_PLUGIN_DATA": str(data), "PATTERN_HOME": str(home)}
    try:
        out, _ = run_hook(
            env, stdin=json.dumps({"prompt": "what did we decide?", "cwd": str(tmp_path)}).encode()
        )
    finally:
        server.shutdown()
    assert json.loads(out)["hookSpecificOutput"]["additionalContext"] == "remembered"
    path, body = _Daemon.seen[-1]
    assert path == "/hooks/UserPromptSubmit" and body["client"] == "claude"
    assert body["input"]["prompt"] == "what did we decide?"


# --------------------------------------------------------------------------- the server launcher
def _tools(tmp_path: Path, names: tuple[str, ...]) -> str:
    """A PATH holding only ``names`` (no uv, no python3)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in names:
        found = shutil.which(name)
        if found:
            (bin_dir / name).symlink_to(found)
    return str(bin_dir)


BASIC = ("sh", "cmp", "cp", "mkdir", "rm", "rmdir", "nohup", "sleep", "date")


def test_serve_runs_this_checkouts_serve_from_the_plugins_environment(tmp_path):
    data = tmp_path / "data"
    (data / "venv" / "bin").mkdir(parents=True)
    stub = data / "venv" / "bin" / "python"
    stub.write_text('#!/bin/sh\necho "args: $*"\necho "path: $PYTHONPATH"\n')
    stub.chmod(0o755)
    shutil.copy(ROOT / "pyproject.toml", data / "pyproject.toml")  # installed already
    env = {"PATH": _tools(tmp_path, BASIC), "CLAUDE_PLUGIN_DATA": str(data)}
    proc = subprocess.run([SH, str(PACKAGING / "serve.sh")], env=env, capture_output=True,
                          text=True, timeout=30)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "args: -P -m server.cli serve" in proc.stdout
    assert f"path: {ROOT}" in proc.stdout and proc.stderr == ""


def test_serve_without_uv_or_python_says_why_and_leaves_no_lock(tmp_path):
    data = tmp_path / "data"
    env = {"PATH": _tools(tmp_path, BASIC), "CLAUDE_PLUGIN_DATA": str(data)}
    proc = subprocess.run([SH, str(PACKAGING / "serve.sh")], env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 1 and "the install failed" in proc.stderr
    log = (data / "install.log").read_text()
    assert "neither uv nor python3" in log and "install failed" in log
    assert not (data / "install.lock").exists() and not (data / "pyproject.toml").exists()
    out, _ = run_hook({"PATH": env["PATH"], "CLAUDE_PLUGIN_DATA": str(data)})
    assert out == b""  # hooks stay silent meanwhile
