"""``pattern-memory hooks install | uninstall | status`` over hostile and unusual config files
(review 43): symbolic links (a dotfiles manager's, a repository's pointing at a private file),
devices and FIFOs, planted temporary names, a user's own hook named ``hookclient.py``, a file
refused half way through a client, numbers and strings JSON holds but Python writes otherwise,
CRLF files, private files' modes and bounded backups."""

from __future__ import annotations

import json
import os
import resource
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval.errors import InvalidInput
from server.hooks import clients
from server.hooks import install as inst
from server.hooks.clients import config_files as cf
from server.hooks.clients import gemini
from server.hooks.clients.spec import Binding, ClientSpec, ConfigFile, Installer

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "ghp_" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"
SECRET = json.dumps({"mcpServers": {"gh": {"command": "gh-mcp", "env": {"GITHUB_TOKEN": TOKEN}}}})


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """A temporary HOME (every client's folder inside it) and project folder (the cwd)."""
    home, proj = tmp_path / "home", tmp_path / "proj"
    home.mkdir()
    proj.mkdir()
    for k, v in {"HOME": home, "XDG_CONFIG_HOME": home / ".config",
                 "XDG_CACHE_HOME": home / ".cache", "XDG_DATA_HOME": home / ".local/share",
                 "XDG_STATE_HOME": home / ".local/state", "PATTERN_HOME": tmp_path / "store",
                 "CLAUDE_CONFIG_DIR": home / ".claude", "CODEX_HOME": home / ".codex",
                 "COPILOT_HOME": home / ".copilot", "GEMINI_CLI_HOME": home,
                 "PATTERN_CACHE_DIR": tmp_path / "cache"}.items():  # fmt: skip
        monkeypatch.setenv(k, str(v))
    monkeypatch.chdir(proj)
    return tmp_path, home, proj


