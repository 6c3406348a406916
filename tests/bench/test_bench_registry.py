"""``python -m benchmarks list|run``, the registry behind it, and the direction of the imports
inside ``benchmarks/``: the labs on top, the harness at the bottom."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import __main__ as cli
from benchmarks.registry import BENCHMARKS, find
from tests.import_graph import import_graph, modules

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"


def test_every_entry_names_a_script_a_question_and_a_command():
    names = [b.name for b in BENCHMARKS]
    assert len(names) == len(set(names))
    for b in BENCHMARKS:
        assert b.path.is_file(), b.name
        assert "__main__" in b.path.read_text(encoding="utf-8"), f"{b.name} cannot be run"
        assert b.question and b.command.startswith(f"python -m benchmarks run {b.name}")
        for stem in b.published:
            assert (BENCH / "published" / f"{stem}.json").is_file(), stem


def test_every_script_of_the_folder_is_listed_or_a_part_of_one():
    """A script that can be run is in the registry; the rest are parts others import."""
    listed = {b.path for b in BENCHMARKS}
    for path in [*BENCH.glob("*.py"), *(BENCH / "lab").glob("*.py")]:
        if path.name.startswith("__") or path.name == "registry.py":
            continue
        if 'if __name__ == "__main__"' in path.read_text(encoding="utf-8"):
            assert path in listed, f"{path.relative_to(ROOT)} is not in benchmarks/registry.py"


def test_names_are_found_as_typed_on_the_command_line():
    assert find("gate-fit").name == "gate_fit"
    assert find("relevance.py").name == "relevance"
    with pytest.raises(KeyError, match="no benchmark"):
        find("nope")


def test_list_shows_each_benchmark_and_the_labs_after_them(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    labs = out.index("labs (")
    for b in BENCHMARKS:
        at = out.index(f"\n{b.name}\n")
        assert (at > labs) == b.lab, b.name
        assert b.question in out and b.command in out
    assert "published: relevance-scifact.json, " in out


def test_run_passes_the_arguments_through():
    """A subprocess, as a user runs it: the script's own parser answers."""
    run = subprocess.run([sys.executable, "-m", "benchmarks", "run", "scan-speed", "--help"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("usage: scan_speed.py") and "--sizes" in run.stdout


def test_run_of_an_unknown_name_or_no_command_is_refused(capsys):
    assert cli.main(["run", "nope"]) == 2
    assert "no benchmark 'nope'" in capsys.readouterr().err
    assert cli.main([]) == 2
    assert cli.main(["walk"]) == 2


# ----------------------------------------------------------------------------- imports
def test_the_harness_imports_no_benchmark_and_nothing_imports_a_lab():
    """The direction inside benchmarks/ (tests/runtime/test_import_circles.py: and no circles)."""
    graph = import_graph(modules(["benchmarks"]))
    assert any(m.startswith("benchmarks.harness.") for m in graph)
    assert any(m.startswith("benchmarks.lab.") for m in graph)
    for mod, deps in graph.items():
        if mod.startswith("benchmarks.harness"):
            assert all(d.startswith("benchmarks.harness") for d in deps), (mod, deps)
        if not mod.startswith("benchmarks.lab"):
            assert not any(d.startswith("benchmarks.lab") for d in deps), (mod, deps)
