"""The agent-client framework: the registry of clients, the generic installer over any client's
files (backups, idempotence, the user's entries kept, byte-for-byte uninstall; JSON and TOML),
the hook client's ``--client`` and the daemon's route translating through a client's spec."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval.errors import InvalidInput
from server.hooks import clients
from server.hooks import install as inst
from server.hooks.clients import config_files as cf
from server.hooks.clients.spec import HANDLERS, Binding, ClientSpec, ConfigFile, Installer

USER_SETTINGS = {
    "model": "opus",
    "hooks": {
        "PostToolUse": [
            {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "prettier --write"}]}
        ],
        "Notification": [{"hooks": [{"type": "command", "command": "notify-send claude"}]}],
    },
}


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A temporary HOME and project folder (the working directory)."""
    h, proj = tmp_path / "home", tmp_path / "proj"
    h.mkdir()
    proj.mkdir()
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.chdir(proj)
    return h, proj


# --------------------------------------------------------------------------- registry
def test_the_registry_holds_claude_and_every_module_that_exists_loads():
    assert "claude" in clients.CLIENTS and clients.get(None) is clients.CLIENTS["claude"]
    assert clients.BROKEN == {}, clients.BROKEN  # a client module that does not import
    assert set(clients.MODULES) == set(clients.NAMES)
    here = Path(clients.__file__).parent
    for name in clients.NAMES:
        assert (name in clients.CLIENTS) == (here / f"{name}.py").exists(), name
    for name, spec in clients.CLIENTS.items():
        assert spec.name == name and spec.title and spec.bindings
        assert all(b.handler in HANDLERS for b in spec.bindings)
        assert spec.installer.files and all(f.kind in ("hooks", "server", "setting")
                                            for f in spec.installer.files)  # fmt: skip
    from server.cli.hook_commands import CLIENT_NAMES

    assert CLIENT_NAMES == clients.NAMES


def test_an_unknown_client_is_a_clear_error():
    with pytest.raises(InvalidInput, match="unknown client 'nope'.*claude"):
        clients.get("nope")


def test_a_missing_module_is_skipped_and_a_broken_one_named(monkeypatch):
    def missing():
        raise ModuleNotFoundError("no module", name="server.hooks.clients.nosuch")

    def broken():
        raise SyntaxError("half written")

    monkeypatch.setattr(clients, "NAMES", ("claude", "nosuch", "broken"))
    monkeypatch.setattr(
        clients, "MODULES", {**clients.MODULES, "nosuch": missing, "broken": broken}
    )
    found, broken_ones = clients._load()
    assert list(found) == ["claude"] and list(broken_ones) == ["broken"]
    assert "half written" in broken_ones["broken"]


def test_a_spec_refuses_a_handler_we_do_not_have():
    with pytest.raises(ValueError, match="unknown handler"):
        ClientSpec(name="x", title="X", bindings=(Binding("a", "OnWhatever"),),
                   to_input=lambda e, d: None, to_output=lambda e, t: None,
                   installer=Installer(files=()), detect=lambda: False)  # fmt: skip


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                         lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=12), c, max_size=4),
                         max_leaves=20),
       pick=st.integers(0, 10**6))  # fmt: skip
def test_every_clients_to_input_reads_any_json_object_without_raising(data, pick):
    """The daemon's route calls each client's ``to_input`` on outside JSON."""
    for spec in clients.CLIENTS.values():
        events = sorted(spec.events)
        event = events[pick % len(events)]
        doc = data if isinstance(data, dict) else {"value": data}
        for given_doc in (doc, {**doc, "hook_event_name": event}):
            out = spec.to_input(event, given_doc)
            assert out is None or (out[0] in HANDLERS and isinstance(out[1], dict))
            if out is not None:
                assert spec.to_output(event, "") is None or isinstance(
                    spec.to_output(event, ""), dict
                )