def _tmp_files(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


# --------------------------------------------------------------------------- 1. symbolic links
def test_a_dotfiles_link_is_edited_in_place_and_stays_a_link(sandbox):
    root, home, _ = sandbox
    real = root / "dotfiles" / "claude-settings.json"
    real.parent.mkdir()
    real.write_text('{"model": "opus"}\n')
    link = home / ".claude" / "settings.json"
    link.parent.mkdir()
    link.symlink_to(real)
    inst.install("user", client="claude")
    assert link.is_symlink() and link.resolve() == real
    assert "UserPromptSubmit" in json.loads(real.read_text())["hooks"]
    assert not list(link.parent.glob("settings.json.bak-*"))  # the backup is beside the target
    assert len(cf.backups(real)) == 1 and cf.backups(real)[0].read_text() == '{"model": "opus"}\n'
    inst.uninstall("user", client="claude")
    assert link.is_symlink() and real.read_text() == '{"model": "opus"}\n'


def test_a_link_install_would_empty_is_never_left_dangling(sandbox):
    root, home, _ = sandbox
    real = root / "dotfiles" / "settings.json"
    real.parent.mkdir()
    real.write_text("")
    link = home / ".claude" / "settings.json"
    link.parent.mkdir()
    link.symlink_to(real)
    inst.install("user", client="claude")
    inst.uninstall("user", client="claude")
    assert link.is_symlink() and real.exists() and json.loads(real.read_text()) == {}


def test_a_repository_link_to_a_private_file_is_refused_and_nothing_copied(sandbox):
    """A cloned repository commits ``.cursor/mcp.json -> ../../home/.claude.json``."""
    _, home, proj = sandbox
    private = home / ".claude.json"
    private.write_text(SECRET)
    private.chmod(0o600)
    (proj / ".cursor").mkdir()
    link = proj / ".cursor" / "mcp.json"
    link.symlink_to(os.path.relpath(private, link.parent))
    with pytest.raises(
        InvalidInput, match=r"mcp\.json is a symbolic link to .*outside the project"
    ):
        inst.install("project", client="cursor")
    assert private.read_text() == SECRET and link.is_symlink()
    leaked = [p for p in proj.rglob("*") if p.is_file() and not p.is_symlink()
              and TOKEN in p.read_text(errors="replace")]  # fmt: skip
    assert not leaked and not (proj / ".cursor" / "hooks.json").exists()  # all or nothing
    assert "outside the project" in "\n".join(inst.status(client="cursor"))


def test_a_linked_folder_out_of_the_project_and_a_dangling_link_are_refused(sandbox):
    _, home, proj = sandbox
    (home / "elsewhere").mkdir()
    (proj / ".claude").symlink_to(home / "elsewhere")
    with pytest.raises(InvalidInput, match="outside the project"):
        inst.install("project", client="claude")
    assert not list((home / "elsewhere").iterdir())
    (proj / ".claude").unlink()
    (proj / ".claude").mkdir()
    (proj / ".claude" / "settings.json").symlink_to(proj / "gone.json")
    with pytest.raises(InvalidInput, match="which does not exist"):
        inst.install("project", client="claude")
    assert not (proj / "gone.json").exists()


def test_a_link_inside_the_project_is_followed_and_kept(sandbox):
    _, _, proj = sandbox
    (proj / "config").mkdir()
    real = proj / "config" / "cursor-mcp.json"
    real.write_text('{"mcpServers": {}}\n')
    (proj / ".cursor").mkdir()
    (proj / ".cursor" / "mcp.json").symlink_to("../config/cursor-mcp.json")
    inst.install("project", client="cursor")
    assert (proj / ".cursor" / "mcp.json").is_symlink()
    assert "pattern-memory" in json.loads(real.read_text())["mcpServers"]


# --------------------------------------------------------------------------- 2. devices, FIFOs, folders
def test_devices_and_fifos_are_refused_not_read_forever(sandbox):
    """A project's ``.claude/settings.json`` a FIFO (no writer: a read blocks for ever), the
    user's a link to /dev/zero (a read never ends): refused, in a child with 1 GB of memory."""
    _, home, proj = sandbox
    (proj / ".claude").mkdir()
    os.mkfifo(proj / ".claude" / "settings.json")
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").symlink_to("/dev/zero")
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
            "from retrieval.errors import InvalidInput\n"
            "from server.hooks import install as i\n"
            "for scope in ('project', 'user'):\n"
            "    try:\n        i.install(scope, client='claude'); print(scope, 'installed')\n"
            "    except InvalidInput as e:\n        print(scope, 'refused:', e)\n"
            "print('\\n'.join(i.status()))\n")  # fmt: skip

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    try:
        r = subprocess.run([sys.executable, "-c", code], cwd=proj, capture_output=True,
                           text=True, timeout=60, preexec_fn=cap)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise AssertionError("install still reading a FIFO or /dev/zero after 60 s") from None
    assert r.returncode == 0, r.stderr[-800:]
    assert "project refused:" in r.stdout and "a FIFO" in r.stdout
    assert "user refused:" in r.stdout and "a device" in r.stdout
    assert "cannot read" in r.stdout  # status says so too
    assert (home / ".claude" / "settings.json").is_symlink()


def test_a_folder_at_a_config_path_is_a_clean_refusal_with_nothing_written(sandbox):
    _, _, proj = sandbox
    (proj / ".mcp.json").mkdir()
    with pytest.raises(InvalidInput, match=r"\.mcp\.json is a folder"):
        inst.install("project", client="claude")
    assert not (proj / ".claude" / "settings.json").exists()


# --------------------------------------------------------------------------- 3. the temporary file
def test_a_planted_temporary_name_is_never_followed(sandbox):
    _, home, proj = sandbox
    bashrc = home / ".bashrc"
    bashrc.write_text("export PATH=$HOME/bin:$PATH\n")
    (proj / ".claude").mkdir()
    settings = proj / ".claude" / "settings.json"
    settings.write_text('{"model": "opus"}\n')
    (proj / ".claude" / f".settings.json.{os.getpid()}.tmp").symlink_to(bashrc)
    inst.install("project", client="claude")
    assert bashrc.read_text() == "export PATH=$HOME/bin:$PATH\n"
    assert not settings.is_symlink() and "hooks" in json.loads(settings.read_text())


