"""The checkouts a benchmark measures: this tree, and a previous release checked out beside it
with its own ``.venv`` (``--old-root``)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("retrieval", "server", "graph", "ingest")


def python_of(root: Path) -> str:
    """The interpreter of the checkout ``root``: its ``.venv``'s, or this one for this tree
    (and for a checkout without a ``.venv``)."""
    own = root / ".venv" / "bin" / "python"
    return sys.executable if root == ROOT or not own.exists() else str(own)


def compile_tree(root: Path) -> None:
    """Compile the project's modules of ``root`` with its own interpreter, as ``pip`` does for
    an installed package: under ``PYTHONDONTWRITEBYTECODE`` a start from a checkout would
    otherwise compile every module it imports, every time."""
    subprocess.run([python_of(root), "-m", "compileall", "-q", "-j", "0",
                    *(str(root / d) for d in PACKAGES)],
                   check=True, capture_output=True)  # fmt: skip


def moved(path: str, earlier: str, name: str):
    """``name`` from module ``path``, or from ``earlier`` in a tree from before the modules
    moved into domain folders: ``--old-root`` runs a benchmark's measuring part on the
    previous release."""
    try:
        module = importlib.import_module(path)
    except ModuleNotFoundError:
        module = importlib.import_module(earlier)
    return getattr(module, name)
