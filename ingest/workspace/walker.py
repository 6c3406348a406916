"""The workspace walker: which files under a root are ingested, and why the others are not.

Rules, in order:
- ignore files: ``.gitignore`` at every level (git semantics via ``pathspec``: the deepest
  directory's rules win, ``!`` re-includes, a pruned directory is never entered), plus a
  ``.patternignore`` beside any of them (same syntax, overrides ``.gitignore`` of its level) and the
  root's ``.git/info/exclude``;
- build output and tool folders are pruned (:data:`SKIP_DIRS`, ``*.egg-info``), as are the store
  folder itself when it lies inside the root;
- lock files, minified bundles and known binary extensions are skipped by name;
- symlinks: a directory symlink is never entered (its target, when inside the root, is walked
  anyway, and cycles are impossible); a file symlink is followed only when its resolved target
  lies inside the root; nothing outside the root is ever opened;
- files over the size cap are skipped by ``stat`` alone; binaries (a NUL byte or invalid UTF-8)
  are detected by :func:`decode_text`.

The walk itself only lists and stats; reading happens in :func:`read_bytes` (through
``ingest.workspace.file_inside``), which re-checks the file when it opens it (``O_NOFOLLOW`` and
``O_NONBLOCK`` on the resolved path, ``fstat``), so a swap after the walk cannot make it read
outside the root, nor wait on a named pipe.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from ingest.workspace.file_inside import NotRead, read_inside, special

DEFAULT_MAX_FILE_KB = 512

SKIP_DIRS = frozenset(
    """.git .hg .svn .bzr node_modules bower_components dist build target .venv venv
    __pycache__ .mypy_cache .pytest_cache .ruff_cache .tox .nox .eggs .cache .next .nuxt
    .gradle .idea .vscode .terraform .bench-cache htmlcov coverage site-packages""".split()
)
LOCK_FILES = frozenset(
    """package-lock.json yarn.lock pnpm-lock.yaml poetry.lock Pipfile.lock Cargo.lock uv.lock
    composer.lock Gemfile.lock go.sum npm-shrinkwrap.json bun.lockb flake.lock pdm.lock
    mix.lock pubspec.lock Podfile.lock""".split()
)
SKIP_SUFFIXES = (".min.js", ".min.css", ".map", ".lock")
BINARY_EXTENSIONS = frozenset(
    """png jpg jpeg gif bmp ico icns webp tif tiff psd svgz pdf zip gz tgz bz2 xz zst 7z rar tar
    jar war ear class so dylib dll exe o a lib obj pyc pyo pyd whl egg bin dat db sqlite
    sqlite3 npy npz pkl pickle pt pth ckpt safetensors onnx h5 hdf5 parquet arrow feather
    mp3 mp4 m4a wav flac ogg avi mov mkv webm woff woff2 ttf otf eot ds_store""".split()
)
IGNORE_FILES = (".gitignore", ".patternignore")


@dataclass(frozen=True)
class Candidate:
    """A file the walk accepts: its path under the root (a link's own path for a followed
    symlink), its path relative to the root (posix, as shown to users), the stat values the
    incremental check compares, and the resolved file to read (inside the root)."""

    path: Path
    rel: str
    size: int
    mtime_ns: int
    real: Path | None = None

    @property
    def source(self) -> Path:
        return self.real or self.path


@dataclass(frozen=True)
class Skipped:
    rel: str
    reason: str


@dataclass
class WalkResult:
    files: list[Candidate] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    pruned_dirs: int = 0


@dataclass
class _Rules:
    """The ignore specs in force in one directory, shallowest first: (base, prefix, spec).
    ``base`` is the spec's folder relative to the root; for a spec above the root (the
    enclosing git repository's), ``prefix`` is the root relative to that spec's folder."""

    specs: tuple[tuple[str, str, pathspec.PathSpec], ...] = ()

    def ignored(self, rel: str, is_dir: bool) -> bool:
        # deepest level first: the first level with a matching pattern decides
        for base, prefix, spec in reversed(self.specs):
            sub = rel[len(base) + 1 :] if base else rel
            sub = f"{prefix}/{sub}" if prefix else sub
            res = spec.check_file(sub + "/" if is_dir else sub)
            if res.include is not None:
                return bool(res.include)
        return False


def _read_spec(paths: list[Path]) -> pathspec.PathSpec | None:
    lines: list[str] = []
    for p in paths:
        try:
            if p.is_file() and not p.is_symlink():
                lines.extend(p.read_text(encoding="utf-8", errors="replace").splitlines())
        except OSError:
            continue
    return pathspec.GitIgnoreSpec.from_lines(lines) if lines else None


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def skip_by_name(name: str) -> str | None:
    """A reason to skip a file by its name alone, or None."""
    if name in LOCK_FILES:
        return "lock file"
    lower = name.lower()
    if lower.endswith(SKIP_SUFFIXES):
        return "lock file" if lower.endswith(".lock") else "generated (minified or source map)"
    ext = lower.rsplit(".", 1)[-1] if "." in lower else ""
    if ext in BINARY_EXTENSIONS or lower == ".ds_store":
        return "binary (by extension)"
    return None


class Walker:
    """Lists the ingestible files under ``root`` (see the module docstring for the rules)."""

    def __init__(
        self,
        root: str | Path,
        *,
        max_file_bytes: int = DEFAULT_MAX_FILE_KB * 1024,
        exclude: list[Path] | None = None,
    ) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise NotADirectoryError(str(self.root))
        self.max_file_bytes = max_file_bytes
        self.exclude = [Path(p).resolve() for p in exclude or []]

    def _excluded(self, path: Path) -> bool:
        return any(_inside(path, ex) for ex in self.exclude)

    def walk(self) -> WalkResult:
        out = WalkResult()
        self._walk_dir(self.root, "", self._outer_rules(), out)
        out.files.sort(key=lambda c: c.rel)
        return out

    def _outer_rules(self) -> _Rules:
        """When the root lies inside a git repository, the ignore files of its ancestors up to
        the repository root apply too (as git applies them), and ``.git/info/exclude``."""
        top = next((d for d in [self.root, *self.root.parents] if (d / ".git").exists()), None)
        if top is None:
            return _Rules()
        specs = []
        exclude = _read_spec([top / ".git" / "info" / "exclude"])
        prefix = self.root.relative_to(top).as_posix()
        prefix = "" if prefix == "." else prefix
        if exclude is not None:
            specs.append(("", prefix, exclude))
        folder = top
        for part in [None, *Path(prefix).parts] if prefix else [None]:
            folder = folder / part if part else folder
            if folder == self.root:
                break
            spec = _read_spec([folder / ".gitignore", folder / ".patternignore"])
            if spec is not None:
                specs.append(("", self.root.relative_to(folder).as_posix(), spec))
        for _, pfx, spec in specs:  # the root itself is ignored (e.g. inside .venv): the user
            parts = pfx.split("/")  # asked for it explicitly, so only its own rules apply
            if any(
                spec.check_file("/".join(parts[: i + 1]) + "/").include for i in range(len(parts))
            ):
                return _Rules()
        return _Rules(tuple(specs))

    def _walk_dir(self, directory: Path, rel_dir: str, rules: _Rules, out: WalkResult) -> None:
        spec = _read_spec([directory / ".gitignore", directory / ".patternignore"])
        if spec is not None:
            rules = _Rules((*rules.specs, (rel_dir, "", spec)))
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            out.skipped.append(Skipped(rel_dir or ".", f"unreadable directory ({exc.strerror})"))
            return
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                is_link = entry.is_symlink()
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                if entry.name in SKIP_DIRS or entry.name.endswith(".egg-info"):
                    out.pruned_dirs += 1
                    continue
                if rules.ignored(rel, True) or self._excluded(Path(entry.path)):
                    out.pruned_dirs += 1
                    continue
                self._walk_dir(Path(entry.path), rel, rules, out)
                continue
            if is_link and self._link_is_dir(entry):
                if not rules.ignored(rel, True):
                    out.skipped.append(Skipped(rel, "symlink to a directory (not followed)"))
                continue
            if rules.ignored(rel, False) or entry.name in IGNORE_FILES:
                continue
            self._consider_file(entry, rel, is_link, out)

    @staticmethod
    def _link_is_dir(entry: os.DirEntry) -> bool:
        try:
            return entry.is_dir(follow_symlinks=True)
        except OSError:
            return False

    def _consider_file(self, entry: os.DirEntry, rel: str, is_link: bool, out: WalkResult) -> None:
        reason = skip_by_name(entry.name)
        if reason:
            out.skipped.append(Skipped(rel, reason))
            return
        path = Path(entry.path)
        real = None
        if is_link:
            try:
                target = path.resolve(strict=True)
            except (OSError, RuntimeError):
                out.skipped.append(Skipped(rel, "broken symlink"))
                return
            if not _inside(target, self.root):
                out.skipped.append(Skipped(rel, "symlink pointing outside the root"))
                return
            real = target
        try:
            st = real.stat() if real else entry.stat(follow_symlinks=False)
        except OSError as exc:
            out.skipped.append(Skipped(rel, f"unreadable ({exc.strerror})"))
            return
        if not stat.S_ISREG(st.st_mode):
            out.skipped.append(Skipped(rel, "not a regular file"))
            return
        if self._excluded(real or path):
            return
        if st.st_size > self.max_file_bytes:
            out.skipped.append(
                Skipped(
                    rel, f"too large ({st.st_size // 1024} KB > {self.max_file_bytes // 1024} KB)"
                )
            )
            return
        out.files.append(Candidate(path, rel, st.st_size, st.st_mtime_ns, real))


def read_bytes(path: Path, root: Path, max_bytes: int) -> bytes:
    """Read a walked file without following a symlink swapped in after the walk, and never
    past the size cap (a file that grew is refused)."""
    if not _inside(path, root):
        raise PermissionError(f"{path} is outside {root}")
    return read_within(path, [root], max_bytes)


def read_within(path: str | Path, roots: Sequence[str | Path], max_bytes: int) -> bytes:
    """The bytes of the regular file ``path``, which must lie inside one of ``roots`` when it
    is read, not only when it was found (``ingest.workspace.file_inside``: opened by its resolved path
    with ``O_NOFOLLOW`` and ``O_NONBLOCK``, so neither a link nor a named pipe swapped in after
    the walk is followed or waited on; the open file checked against the roots; at most
    ``max_bytes`` read, a larger file or one that grows while it is read refused).

    Raises ``PermissionError`` (outside the roots, or swapped while opened), ``ValueError``
    (too large), ``OSError`` (missing, not a regular file, unreadable)."""
    try:
        return read_inside(path, roots, max_bytes)[0]
    except NotRead as exc:
        if exc.kind in ("outside", "changed"):
            what = "is outside the allowed directories" if exc.kind == "outside" else (
                "changed while it was opened")  # fmt: skip
            raise PermissionError(f"{path} {what}") from None
        if exc.kind == "too_large":
            raise ValueError(
                f"too large ({exc.size // 1024} KB > {max_bytes // 1024} KB)"
            ) from None
        if exc.kind == "grew":
            raise ValueError(f"too large (grew past {max_bytes // 1024} KB while read)") from None
        if exc.kind == "special":
            raise OSError(f"{path}: {special(exc.mode)}, not a regular file") from None
        raise exc.error or OSError(f"{path}: unreadable") from None


def decode_text(data: bytes) -> str | None:
    """The text of a file, or None for a binary (a NUL byte or invalid UTF-8)."""
    if b"\x00" in data:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text[1:] if text.startswith("\ufeff") else text