def test_a_failed_write_leaves_no_temporary_file_and_the_file_as_it_was(sandbox, monkeypatch):
    _, _, proj = sandbox
    (proj / ".claude").mkdir()
    settings = proj / ".claude" / "settings.json"
    settings.write_text('{"model": "opus"}\n')

    def refuse(src, dst, *a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(InvalidInput, match="cannot write .*settings.json.*nothing was changed"):
        inst.install("project", client="claude")
    assert settings.read_text() == '{"model": "opus"}\n'
    assert not _tmp_files(settings.parent) and not (proj / ".mcp.json").exists()


# --------------------------------------------------------------------------- 4. our hooks, exactly
OLD_AND_OTHER_FORMS = [
    "/old/venv/bin/python -S /old/server/hookclient.py Stop",  # before server/hooks/
    "/usr/bin/python3 /srv/pm/server/hooks/hookclient.py PreCompact",
    "python -S '/path with space/server/hooks/hookclient.py' --client codex Stop",
    "pattern-memory hook UserPromptSubmit",
    "/home/u/.local/bin/pattern-memory hook --client cursor stop",
    "python3 -S /x/server/hooks/hookclient.py --client gemini AfterTool 2>/dev/null || true",
]
USERS_OWN = [
    "python3 ~/tools/hookclient.py notify",
    "python3 /x/hookclient.py Stop",
    "python3 -S /x/server/hooks/hookclient.py Stop && notify-send done",
    "python3 -S /x/server/hooks/hookclient.py Stop; rm -rf ~/tmp",
    "echo pattern-memory hook Stop",
    "pattern-memory hook Stop --verbose x",
    "cat /x/server/hooks/hookclient.py",
    "sh -c 'python3 /x/server/hooks/hookclient.py Stop'",
    "python3 -S /x/server/hooks/hookclient.py 'Stop'\"",
]


def test_our_commands_are_recognised_exactly():
    for spec in clients.CLIENTS.values():
        for b in spec.bindings:
            assert cf.is_ours_command(cf.hook_command(spec.name, b.client_event)), spec.name
    assert cf.is_ours_command(gemini.hook_command("BeforeAgent"))
    for cmd in OLD_AND_OTHER_FORMS:
        assert cf.is_ours_command(cmd), cmd
    for cmd in USERS_OWN:
        assert not cf.is_ours_command(cmd), cmd
    assert not cf.is_ours_command(None) and not cf.is_ours_command(["hookclient.py"])


@pytest.mark.parametrize("client,path,layout", [
    ("claude", ".claude/settings.json", "groups"),
    ("cursor", ".cursor/hooks.json", "flat-command"),
    ("copilot", ".github/hooks/pattern-memory.json", "flat-bash"),
])  # fmt: skip
def test_a_users_hook_named_hookclient_py_survives_install_and_uninstall(sandbox, client, path,
                                                                          layout):  # fmt: skip
    _, _, proj = sandbox
    mine = "python3 ~/tools/hookclient.py notify"
    event = {"claude": "Stop", "cursor": "stop", "copilot": "agentStop"}[client]
    if layout == "groups":
        doc = {"hooks": {event: [{"hooks": [{"type": "command", "command": mine}]}]}}
    else:
        key = "bash" if layout == "flat-bash" else "command"
        doc = {"version": 1, "hooks": {event: [{"type": "command", key: mine}]}}
    p = proj / path
    p.parent.mkdir(parents=True)
    p.write_text(json.dumps(doc) + "\n")
    inst.install("project", client=client)
    assert mine in p.read_text()
    inst.uninstall("project", client=client)
    assert json.loads(p.read_text()) == doc


# --------------------------------------------------------------------------- 5. all or nothing
def test_a_refused_file_stops_the_install_before_any_file_is_written(sandbox):
    _, home, _ = sandbox
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"model": "opus"}\n')
    (home / ".claude.json").write_text('{"numStartups": 3,}\n')
    with pytest.raises(InvalidInput, match="claude.json is not valid JSON"):
        inst.install("user", client="claude")
    assert settings.read_text() == '{"model": "opus"}\n' and not cf.backups(settings)


def test_a_write_that_fails_puts_back_the_files_already_written(sandbox, monkeypatch):
    _, home, _ = sandbox
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"model": "opus"}\n')
    (home / ".claude.json").write_text('{"numStartups": 3}\n')
    real_replace = os.replace

    def replace(src, dst, *a, **k):
        if os.path.basename(dst) == ".claude.json":
            raise PermissionError(13, "Permission denied")
        return real_replace(src, dst, *a, **k)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(InvalidInput, match="cannot write .*claude.json.*nothing was changed"):
        inst.install("user", client="claude")
    assert settings.read_text() == '{"model": "opus"}\n'
    assert (home / ".claude.json").read_text() == '{"numStartups": 3}\n'
    assert not _tmp_files(home) and not _tmp_files(settings.parent)


