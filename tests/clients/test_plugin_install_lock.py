"""The Claude Code plugin's one-install-at-a-time lock (``packaging/claude/install.sh``, run by
``serve.sh``; the Codex plugin's ``run.sh`` runs the same launchers).

The lock folder ``install.lock`` names its holder in ``owner`` (pid, boot id, start time); a
waiter takes the lock over only once that installer no longer runs, never because it waited
long: a live installer's lock is never taken (two installs into one venv at once), and a stale
one (an installer killed with SIGKILL, a reboot) does not hold up the MCP server's start.

Fast: ``uv`` is a stub (its ``pip install`` logs ``begin``/``end`` and, when told, waits for a
file), and ``sleep`` is a no-op that counts its calls (a waiter's 15 minutes in a moment)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGING = ROOT / "packaging" / "claude"
SH = shutil.which("sh") or "/bin/sh"
TOOLS = ("sh", "cmp", "cp", "mkdir", "rm", "rmdir", "mv", "nohup", "date", "cat")
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
linux = pytest.mark.skipif(not BOOT_ID.exists(), reason="/proc (boot id, start times) only")

UV = """#!/bin/sh
if [ "$1" = venv ]; then
    for a; do v=$a; done
    {mkdir} -p "$v/bin"
    printf '#!/bin/sh\\nexit 0\\n' >"$v/bin/python"
    {chmod} +x "$v/bin/python"
    exit 0
fi
echo "begin $PPID" >>"$PIP_LOG"
if [ -n "${{HOLD:-}}" ]; then
    while [ ! -e "$HOLD" ]; do {sleep} 0.02; done