# --------------------------------------------------------------------------- claude through the generic installer
def test_claude_install_is_idempotent_keeps_the_users_hooks_and_uninstalls_byte_for_byte(home):
    _, proj = home
    settings_path = proj / ".claude" / "settings.json"
    settings_path.parent.mkdir()
    original = json.dumps(USER_SETTINGS, indent=4)  # the user's style: 4 spaces, no final newline
    settings_path.write_text(original)
    lines = inst.install("project", client="claude")
    assert any(line.startswith("hooks written") and "backup" in line for line in lines)
    data = json.loads(settings_path.read_text())
    assert settings_path.read_text().startswith('{\n    "model"')  # written in the file's style
    assert data["hooks"]["PostToolUse"][0] == USER_SETTINGS["hooks"]["PostToolUse"][0]
    assert data["hooks"]["Notification"] == USER_SETTINGS["hooks"]["Notification"]
    cmd = data["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
    assert (
        cmd.endswith("hookclient.py UserPromptSubmit") and " -S " in cmd and "--client" not in cmd
    )
    assert json.loads((proj / ".mcp.json").read_text())["mcpServers"]["pattern-memory"]
    installed = settings_path.read_text()
    assert "already installed" in inst.install("project", client="claude")[0]
    assert settings_path.read_text() == installed
    assert len(cf.backups(settings_path)) == 1
    assert cf.backups(settings_path)[0].read_text() == original

    status = "\n".join(inst.status(client="claude"))
    assert "project:" in status and "SessionStart" in status and "MCP server in" in status
    out = inst.uninstall("project", client="claude")
    assert any("hooks removed" in line for line in out)
    assert settings_path.read_text() == original  # byte for byte
    assert not (proj / ".mcp.json").exists()  # install created it: gone again
    assert "no pattern-memory hooks" in inst.uninstall("project", client="claude")[0]


def test_claude_user_scope_keeps_claude_json_and_follows_claude_config_dir(home, monkeypatch):
    h, proj = home
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(h / "cc"))
    (h / ".claude.json").write_text('{"numStartups": 7}\n')
    inst.install("user", client="claude")
    assert set(json.loads((h / "cc" / "settings.json").read_text())["hooks"]) == set(HANDLERS)
    assert json.loads((h / ".claude.json").read_text())["numStartups"] == 7
    assert not (proj / ".claude").exists()
    inst.uninstall("user", client="claude")
    assert not (h / "cc" / "settings.json").exists()
    assert (h / ".claude.json").read_text() == '{"numStartups": 7}\n'


def test_an_older_install_of_ours_is_replaced_not_doubled(home):
    _, proj = home
    old = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command":
                                          "/old/venv/bin/python -S /old/server/hookclient.py Stop"}]}]}}  # fmt: skip
    (proj / ".claude").mkdir()
    (proj / ".claude" / "settings.json").write_text(json.dumps(old))
    inst.install("project", client="claude")
    stop = json.loads((proj / ".claude" / "settings.json").read_text())["hooks"]["Stop"]
    assert len(stop) == 1 and str(cf.HOOKCLIENT) in stop[0]["hooks"][0]["command"]


# --------------------------------------------------------------------------- a fake client: flat JSON + TOML
def _fake_files(tmp: Path) -> Installer:
    ours = cf.ours_by("bash")
    wanted = {
        "promptSubmitted": [{"type": "command", "bash": cf.hook_command("fake", "promptSubmitted")}]
    }
    top = {"version": 1}
    return Installer(files=(
        ConfigFile("hooks", lambda s, p: p / "fake" / "hooks.json",
                   lambda d: cf.with_flat(d, wanted, ours, top=top),
                   lambda d: cf.without_flat(d, ours, wanted, top=top),
                   lambda d: cf.flat_present(d, ours)),
        ConfigFile("server", lambda s, p: p / "fake" / "config.toml" if s == "project" else None,
                   lambda t: cf.toml_add_table(t, ("mcp_servers", "pattern-memory"), cf.server_entry()),
                   cf.toml_remove_marked, cf.toml_marked, fmt="toml"),
        ConfigFile("setting", lambda s, p: p / "fake" / "config.toml" if s == "project" else None,
                   lambda t: cf.toml_set(t, ("features",), "fake_hooks", True),
                   cf.toml_remove_marked, lambda t: ["fake_hooks"] if "fake_hooks" in cf.toml_marked(t) or
                   cf.toml_data(t).get("features", {}).get("fake_hooks") else [],
                   fmt="toml", label="feature flag fake_hooks"),
    ))  # fmt: skip


@pytest.fixture
def fake_client(monkeypatch, tmp_path):
    spec = ClientSpec(
        name="fake", title="Fake CLI",
        bindings=(Binding("promptSubmitted", "UserPromptSubmit"), Binding("sessionStart", "SessionStart"),
                  Binding("noise", "Stop")),
        to_input=lambda e, d: None if e == "noise" else (
            {"promptSubmitted": "UserPromptSubmit", "sessionStart": "SessionStart"}[e],
            {"session_id": d.get("sid") if isinstance(d.get("sid"), str) else None,
             "prompt": d.get("text") if isinstance(d.get("text"), str) else None}),
        to_output=lambda e, text: {"inject": text} if text else None,
        installer=_fake_files(tmp_path), detect=lambda: True,
        lost=("no tool events",),
    )  # fmt: skip
    monkeypatch.setitem(clients.CLIENTS, "fake", spec)
    return spec