def _json_client(name: str, title: str) -> ClientSpec:
    def path(scope, project):
        return project / name / "hooks.json" if scope == "project" else None

    wanted = {"go": [{"command": cf.hook_command(name, "go")}]}
    ours = cf.ours_by("command")
    files = (ConfigFile("hooks", path, lambda d: cf.with_flat(d, wanted, ours),
                        lambda d: cf.without_flat(d, ours, wanted), lambda d: cf.flat_present(d, ours)),)  # fmt: skip
    return ClientSpec(name=name, title=title, bindings=(Binding("go", "Stop"),),
                      to_input=lambda e, d: None, to_output=lambda e, t: None,
                      installer=Installer(files=files), detect=lambda: True)  # fmt: skip


def test_auto_says_which_clients_were_installed_and_which_were_not(sandbox, monkeypatch, capsys):
    _, _, proj = sandbox
    for name, spec in list(clients.CLIENTS.items()):
        monkeypatch.setitem(clients.CLIENTS, name, ClientSpec(**{
            **{k: getattr(spec, k) for k in ("name", "title", "bindings", "to_input",
                                              "to_output", "installer", "lost")},
            "detect": lambda: False}))  # fmt: skip
    monkeypatch.setitem(clients.CLIENTS, "fakea", _json_client("fakea", "Fake A"))
    monkeypatch.setitem(clients.CLIENTS, "fakeb", _json_client("fakeb", "Fake B"))
    (proj / "fakeb").mkdir()
    (proj / "fakeb" / "hooks.json").write_text("{broken")
    from server.cli import build_parser

    args = build_parser().parse_args(["hooks", "install", "--client", "auto"])
    with pytest.raises(InvalidInput, match="install failed for Fake B"):
        args.fn(args)
    out = capsys.readouterr().out
    assert "clients found: Fake A, Fake B" in out
    assert "Fake A:\n  hooks written to" in out
    assert "Fake B:\n  not installed:" in out and "not valid JSON" in out
    assert (proj / "fakea" / "hooks.json").exists()
    assert (proj / "fakeb" / "hooks.json").read_text() == "{broken"


# --------------------------------------------------------------------------- 6. byte safety
def test_numbers_python_cannot_hold_are_refused_not_written_as_infinity(sandbox):
    _, _, proj = sandbox
    p = proj / ".cursor" / "hooks.json"
    p.parent.mkdir()
    for text in ('{"version": 1, "hooks": {}, "limits": {"max": 1e400}}\n',
                 '{"version": 1, "hooks": {}, "x": NaN}\n'):  # fmt: skip
        p.write_text(text)
        with pytest.raises(InvalidInput, match=r"hooks.json (is not valid JSON|holds the numb)"):
            inst.install("project", client="cursor")
        assert p.read_text() == text and not cf.backups(p)
    with pytest.raises(InvalidInput, match="as JSON"):
        cf.dump({"x": float("inf")}, "json", None)


def test_crlf_line_endings_are_kept_and_given_back(sandbox):
    _, _, proj = sandbox
    p = proj / ".gemini" / "settings.json"
    p.parent.mkdir()
    before = b'{\r\n  "theme": "dark"\r\n}\r\n'
    p.write_bytes(before)
    inst.install("project", client="gemini")
    data = p.read_bytes()
    assert data.count(b"\n") == data.count(b"\r\n") > 3 and b"hooks" in data
    inst.uninstall("project", client="gemini")
    assert p.read_bytes() == before


def test_a_lone_surrogate_escape_is_written_back_as_an_escape(sandbox):
    _, _, proj = sandbox
    p = proj / ".claude" / "settings.json"
    p.parent.mkdir()
    p.write_text('{"statusLine": {"type": "command", "command": "echo \\ud83d caf\u00e9"}}\n')
    inst.install("project", client="claude")
    text = p.read_text()
    assert "\\ud83d" in text and "caf\u00e9" in text  # the rest stays unescaped
    assert json.loads(text)["statusLine"]["command"] == "echo \ud83d caf\u00e9"
    assert not _tmp_files(p.parent)
    with pytest.raises(InvalidInput, match="cannot write .* as UTF-8"):
        cf.encode("x = \ud83d", p)


