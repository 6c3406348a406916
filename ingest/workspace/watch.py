"""``--watch``: keep a root's chunks current as its files change (``watchfiles``, debounced).

The watcher starts before the first full run (``watchfiles``' notifier registers its watches
when it is created and keeps every event until it is asked), so a file changed while the first
run reads the tree is picked up by the run after it. Every debounced batch of file-system
events triggers an incremental run: the walk and ``stat`` are cheap (an unchanged tree costs well under 1 % of the first run),
only the files whose ``stat`` changed are read, only changed chunks are embedded. Running the
same incremental pass (instead of acting on each event) means ignore-file edits, renames and
deletions are handled by exactly the rules of a normal run. Events inside pruned folders
(``.git``, ``node_modules``, build output, the store itself) never wake the loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from ingest.workspace.pipeline import Ingestor, IngestReport, Progress
from ingest.workspace.walker import SKIP_DIRS

DEBOUNCE_MS = 1600


def make_filter(root: Path, store_home: Path):
    from watchfiles import DefaultFilter

    class _Filter(DefaultFilter):
        ignore_dirs = tuple(sorted(set(DefaultFilter.ignore_dirs) | SKIP_DIRS))

    home = store_home.resolve()
    return _Filter(ignore_paths=[home] if home == root or root in home.parents else [])


def notifier_for(root: Path):
    """The notifier ``watchfiles.watch`` builds (same defaults and WATCHFILES_* variables;
    watchfiles is pinned), created by us so that it exists before the first run."""
    from watchfiles import main as wf
    from watchfiles._rust_notify import RustNotify

    return RustNotify(
        [str(root)],
        wf._default_debug(None),
        wf._default_force_polling(None),
        wf._default_poll_delay_ms(300),
        True,
        wf._default_ignore_permission_denied(None),
    )


def watch(
    ingestor: Ingestor,
    root: str | Path,
    on_report: Callable[[IngestReport], None],
    *,
    progress: Callable[[Progress], None] | None = None,
    stop: threading.Event | None = None,
    debounce_ms: int = DEBOUNCE_MS,
    step_ms: int = 50,
) -> None:
    """Start watching ``root``, ingest it, then re-ingest incrementally after each debounced
    batch of changes (including those made during the first run), until ``stop`` is set or
    the process is interrupted (SIGINT ends the loop quietly)."""
    from watchfiles import Change

    root = Path(root).resolve()
    keep = make_filter(root, Path(ingestor.engine.home))
    with notifier_for(root) as notifier:  # watching from here on: before the first run
        on_report(ingestor.run(root, progress, stop))
        while stop is None or not stop.is_set():
            raw = notifier.watch(debounce_ms, step_ms, 5_000, stop)
            if raw in ("stop", "signal"):
                return
            if raw == "timeout" or not any(keep(Change(c), p) for c, p in raw):
                continue
            report = ingestor.run(root, progress, stop)
            if report.files_indexed or report.files_removed or report.errors:
                on_report(report)