TOML_BEFORE = (
    '# my codex settings\nmodel = "o4"\r\n\r\n[features]\r\nweb = true # keep\r\n'
    '[mcp_servers.github]\r\ncommand = "gh-mcp"'  # CRLF, no final newline
)


def test_a_flat_json_and_toml_client_round_trip(home, fake_client):
    _, proj = home
    (proj / "fake").mkdir()
    hooks = proj / "fake" / "hooks.json"
    hooks.write_text('{"version": 1, "hooks": {"promptSubmitted": [{"bash": "./mine.sh"}]}}')
    toml = proj / "fake" / "config.toml"
    toml.write_bytes(TOML_BEFORE.encode())
    before_hooks = hooks.read_bytes()
    lines = inst.install("project", client="fake")
    assert [ln.split(" ")[0] for ln in lines] == ["hooks", "MCP", "feature"]
    data = json.loads(hooks.read_text())
    assert data["hooks"]["promptSubmitted"][0] == {"bash": "./mine.sh"}
    assert "--client fake promptSubmitted" in data["hooks"]["promptSubmitted"][1]["bash"]
    parsed = cf.toml_data(toml.read_text())
    assert parsed["features"] == {"web": True, "fake_hooks": True}
    assert parsed["mcp_servers"]["github"] == {"command": "gh-mcp"}
    assert parsed["mcp_servers"]["pattern-memory"]["args"] == ["serve"]
    assert len(cf.backups(toml)) == 1  # two parts edit the file: one backup, one write
    installed = (hooks.read_bytes(), toml.read_bytes())
    again = inst.install("project", client="fake")
    assert all("already" in ln for ln in again)
    assert (hooks.read_bytes(), toml.read_bytes()) == installed
    status = "\n".join(inst.status(client=None))
    assert "Fake CLI (fake): found" in status and "promptSubmitted" in status
    assert "not supported by the client: no tool events" in status
    inst.uninstall("project", client="fake")
    assert hooks.read_bytes() == before_hooks and toml.read_bytes() == TOML_BEFORE.encode()


def test_toml_removal_without_a_backup_takes_out_exactly_our_lines():
    text = "[features]\nweb = true\n\n[other]\nx = 1\n"
    added = cf.toml_add_table(cf.toml_set(text, ("features",), "fake_hooks", True),
                              ("mcp_servers", "pattern-memory"), {"command": 'C:\\a "b"', "args": ["serve"]})  # fmt: skip
    assert cf.toml_data(added)["mcp_servers"]["pattern-memory"]["command"] == 'C:\\a "b"'
    assert (
        cf.toml_add_table(added, ("mcp_servers", "pattern-memory"), {"command": "other"}) == added
    )
    assert cf.toml_remove_marked(added) == text
    assert (
        cf.toml_set("", ("features",), "f", True)
        == f"[features]  {cf.TOML_MARK}\nf = true  {cf.TOML_MARK}\n"
    )


def test_toml_edits_that_would_change_the_users_meaning_are_refused():
    with pytest.raises(InvalidInput, match="by hand"):
        cf.toml_set("[features]\nfake_hooks = false\n", ("features",), "fake_hooks", True)
    with pytest.raises(InvalidInput, match="inline table"):
        cf.toml_add_table(
            'mcp_servers = { a = { command = "x" } }\n', ("mcp_servers", "pm"), {"command": "y"}
        )
    with pytest.raises(InvalidInput, match="not valid TOML"):
        cf.toml_data("[[[", "x.toml")


def test_a_broken_or_foreign_file_is_never_touched(home, fake_client):
    _, proj = home
    (proj / "fake").mkdir()
    hooks = proj / "fake" / "hooks.json"
    for bad in ("[1, 2]", "{not json", '{"hooks": [1]}'):
        hooks.write_text(bad)
        with pytest.raises(InvalidInput, match="not touching it"):
            inst.install("project", client="fake")
        assert hooks.read_text() == bad and not cf.backups(hooks)


def test_a_scope_the_client_lacks_is_refused(home, fake_client, monkeypatch):
    files = tuple(f for f in fake_client.installer.files if f.kind != "hooks")
    monkeypatch.setitem(clients.CLIENTS, "fake", ClientSpec(**{
        **{k: getattr(fake_client, k) for k in ("name", "title", "bindings", "to_input", "to_output",
                                                "detect", "lost")},
        "installer": Installer(files=files)}))  # fmt: skip
    with pytest.raises(InvalidInput, match="nothing to install in the user scope"):
        inst.install("user", client="fake")