fi
{sleep} "${{PIP_S:-0}}"
echo "end $PPID" >>"$PIP_LOG"
"""


def _bin(tmp: Path) -> Path:
    """A PATH: the few tools the launchers use, a stub uv, a no-op sleep counting its calls."""
    d = tmp / "bin"
    d.mkdir()
    for name in TOOLS:
        (d / name).symlink_to(shutil.which(name))
    which = {k: shutil.which(k) for k in ("mkdir", "chmod", "sleep")}
    (d / "uv").write_text(UV.format(**which))
    (d / "sleep").write_text('#!/bin/sh\nprintf . >>"$SLEEPS"\n')
    for f in ("uv", "sleep"):
        (d / f).chmod(0o755)
    return d


def _env(tmp: Path, name: str = "", **more: str) -> dict[str, str]:
    return {"PATH": str(tmp / "bin"), "CLAUDE_PLUGIN_DATA": str(tmp / "data"),
            "HOME": str(tmp), "PIP_LOG": str(tmp / "pip.log"),
            "SLEEPS": str(tmp / f"sleeps{name}"), **more}  # fmt: skip


@pytest.fixture
def tmp(tmp_path):
    _bin(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "pip.log").touch()
    return tmp_path


def _sleeps(tmp: Path, name: str = "") -> int:
    f = tmp / f"sleeps{name}"
    return f.stat().st_size if f.exists() else 0


def _events(tmp: Path) -> list[str]:
    return (tmp / "pip.log").read_text().split()[::2]  # begin/end, without the pids


def _started(pid: int) -> str:
    """The start time of ``pid`` as install.sh reads it: /proc/PID/stat's 22nd field."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2 :].split()[19]


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def _run(script: str, env: dict, timeout: float = 10) -> subprocess.CompletedProcess:
    """``sh script`` in its own process group, killed whole when it runs past ``timeout``."""
    p = subprocess.Popen([SH, str(PACKAGING / script)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail(f"{script} still waiting after {timeout} s: {out} {err}")
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def _installed(tmp: Path) -> None:
    data = tmp / "data"
    assert (data / "pyproject.toml").read_bytes() == (ROOT / "pyproject.toml").read_bytes()
    assert not (data / "install.lock").exists()  # released


def _wait_for(cond, timeout: float = 20) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


# --------------------------------------------------------------------------- a live lock
def test_the_installer_names_itself_in_the_lock_and_a_waiter_never_takes_a_live_lock(tmp):
    """Installer A holds the lock (its pip waits for a file); B waits through far more than the
    900 one-second sleeps after which it used to break the lock (and install into the same venv
    at once); once A is done, B finds the environment installed and installs nothing."""
    hold = tmp / "release"
    a = subprocess.Popen([SH, str(PACKAGING / "install.sh")], env=_env(tmp, "A", HOLD=str(hold)),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    b = None
    try:
        _wait_for(lambda: "begin" in (tmp / "pip.log").read_text())
        b = subprocess.Popen([SH, str(PACKAGING / "install.sh")], env=_env(tmp, "B"),
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
        _wait_for(lambda: _sleeps(tmp, "B") >= 1000 or b.poll() is not None, timeout=60)
        assert b.poll() is None and _events(tmp) == ["begin"]  # B still waits, A alone installs
        owner = (tmp / "data" / "install.lock" / "owner").read_text().split("\n")
        assert owner[0] == str(a.pid)
        if BOOT_ID.exists():
            assert owner[1:3] == [BOOT_ID.read_text().strip(), _started(a.pid)]
    finally:
        hold.touch()
        a.wait(timeout=30)
        out = b.communicate(timeout=30)[0] if b else ""
    assert a.returncode == 0 and b.returncode == 0
    assert _events(tmp) == ["begin", "end"]
    assert f"waiting for installer {a.pid} to finish" in out and "taking over" not in out
    assert "installing" not in out  # A installed it meanwhile
    _installed(tmp)


# --------------------------------------------------------------------------- a stale lock
def _owner(lock: Path, *lines: object) -> None:
    lock.mkdir()
    (lock / "owner").write_text("".join(f"{x}\n" for x in lines))


STALE = {
    "a SIGKILLed installer's (its pid gone)": lambda lock: _owner(
        lock, _dead_pid(), BOOT_ID.read_text().strip() if BOOT_ID.exists() else "", ""),
    "one named no installer (an older install.sh's, or killed before it wrote its name)":
        lambda lock: lock.mkdir(),
    "one whose name is empty (killed while writing it)": lambda lock: _owner(lock),
    "a waiter's, killed while taking the lock over": lambda lock: (
        lock.mkdir(), (lock / f"dead.{_dead_pid()}").write_text("1\n")),
}  # fmt: skip
STALE_LINUX = {
    "written before a reboot (another boot id, its pid now another process's)": lambda lock: _owner(
        lock, os.getpid(), "00000000-0000-0000-0000-000000000000", _started(os.getpid())),
    "its pid now another process's (another start time)": lambda lock: _owner(
        lock, os.getpid(), BOOT_ID.read_text().strip(), "1"),
}  # fmt: skip


@pytest.mark.parametrize(
    "make",
    [*STALE.values(), *(pytest.param(v, marks=linux) for v in STALE_LINUX.values())],
    ids=[*STALE, *STALE_LINUX],
)
def test_a_stale_lock_does_not_hold_up_the_mcp_server_start(tmp, make):
    make(tmp / "data" / "install.lock")
    started = time.monotonic()
    proc = _run("serve.sh", _env(tmp))
    assert proc.returncode == 0, proc.stderr  # the environment's (stub) python served
    assert time.monotonic() - started < 5
    assert _sleeps(tmp) <= 3  # a lock naming nobody: 3 checks a second apart; a dead one: none
    assert _events(tmp) == ["begin", "end"]
    _installed(tmp)
    log = (tmp / "data" / "install.log").read_text()
    assert "taking over the lock of installer" in log or "which named no installer" in log


def test_of_many_waiters_on_a_dead_installers_lock_one_installs_at_a_time(tmp):
    """Four installers started at once on a stale lock: one takes it over and installs, the
    others wait for it, then find the environment installed."""
    _owner(tmp / "data" / "install.lock", _dead_pid(), "", "")
    procs = [subprocess.Popen([SH, str(PACKAGING / "install.sh")], env=_env(tmp, str(i),
                              PIP_S="0.3"), stdout=subprocess.DEVNULL, start_new_session=True)
             for i in range(4)]  # fmt: skip
    try:
        for p in procs:
            p.wait(timeout=20)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    assert [p.returncode for p in procs] == [0, 0, 0, 0]
    assert _events(tmp) == ["begin", "end"]
    _installed(tmp)