# --------------------------------------------------------------------------- 7. private files
def test_copies_of_a_0600_file_are_never_readable_by_others(sandbox, monkeypatch):
    """~/.claude.json (0600, tokens in MCP env blocks): its backup and temporary file never
    exist with a looser mode, not even between their creation and a chmod."""
    _, home, _ = sandbox
    target = home / ".claude.json"
    target.write_text(SECRET)
    target.chmod(0o600)
    seen: list[tuple[str, int]] = []
    created: list[tuple[str, int]] = []

    def look() -> None:
        for p in home.iterdir():
            if ".claude.json" in p.name and p.name != ".claude.json" and not p.is_symlink():
                seen.append((p.name, stat.S_IMODE(p.lstat().st_mode)))

    def spy(fn):
        def wrapped(*a, **k):
            look()
            return fn(*a, **k)

        return wrapped

    real_open = os.open

    def spy_open(path, flags, mode=0o777, *a, **k):
        if flags & os.O_CREAT and ".claude.json" in os.fspath(path):
            created.append((os.path.basename(path), mode))
        return real_open(path, flags, mode, *a, **k)

    for mod, name in ((os, "write"), (os, "replace"), (os, "fchmod"), (shutil, "copymode"),
                      (shutil, "copystat"), (shutil, "copyfile")):  # fmt: skip
        monkeypatch.setattr(mod, name, spy(getattr(mod, name)))
    monkeypatch.setattr(os, "open", spy_open)
    old_mask = os.umask(0o022)
    try:
        inst.install("user", client="claude")
        look()
    finally:
        os.umask(old_mask)
    assert seen, "no backup or temporary file observed"
    loose = [(n, oct(m)) for n, m in seen + created if m & 0o077]
    assert not loose, f"copies of a 0600 file readable by others: {loose}"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_the_temporary_file_has_the_files_mode_before_a_byte_is_written(sandbox, monkeypatch):
    _, _, proj = sandbox
    p = proj / ".claude" / "settings.json"
    p.parent.mkdir()
    p.write_text('{"model": "opus"}\n')
    p.chmod(0o640)
    modes, wrong = [], []
    real_write, real_copymode = os.write, shutil.copymode
    proc = os.path.isdir("/proc/self/fd")

    def write(fd, data):
        if proc and os.path.basename(os.readlink(f"/proc/self/fd/{fd}")).startswith(".settings"):
            modes.append(stat.S_IMODE(os.fstat(fd).st_mode))
        return real_write(fd, data)

    def copymode(src, dst, *a, **k):  # a mode copied after the bytes were written
        if os.path.getsize(dst) and stat.S_IMODE(os.stat(dst).st_mode) != 0o640:
            wrong.append(oct(stat.S_IMODE(os.stat(dst).st_mode)))
        return real_copymode(src, dst, *a, **k)

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(shutil, "copymode", copymode)
    old_mask = os.umask(0o022)
    try:
        inst.install("project", client="claude")
    finally:
        os.umask(old_mask)
    assert not wrong, f"bytes written to the temporary file while its mode was {wrong}"
    assert not proc or (modes and set(modes) == {0o640}), modes
    assert stat.S_IMODE(p.stat().st_mode) == 0o640


# --------------------------------------------------------------------------- 8. bounded backups
def test_backups_are_bounded_keep_the_first_and_spare_the_users_files(sandbox):
    _, _, proj = sandbox
    p = proj / ".cursor" / "hooks.json"
    p.parent.mkdir()
    original = '{"version": 1, "hooks": {"stop": [{"command": "say done"}]}}\n'
    p.write_text(original)
    theirs = proj / ".cursor" / "hooks.json.bak-mine"
    theirs.write_text("keep me")
    for _ in range(15):
        inst.install("project", client="cursor")
        inst.uninstall("project", client="cursor")
        assert p.read_text() == original  # byte for byte, every time
    kept = cf.backups(p)
    assert 2 <= len(kept) <= cf.MAX_BACKUPS_READ, len(kept)
    assert kept[-1].read_text() == original  # the first backup: the file before any install
    assert theirs.read_text() == "keep me"
