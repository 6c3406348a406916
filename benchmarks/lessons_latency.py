"""The failed-command hooks' latency over a store of learned lessons (``lessons_auto.py
--latency N``), timed exactly as Claude Code runs the installed hook.

The daemon is started over the replay's store (its lessons learned from the fix sessions,
``PATTERN_AUTO_LESSONS=on``) and warmed. Then ``N`` query sessions, each one of the bug's
*other* failing tests: its transcript holds the request and the failing ``defects4j test -t``
call with its trace; ``python -S server/hooks/hookclient.py PostToolUseFailure`` gets the
failure (its lessons are selected and injected in the hook's path); the transcript gains the
real patch's Edit calls and the passing run; ``PostToolUse`` gets the pass; the agent states
the fix and ``Stop`` ends its turn. The two failed-command hooks' processes are timed from
start to exit. The episode each session holds (fail, edit, pass) is detected and
learned on the daemon's background worker, never in the hook's path: after the runs the daemon
is stopped (it drains its worker first) and the store is read for the lessons those sessions
taught and the outcomes the pass counted.

Beside the times, processor time, which a loaded machine changes far less than a time: the
daemon's (its vector index processes included) per query session, hooks and background worker
together (``daemon_cpu_per_session_ms``), and per failure posted on its own once the worker is
idle (``daemon_cpu_per_roundtrip_ms``).
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

from benchmarks import d4j_sessions as d4j
from benchmarks.hooks import child_cpu_ms, pct, start_daemon, wait_model
from benchmarks.hooks import daemon_cpu_ms as tree_cpu_ms
from server.hooks.hookclient import http_post
from server.hooks.install import CLIENT
from server.http.daemon import read_info


def hook_once(home: Path, who, event: str, payload: dict) -> tuple[float, str, float]:
    """(wall ms, stdout, CPU ms) of one hook process."""
    env = {**os.environ, "PATTERN_HOME": str(home), "PATTERN_PROJECT_ID": who.project_id,
           "PATTERN_AGENT_ID": who.agent_id}  # fmt: skip
    cpu0 = child_cpu_ms()
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-S", str(CLIENT), event],
                          input=json.dumps(payload).encode(), capture_output=True, env=env)  # fmt: skip
    return 1000 * (time.perf_counter() - t0), proc.stdout.decode(), child_cpu_ms() - cpu0


def daemon_cpu_ms(pid: int) -> float:
    """Processor ms used so far by the daemon and the processes under it (the vector index's
    spawner and child)."""
    try:
        return tree_cpu_ms(psutil.Process(pid))
    except psutil.Error:  # the daemon is gone
        return float("nan")


def settled(pid: int, timeout: float = 120.0) -> float:
    """:func:`daemon_cpu_ms` once the daemon is idle (under 25 ms of processor time in half a
    second: its worker has learned what it was given), or after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    last = daemon_cpu_ms(pid)
    while time.monotonic() < end:
        time.sleep(0.5)
        now = daemon_cpu_ms(pid)
        if now - last < 25:
            return now
        last = now
    return last


def query_session(folder: Path, i: int, bug: dict, test: str, trace: str, cwd: str):
    """Write the session up to the failure; return (writer, failure payload)."""
    name = f"latency-{i:04d}"
    w = d4j.Writer(folder / f"{name}.jsonl", name, cwd)
    w.user(f"The test {test} fails. Please fix it.")
    w.tool("Bash", {"command": d4j.test_command(test)}, d4j.failed_output(test, trace), True)
    w.save()
    inp = {"session_id": name, "transcript_path": str(w.path), "cwd": cwd,
           "hook_event_name": "PostToolUseFailure", "tool_name": "Bash",
           "tool_input": {"command": d4j.test_command(test)},
           "tool_use_id": f"toolu_{name}_{w.tools:03d}", "error": d4j.failed_output(test, trace),
           "is_interrupt": False}  # fmt: skip
    return w, inp


def passed(w: d4j.Writer, bug: dict, test: str, cwd: str) -> dict:
    """Append the fix's edits and the passing run; the PostToolUse payload of that run."""
    for h in d4j.hunks(bug.get("src_patch") or ""):
        w.tool("Edit", {"file_path": f"{cwd}/{h.path}", "old_string": h.buggy,
                        "new_string": h.fixed}, f"The file {cwd}/{h.path} has been updated.")  # fmt: skip
    w.tool("Bash", {"command": d4j.test_command(test)}, d4j.PASSED)
    w.save()
    return {"session_id": w.session, "transcript_path": str(w.path), "cwd": cwd,
            "hook_event_name": "PostToolUse", "tool_name": "Bash",
            "tool_input": {"command": d4j.test_command(test)},
            "tool_use_id": f"toolu_{w.session}_{w.tools:03d}",
            "tool_response": {"stdout": d4j.PASSED, "stderr": "", "interrupted": False}}  # fmt: skip


