"""The documentation site states what the code does, where a test can tell.

- ``docs/configuration.md`` lists every ``PATTERN_*`` environment variable the code, the tests
  and the build read (found by a pattern over their text, so a new variable without a row
  fails here);
- ``docs/architecture.md``'s "where things live" table gives each package the import arrows
  that ``tests/runtime/test_layers.py`` enforces (:data:`tests.runtime.test_layers.ALLOWED`), and each part of
  ``server/`` the parts it may import (:data:`tests.runtime.test_layers.SERVER`).

Links, anchors and the nav are checked by ``mkdocs build --strict`` (``make docs``, part of
``make test``).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.runtime.test_layers import ALLOWED, PACKAGES, SERVER

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
VARIABLE = re.compile(r"\bPATTERN_[A-Z0-9]+(?:_[A-Z0-9]+)*\b")

# names that look like a variable but are not one the configuration page should list
NOT_VARIABLES = {
    "PATTERN_TOOLS": "a constant of tests/mcp_util.py (the tool names), not an environment variable",
    "PATTERN_HOOK": "the prefix of the PATTERN_HOOK_* variables (tests/hooks/test_hook_fuzz.py)",
}


def sources() -> list[Path]:
    """The code, the tests and the build files that may read a variable."""
    out = [ROOT / "Makefile", ROOT / ".ci" / "run"]
    for top in (*PACKAGES, "tests", "benchmarks", "scripts"):
        out += sorted((ROOT / top).rglob("*.py"))
    return [p for p in out if p.is_file()]


def variables_in_code() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sources():
        for name in VARIABLE.findall(path.read_text(encoding="utf-8")):
            found.setdefault(name, path)
    return {k: v for k, v in found.items() if k not in NOT_VARIABLES}


def test_the_configuration_page_lists_every_variable():
    found = variables_in_code()
    assert {"PATTERN_HOME", "PATTERN_HOOK_DEADLINE", "PATTERN_PG_POOL"} <= set(found)
    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    documented = {
        m for row in page.splitlines() if row.startswith("|") for m in VARIABLE.findall(row)
    }
    missing = {
        name: str(path.relative_to(ROOT)) for name, path in found.items() if name not in documented
    }
    assert missing == {}, "add a row to docs/configuration.md for each (name: where it is read)"


def stated_imports() -> dict[str, set[str]]:
    """Folder -> every module name its row's last column names (``server.mcp``, ``graph``…)."""
    page = (DOCS / "architecture.md").read_text(encoding="utf-8")
    section = page.split("## Where things live", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        rows[cells[0].split("`")[1]] = set(re.findall(r"`([a-z_.]+)`", cells[2]))
    return rows


def where_things_live() -> dict[str, set[str]]:
    """Folder -> the project packages its row says it may import (top-level names)."""
    return {
        folder: {n.split(".")[0] for n in names} & set(PACKAGES)
        for folder, names in stated_imports().items()
    }


def test_the_architecture_page_states_the_layer_arrows():
    rows = where_things_live()
    for pkg, allowed in ALLOWED.items():
        mine = [folder for folder in rows if folder.split("/")[0] == pkg]
        assert mine, f"docs/architecture.md has no row for {pkg}/"
        stated = set().union(*(rows[folder] for folder in mine))
        assert stated == allowed, (pkg, stated, allowed)


def test_every_top_level_folder_has_a_row():
    rows = where_things_live()
    folders = {
        p.name
        for p in ROOT.iterdir()
        if p.is_dir() and p.name in (*PACKAGES, "tests", "benchmarks", "scripts", "docs", ".ci")
    }
    assert folders <= {folder.split("/")[0] for folder in rows}, folders


def test_the_architecture_page_states_the_arrows_inside_server():
    """Each part of server/ (the service, each face) has a row naming exactly the parts it may
    import, as the layer test's SERVER table says."""
    rows = stated_imports()
    for part, allowed in SERVER.items():
        folder = part.replace(".", "/") + "/"
        assert folder in rows, f"docs/architecture.md has no row for {folder}"
        stated = {n for n in rows[folder] if n.startswith("server.")} - {part}
        stated = {n for n in stated if n in SERVER}
        assert stated == allowed, (folder, stated, allowed)
