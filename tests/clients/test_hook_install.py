"""``pattern-memory hooks install | uninstall | status`` on settings files that already hold the
user's own hooks (the settings layout of https://code.claude.com/docs/en/hooks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from server.hooks import install as hook_install

USER_SETTINGS = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm test:*)"]},
    "hooks": {
        "PostToolUse": [
            {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "prettier --write"}]}
        ],
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "~/bin/add-date.sh"}]}],
        "Notification": [{"hooks": [{"type": "command", "command": "notify-send claude"}]}],
    },
}
USER_MCP = {"mcpServers": {"github": {"command": "gh-mcp", "args": []}}}


def cli(cwd, *args, home=None):
    env = {**os.environ, "HOME": str(home or cwd)}
    env.pop("CLAUDE_CONFIG_DIR", None)
    proc = subprocess.run([sys.executable, "-m", "server.cli", "hooks", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture
def project(tmp_path):
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text(json.dumps(USER_SETTINGS, indent=2))
    (tmp_path / ".mcp.json").write_text(json.dumps(USER_MCP))
    return tmp_path


def load(path):
    return json.loads(path.read_text())


def test_install_uninstall_round_trip_keeps_the_users_hooks(project):
    settings = project / ".claude" / "settings.json"
    original = settings.read_text()
    out = cli(project, "install", "--project")
    assert "hooks written" in out and "MCP server added" in out
    data = load(settings)
    assert data["model"] == "opus" and data["permissions"] == USER_SETTINGS["permissions"]
    hooks = data["hooks"]
    for event in hook_install.EVENTS:
        ours = [g for g in hooks[event] if all(hook_install.is_ours(h) for h in g["hooks"])]
        assert len(ours) == 1, event
        cmd = ours[0]["hooks"][0]["command"]
        assert cmd.endswith(f"hookclient.py {event}") and " -S " in cmd
    assert hooks["PostToolUse"][0] == USER_SETTINGS["hooks"]["PostToolUse"][0]  # theirs first
    assert [g.get("matcher") for g in hooks["PostToolUse"]] == ["Edit|Write", "Bash"]
    assert hooks["UserPromptSubmit"][0] == USER_SETTINGS["hooks"]["UserPromptSubmit"][0]
    assert "matcher" not in hooks["UserPromptSubmit"][1]
    assert hooks["Notification"] == USER_SETTINGS["hooks"]["Notification"]
    mcp = load(project / ".mcp.json")
    assert mcp["mcpServers"]["github"] == USER_MCP["mcpServers"]["github"]
    assert mcp["mcpServers"]["pattern-memory"]["args"][-1] == "serve"
    backups = sorted(p.name for p in (project / ".claude").glob("settings.json.bak-*"))
    assert len(backups) == 1
    assert (project / ".claude" / backups[0]).read_text() == original

    installed = settings.read_text()
    assert "already installed" in cli(project, "install")  # idempotent: nothing rewritten
    assert settings.read_text() == installed
    assert len(list((project / ".claude").glob("settings.json.bak-*"))) == 1

    status = cli(project, "status")
    assert "project:" in status and "UserPromptSubmit" in status and "MCP server" in status

    out = cli(project, "uninstall", "--project")
    assert "hooks removed" in out and "MCP server removed" in out
    assert load(settings) == USER_SETTINGS
    assert load(project / ".mcp.json") == USER_MCP
    assert "no pattern-memory hooks" in cli(project, "uninstall")


def test_install_into_an_empty_project_and_user_scope(tmp_path):
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude.json").write_text(json.dumps({"numStartups": 7, "projects": {}}))
    proj = tmp_path / "proj"
    proj.mkdir()
    cli(proj, "install", "--user", home=home)
    user = load(home / ".claude" / "settings.json")
    assert set(user["hooks"]) == set(hook_install.EVENTS)
    state = load(home / ".claude.json")
    assert state["numStartups"] == 7 and "pattern-memory" in state["mcpServers"]
    assert not (proj / ".claude").exists()  # --user touches nothing in the project
    cli(proj, "uninstall", "--user", home=home)
    assert not (home / ".claude" / "settings.json").exists()  # we created it: gone again
    assert load(home / ".claude.json") == {"numStartups": 7, "projects": {}}


def test_a_hand_edited_server_entry_is_kept(project):
    cli(project, "install")
    mcp = load(project / ".mcp.json")
    mcp["mcpServers"]["pattern-memory"]["env"] = {"PATTERN_PROJECT_ID": "shop"}
    (project / ".mcp.json").write_text(json.dumps(mcp))
    assert "changed by hand: kept" in cli(project, "uninstall")
    assert load(project / ".mcp.json")["mcpServers"]["pattern-memory"]["env"]


def test_a_broken_settings_file_is_not_touched(project):
    settings = project / ".claude" / "settings.json"
    settings.write_text("[1, 2]")
    env = {**os.environ, "HOME": str(project)}
    proc = subprocess.run([sys.executable, "-m", "server.cli", "hooks", "install"], cwd=project,
                          env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 2 and "error [invalid_input]" in proc.stderr
    assert "not touching it" in proc.stderr and "Traceback" not in proc.stderr
    assert settings.read_text() == "[1, 2]"


def test_uninstall_removes_an_event_an_earlier_version_bound():
    """Hooks of ours under an event this version no longer binds go too, the event with them;
    the user's own hooks and an event the user left empty stay."""
    from server.hooks.clients.config_files import without_groups

    def ours(h):
        return isinstance(h, dict) and h.get("command") == "ours"

    doc = {
        "hooks": {
            "OldEvent": [{"matcher": "", "hooks": [{"type": "command", "command": "ours"}]}],
            "Stop": [{"hooks": [{"type": "command", "command": "ours"},
                                {"type": "command", "command": "theirs"}]}],
            "Empty": [],
        }
    }  # fmt: skip
    out = without_groups(doc, ours, events=["Stop", "SessionStart"])
    assert out == {
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "theirs"}]}], "Empty": []}
    }