def stop(w: d4j.Writer, bug: dict, cwd: str) -> dict:
    """The agent states the fix and its turn ends: the Stop payload (the turn is indexed)."""
    w.say(d4j.fix_sentence(d4j.hunks(bug.get("src_patch") or "")))
    w.save()
    return {"session_id": w.session, "transcript_path": str(w.path), "cwd": cwd,
            "hook_event_name": "Stop", "stop_hook_active": False}  # fmt: skip


def measure(home: Path, who, cases: list[tuple[dict, str, str]], folder: Path, cwd: str,
            pause: float = 1.0, trip_cases: list | None = None) -> dict:  # fmt: skip
    """``cases``: (bug, failing test, trace); ``pause``: seconds between two sessions;
    ``trip_cases``: other failures, posted to the daemon directly (an error asked twice would
    find its embedding cached). Returns the latency figures (the hook errors' log lines among
    them)."""
    proc = start_daemon(home)
    fails, passes, cpu, injected = [], [], [], 0
    try:
        info = read_info(home)
        wait_model(info)
        for k in range(5):  # warm: the query path, the hook client's page cache
            bug, test, trace = cases[k % len(cases)]
            _w, inp = query_session(folder / "warm", k, bug, test, trace, cwd)
            hook_once(home, who, "PostToolUseFailure", {**inp, "session_id": f"warm-{k}"})
        load0, daemon0 = os.getloadavg()[0], daemon_cpu_ms(proc.pid)
        for i, (bug, test, trace) in enumerate(cases):
            w, inp = query_session(folder, i, bug, test, trace, cwd)
            took, out, used = hook_once(home, who, "PostToolUseFailure", inp)
            fails.append(took)
            cpu.append(used)
            injected += bool(out.strip())
            took, _out, used = hook_once(home, who, "PostToolUse", passed(w, bug, test, cwd))
            passes.append(took)
            cpu.append(used)
            hook_once(home, who, "Stop", stop(w, bug, cwd))
            time.sleep(pause)  # the agent's next turn: seconds later in real use
        daemon1 = settled(proc.pid)  # the worker done with the sessions' episodes
        trips = round_trips(info, who, trip_cases or [], folder, cwd) or [float("nan")]
        daemon2 = daemon_cpu_ms(proc.pid)
        log = home / "hooks.log"
        errors = log.read_text().splitlines() if log.exists() else []
    finally:
        proc.send_signal(signal.SIGTERM)  # the daemon drains its worker before it exits
        proc.wait(timeout=300)
    return {
        "n": len(cases),
        "post_tool_use_failure_p50_ms": round(statistics.median(fails), 1),
        "post_tool_use_failure_p95_ms": round(pct(fails, 95), 1),
        "post_tool_use_p50_ms": round(statistics.median(passes), 1),
        "post_tool_use_p95_ms": round(pct(passes, 95), 1),
        "client_cpu_p50_ms": round(statistics.median(cpu), 1),
        "daemon_cpu_per_session_ms": round((daemon1 - daemon0) / max(1, len(cases)), 1),
        "daemon_cpu_per_roundtrip_ms": round(
            (daemon2 - daemon1) / max(1, len(trip_cases or [])), 1
        ),
        "daemon_roundtrip_failure_p50_ms": round(statistics.median(trips), 1),
        "daemon_roundtrip_failure_p95_ms": round(pct(trips, 95), 1),
        "injected": injected,
        "hook_errors": len(errors),
        "hook_error_lines": errors[:5],
        "loadavg": round(os.getloadavg()[0], 2),
        "loadavg_start": round(load0, 2),
    }


def round_trips(info: dict, who, cases, folder: Path, cwd: str) -> list[float]:
    """The daemon's part alone: other failures posted from this process (fresh sessions), once
    the daemon's worker is done with the query sessions (:func:`settled`)."""
    headers = {"Authorization": f"Bearer {info['secret']}", "X-Pattern-Project": who.project_id,
               "X-Pattern-Agent": who.agent_id}  # fmt: skip
    out = []
    for i, (bug, test, trace) in enumerate(cases):
        _w, inp = query_session(folder / "trips", i, bug, test, trace, cwd)
        body = json.dumps({"input": {**inp, "session_id": f"trip-{i}"}}).encode()
        t0 = time.perf_counter()
        http_post(info["host"], info["port"], "/hooks/PostToolUseFailure", body, headers, 30)
        out.append(1000 * (time.perf_counter() - t0))
        time.sleep(0.2)
    return out


def learned_after(svc, who, n: int) -> dict:
    """What the worker made of the query sessions: sessions whose episode a lesson holds, and
    lesson uses counted for them (a success when the pass followed an injected lesson)."""
    rows = svc.store.reader.execute(
        "SELECT extra FROM lessons WHERE bucket=?", (who.bucket("team"),)
    ).fetchall()
    sessions: set[str] = set()
    for r in rows:
        block = json.loads(r["extra"]).get("lesson", {}).get("learned") or {}
        if not isinstance(block, dict):
            continue
        for s in [block.get("session"), *(x.get("session") for x in block.get("seen") or [])]:
            if str(s).startswith("latency-"):
                sessions.add(str(s))
    return {"sessions_learned": len(sessions), "sessions": n}