# --------------------------------------------------------------------------- the CLI
def _cli(*argv: str) -> str:
    import contextlib
    import io

    from server.cli import build_parser

    args = build_parser().parse_args(["hooks", *argv])
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert args.fn(args) == 0
    return buf.getvalue()


def test_cli_status_lists_every_client_and_auto_installs_what_is_found(
    home, fake_client, monkeypatch
):
    h, proj = home
    for name, spec in list(clients.CLIENTS.items()):
        if name != "fake":
            monkeypatch.setitem(clients.CLIENTS, name, ClientSpec(**{
                **{k: getattr(spec, k) for k in ("name", "title", "bindings", "to_input",
                                                  "to_output", "installer", "lost")},
                "detect": lambda: False}))  # fmt: skip
    out = _cli("status")
    assert "Claude Code (claude): not found" in out and "Fake CLI (fake): found" in out
    out = _cli("install", "--client", "auto")
    assert out.startswith("clients found: Fake CLI\n") and "hooks written" in out
    assert (proj / "fake" / "hooks.json").exists() and not (proj / ".claude").exists()
    out = _cli("uninstall", "--client", "auto")
    assert "hooks removed" in out and not (proj / "fake" / "hooks.json").exists()


# --------------------------------------------------------------------------- hook client and route
def test_the_hook_client_reads_client_and_event():
    from server.hooks.hookclient import parse_argv

    assert parse_argv(["UserPromptSubmit"]) == (None, "UserPromptSubmit")
    assert parse_argv(["--client", "codex", "Stop"]) == ("codex", "Stop")
    assert parse_argv(["--client=cursor", "stop"]) == ("cursor", "stop")
    assert parse_argv(["--client"]) == (None, "--client")  # a usage error, logged, exit 0


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list = []
    status = 400
    answer: dict | None = None  # a 200 with this answer when set

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Recorder.seen.append((self.path, json.loads(body)))
        refusal = {"error": "invalid_input", "message": "unknown client 'nosuch'"}
        answer = json.dumps(_Recorder.answer or refusal).encode()
        self.send_response(200 if _Recorder.answer is not None else _Recorder.status)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *a):
        pass


def test_the_hook_client_posts_its_client_and_stays_silent_on_a_refusal(tmp_path):
    server = http.server.HTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    home = tmp_path / "store"
    home.mkdir()
    (home / "daemon.json").write_text(json.dumps({"host": "127.0.0.1", "port": server.server_port,
                                                  "secret": "s", "pid": os.getpid()}))  # fmt: skip
    try:
        proc = subprocess.run(
            [sys.executable, "-S", str(cf.HOOKCLIENT), "--client", "nosuch", "beforeSubmitPrompt"],
            input=b'{"prompt": "hello", "cwd": "/tmp"}', capture_output=True, timeout=30,
            env={**os.environ, "PATTERN_HOME": str(home)})  # fmt: skip
    finally:
        server.shutdown()
    assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b""
    path, body = _Recorder.seen[-1]
    assert path == "/hooks/beforeSubmitPrompt" and body["client"] == "nosuch"
    assert body["input"]["prompt"] == "hello"
    assert "400" in (home / "hooks.log").read_text()


SECRET = "test-secret"


@pytest.fixture(scope="module")
def routes(tmp_path_factory):
    from tests.mcp_util import hook_daemon

    with hook_daemon(tmp_path_factory.mktemp("clients"), SECRET) as (_, client, http_client):
        client.ok("remember", {"content": "The staging database password rotates every Monday "
                               "at 09:00 via the vault job.", "scope": "team"})  # fmt: skip
        yield http_client


def _post(http_client, event, body):
    return http_client.post(
        f"/hooks/{event}", json=body, headers={"Authorization": f"Bearer {SECRET}"}
    )


def test_the_route_translates_a_client_in_and_out(routes, fake_client, monkeypatch):
    from server.hooks import routes as routes_mod

    monkeypatch.setattr(routes_mod, "ALL_EVENTS", routes_mod.ALL_EVENTS | fake_client.events)
    r = _post(routes, "promptSubmitted", {"client": "fake", "input": {
        "sid": "f1", "text": "when does the staging database password rotate?"}, "config": {"threshold": 0.2}})  # fmt: skip
    assert r.status_code == 200, r.text
    out = r.json()["output"]
    assert list(out) == ["inject"] and "rotates every Monday" in out["inject"]
    r = _post(
        routes, "promptSubmitted", {"client": "fake", "input": {"sid": "f2", "text": "draw a cat"}}
    )
    assert r.status_code == 200 and r.json()["output"] is None
    r = _post(routes, "noise", {"client": "fake", "input": {}})
    assert r.status_code == 200 and r.json()["output"] is None and "not used" in r.json()["note"]
    r = _post(routes, "promptSubmitted", {"client": "fake", "input": [1]})
    assert r.status_code == 400 and "JSON object" in r.json()["message"]


