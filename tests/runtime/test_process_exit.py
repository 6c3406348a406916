"""How a ``pattern-memory`` process ends. A daemon thread still in Python called from Rust when
the command returns (pydantic running a validator, as it does building the tools' schemas after
a daemon's first answer) made the interpreter's exit crash the process (SIGABRT, at times
SIGSEGV, and a core file) after a clean stop. ``command()`` ends such a process with the command's own status, after
the threads that are not daemons finished and the ``atexit`` functions ran."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from server.cli.process_exit import UNWRITTEN

ROOT = str(Path(__file__).resolve().parents[2])
# a daemon thread kept in a pydantic validator's Python, called from pydantic-core (Rust), then
# BODY: what a command does once that thread runs
SPINNING = """
import atexit, sys, threading, time
import pydantic

class Slow(pydantic.BaseModel):
    x: int

    @pydantic.field_validator("x")
    @classmethod
    def busy(cls, v):
        return v + sum(range(20000))

def spin():
    while True:
        Slow(x=1)

sys.setswitchinterval(0.0005)
threading.Thread(target=spin, daemon=True).start()
time.sleep(0.2)
BODY
"""
# a real command (`stop` with no daemon) through the entry point named by argv[1]
SCRIPT = SPINNING.replace(
    "BODY",
    """
atexit.register(lambda: print("atexit ran", flush=True))
threading.Thread(target=lambda: (time.sleep(0.3), print("joined", flush=True))).start()
import server.cli as cli
sys.argv = ["pattern-memory", "stop", "--home", sys.argv[2]]
sys.exit(getattr(cli, __ENTRY__)())
""",
)


def _run(entry: str, home: Path) -> subprocess.CompletedProcess:
    code = SCRIPT.replace("__ENTRY__", repr(entry))
    return subprocess.run([sys.executable, "-c", code, entry, str(home)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_a_daemon_thread_in_rust_called_python_does_not_abort_the_exit(tmp_path):
    done = _run("command", tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "no daemon runs" in done.stdout
    assert "joined" in done.stdout  # a thread that is not a daemon finished first
    assert "atexit ran" in done.stdout


def test_without_it_the_same_process_aborts(tmp_path):
    """The case above is the one that crashed: ``main()`` alone ends through the interpreter's
    finalization, killed by a signal (SIGABRT from the unwinding, or SIGSEGV: either, by
    where the thread was; a few tries, as it needs the thread inside the validator then)."""
    codes = [_run("main", tmp_path).returncode for _ in range(3)]
    assert any(code < 0 for code in codes), codes


def test_the_console_script_and_python_m_use_it():
    import tomllib

    project = tomllib.loads((Path(ROOT) / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["pattern-memory"] == "server.cli:command"
    assert "sys.exit(command())" in (Path(ROOT) / "server/cli/__main__.py").read_text()


def _ending(body: str, **kwargs) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # as users run it
    body = "from server.cli import process_exit\n" + body
    return subprocess.Popen([sys.executable, "-c", SPINNING.replace("BODY", body)], cwd=ROOT,
                            env=env, text=True, stderr=subprocess.PIPE, **kwargs)  # fmt: skip


def test_output_that_cannot_be_written_is_not_a_success():
    with open("/dev/full", "w") as full:  # the last bytes buffered hit a full disk
        p = _ending("print('exported 1200')\nsys.exit(process_exit.leave(0))", stdout=full)
        _, err = p.communicate(timeout=60)
    assert p.returncode == UNWRITTEN and "could not be written" in err, (p.returncode, err)


def test_an_exception_or_system_exit_out_of_the_command_is_guarded_too():
    for raising, want in (("raise RuntimeError('boom')", 1), ("raise SystemExit(2)", 2),
                          ("raise SystemExit('bad usage')", 1)):  # fmt: skip
        body = f"def main():\n    {raising}\nsys.exit(process_exit.run(main))"
        p = _ending(body, stdout=subprocess.PIPE)
        _, err = p.communicate(timeout=60)
        assert p.returncode == want, (raising, p.returncode, err)
    assert "bad usage" in err


def test_an_interrupt_while_it_waits_for_a_thread_ends_the_wait():
    body = ("threading.Thread(target=lambda: (time.sleep(30), print('late'))).start()\n"
            "print('done', flush=True)\nsys.exit(process_exit.leave(0))")  # fmt: skip
    p = _ending(body, stdout=subprocess.PIPE)
    assert p.stdout.readline().strip() == "done"
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=20)
    assert p.returncode == 0, err
    assert "late" not in out
