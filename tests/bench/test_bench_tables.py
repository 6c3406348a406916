"""The result tables of docs/benchmarks.md are what scripts/bench_tables.py makes of the
committed runs in benchmarks/published/, so a table cannot drift from its JSON."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from benchmarks.registry import published_by

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bt():
    spec = importlib.util.spec_from_file_location(
        "bench_tables", ROOT / "scripts" / "bench_tables.py"
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_tables"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop("bench_tables", None)


def test_every_table_of_the_page_equals_its_json(bt):
    doc = bt.DOC.read_text(encoding="utf-8")
    assert bt.generate(doc) == doc, "run: python scripts/bench_tables.py"
    assert bt.main(["--check"]) == 0


def test_every_table_is_on_the_page_once_and_every_marker_has_a_table(bt):
    names = [m.group("name") for m in bt.BLOCK.finditer(bt.DOC.read_text(encoding="utf-8"))]
    assert sorted(names) == sorted(bt.TABLES)


def test_every_published_run_names_its_command_and_data(bt):
    files = sorted(bt.PUBLISHED.glob("*.json"))
    assert len(files) >= 15
    used = {stem for t in bt.TABLES.values() for _, cells in t.rows for stem, _, _ in cells}
    assert used <= {f.stem for f in files}
    by = published_by()
    assert sorted(by) == sorted(f.stem for f in files), "benchmarks/registry.py: published"
    for f in files:
        run = json.loads(f.read_text(encoding="utf-8"))
        assert {"benchmark", "command", "data", "model", "result"} <= set(run), f.name
        # the run names the script it ran (as it was called then); the registry its module now
        script = run["benchmark"].split()[0]
        assert script == f"{by[f.stem].name}.py", f.name
        assert re.match(rf"python benchmarks/(lab/)?{re.escape(script)}", run["command"]), f.name
        assert by[f.stem].path.is_file(), f.name


def test_a_changed_value_changes_its_table(bt, tmp_path, monkeypatch):
    pub = tmp_path / "published"
    shutil.copytree(bt.PUBLISHED, pub)
    run = json.loads((pub / "relevance-jira.json").read_text())
    run["result"]["hybrid"]["recall@10"] = 0.5
    del run["result"]["lexical"]
    (pub / "relevance-jira.json").write_text(json.dumps(run))
    monkeypatch.setattr(bt, "PUBLISHED", pub)
    doc = bt.DOC.read_text(encoding="utf-8")
    new = bt.generate(doc)
    assert new != doc
    assert "| **hybrid** | **0.500** | **" in new  # Jira is the first column
    assert re.search(r"\| lexical \| – \| \d\.\d{3} \|", new)


def test_the_page_cites_only_committed_files():
    doc = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert "benchmarks/results" not in doc
    for path in set(re.findall(r"`((?:benchmarks|scripts|tests)/[\w/.-]+\.(?:py|json))`", doc)):
        assert (ROOT / path).is_file(), path