def test_the_route_refuses_an_unknown_client_or_event(routes):
    r = _post(routes, "UserPromptSubmit", {"client": "nosuch", "input": {"prompt": "x"}})
    assert r.status_code == 400 and r.json()["error"] == "invalid_input"
    assert "unknown client 'nosuch'" in r.json()["message"]
    for bad in ([1], {"a": 1}, 7, "x" * 10_000):
        r = _post(routes, "UserPromptSubmit", {"client": bad, "input": {}})
        assert r.status_code == 400 and len(r.json()["message"]) < 300, bad
    r = _post(routes, "NoSuchEvent", {"input": {}})
    assert r.status_code == 404
    r = _post(routes, "UserPromptSubmit", {"input": {"prompt": "when does the staging database "
                                                     "password rotate?", "session_id": "c9"},
                                           "config": {"threshold": 0.2}})  # fmt: skip
    out = r.json()["output"]  # no client: Claude Code, as before
    assert out["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"


def test_a_client_that_cannot_show_context_on_an_event_gets_nothing_chosen_for_it(routes):
    """Cursor's beforeSubmitPrompt has no context field: the prompt is recorded, nothing is
    chosen (so nothing is marked as shown to the conversation), and its answer is Cursor's."""
    question = "when does the staging database password rotate?"
    r = _post(routes, "beforeSubmitPrompt", {"client": "cursor", "input": {
        "conversation_id": "cur-1", "prompt": question, "hook_event_name": "beforeSubmitPrompt"},
        "config": {"threshold": 0.2}})  # fmt: skip
    assert r.status_code == 200, r.text
    assert r.json()["output"] == {"continue": True} and r.json()["injected"] == []
    # the same prompt from a client that shows it injects the memory
    r = _post(routes, "UserPromptSubmit", {"client": "claude", "input": {
        "session_id": "cl-1", "prompt": question}, "config": {"threshold": 0.2}})  # fmt: skip
    assert r.json()["injected"] and "rotates every Monday" in json.dumps(r.json()["output"])
    # an event the client's translation ignores (a tool that is not the shell) is answered
    # as the client reads an empty answer
    r = _post(routes, "postToolUse", {"client": "cursor", "input": {
        "conversation_id": "cur-1", "tool_name": "Read", "tool_input": {"path": "x"}}})  # fmt: skip
    assert r.status_code == 200 and r.json()["output"] == {}


def test_the_hook_client_names_the_project_from_the_input_or_the_clients_environment(tmp_path):
    from server.hooks import hookclient as hc

    root = str(tmp_path)
    assert hc.project_dir({"cwd": root, "workspace_roots": ["/elsewhere"]}, {}) == root
    assert hc.project_dir({"workspace_roots": [root, "/b"]}, {}) == root
    assert hc.project_dir({"cwd": "relative"}, {"CURSOR_PROJECT_DIR": root}) == root
    assert hc.project_dir({}, {"CLAUDE_PROJECT_DIR": root}) == root
    assert hc.project_dir({"workspace_roots": "not a list", "cwd": 7}, {}) == os.getcwd()


def test_the_hook_client_prints_an_empty_answer_the_client_expects(tmp_path):
    """Cursor reads no output as a failed hook: its ``{}`` is printed, not dropped."""
    _Recorder.answer = {"output": {}}
    server = http.server.HTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    home = tmp_path / "store"
    home.mkdir()
    (home / "daemon.json").write_text(json.dumps({"host": "127.0.0.1", "port": server.server_port,
                                                  "secret": "s", "pid": os.getpid()}))  # fmt: skip
    try:
        proc = subprocess.run(
            [sys.executable, "-S", str(cf.HOOKCLIENT), "--client", "cursor", "afterFileEdit"],
            input=b'{"file_path": "/tmp/x.py"}', capture_output=True, timeout=30,
            env={**os.environ, "PATTERN_HOME": str(home)})  # fmt: skip
    finally:
        server.shutdown()
        _Recorder.answer = None
    assert proc.returncode == 0 and proc.stdout.strip() == b"{}", proc
