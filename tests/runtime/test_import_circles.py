"""No import circles anywhere, and folders a newcomer can read: every module of the package,
the benchmarks, the scripts and the tests is read with ``ast`` (function-level and dynamic
imports too), and no two modules may import each other, directly or through others. Every
folder of the package holds at most :data:`MAX_MODULES` modules and opens with a docstring
saying what lives there."""

from __future__ import annotations

import ast

import pytest

from tests.import_graph import ROOT, circles, import_graph, modules

FOLDERS = ("retrieval", "ingest", "graph", "server", "benchmarks", "scripts", "tests")
PACKAGE = ("retrieval", "ingest", "graph", "server")
MAX_MODULES = 16


def test_no_import_circles():
    found = circles(import_graph(modules(FOLDERS)))
    assert found == [], (
        "modules that import each other (move what they share into a module both import): "
        + "; ".join(" <-> ".join(c) for c in found)
    )


def test_the_walk_reads_every_folder():
    names = {m for m, _ in modules(FOLDERS)}
    for expected in ("retrieval.engine", "server.service.memories.memory", "tests.import_graph"):
        assert expected in names
    assert any(n.startswith("benchmarks.") for n in names)


def _write(root, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_planted_circle_is_caught(tmp_path):
    """The rule can fail: a circle of two, a circle of three through a function-level import
    and a ``from package import module``, and a dynamic import are each found; a chain is not."""
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg import b\n",
            "pkg/b.py": "import pkg.a\n",
            "pkg/c.py": "def f():\n    from .d import x\n",
            "pkg/d.py": "from pkg.e import y\n",
            "pkg/e.py": "import importlib\nimportlib.import_module('pkg.c')\n",
            "pkg/f.py": "from pkg import a\n",
        },
    )
    found = circles(import_graph(modules(["pkg"], tmp_path)))
    assert found == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.d", "pkg.e"]]


def package_folders():
    seen = {}
    for _module, path in modules(PACKAGE):
        seen.setdefault(path.parent, []).append(path)
    return sorted(seen.items())


def crowded(folders) -> list[str]:
    out = []
    for folder, paths in folders:
        names = [p for p in paths if p.name != "__init__.py"]
        init = folder / "__init__.py"
        if len(names) > MAX_MODULES:
            out.append(f"{folder}: {len(names)} modules (at most {MAX_MODULES}: split by concept)")
        if not init.exists() or not ast.get_docstring(ast.parse(init.read_text())):
            out.append(f"{folder}: no __init__.py docstring saying what lives here")
    return out


def test_every_folder_is_small_and_says_what_it_holds():
    assert crowded(package_folders()) == []


def test_a_crowded_folder_is_caught(tmp_path):
    big = tmp_path / "big"
    big.mkdir()
    (big / "__init__.py").write_text('"""Seventeen modules."""\n')
    paths = [big / "__init__.py"]
    for n in range(MAX_MODULES + 1):
        (big / f"m{n}.py").write_text("")
        paths.append(big / f"m{n}.py")
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "__init__.py").write_text("")
    found = crowded([(big, paths), (bare, [bare / "__init__.py"])])
    assert len(found) == 2 and "17 modules" in found[0] and "docstring" in found[1]


@pytest.mark.parametrize("folder", ["retrieval", "ingest", "graph", "server"])
def test_each_layer_has_domain_folders(folder):
    subs = [p for p in (ROOT / folder).iterdir() if (p / "__init__.py").exists()]
    assert subs or folder == "graph"
