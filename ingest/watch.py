"""``--watch``: keep a root's chunks current as its files change (``watchfiles``, debounced).

After the first full run, every debounced batch of file-system events triggers an incremental
run: the walk and ``stat`` are cheap (an unchanged tree costs well under 1 % of the first run),
only the files whose ``stat`` changed are read, only changed chunks are embedded. Running the
same incremental pass (instead of acting on each event) means ignore-file edits, renames and
deletions are handled by exactly the rules of a normal run. Events inside pruned folders
(``.git``, ``node_modules``, build output, the store itself) never wake the loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from .pipeline import Ingestor, IngestReport, Progress
from .walker import SKIP_DIRS

DEBOUNCE_MS = 1600


def make_filter(root: Path, store_home: Path):
    from watchfiles import DefaultFilter

    class _Filter(DefaultFilter):
        ignore_dirs = tuple(sorted(set(DefaultFilter.ignore_dirs) | SKIP_DIRS))

    home = store_home.resolve()
    return _Filter(ignore_paths=[home] if home == root or root in home.parents else [])


def watch(
    ingestor: Ingestor,
    root: str | Path,
    on_report: Callable[[IngestReport], None],
    *,
    progress: Callable[[Progress], None] | None = None,
    stop: threading.Event | None = None,
    debounce_ms: int = DEBOUNCE_MS,
) -> None:
    """Ingest ``root``, then re-ingest incrementally after each debounced batch of changes,
    until ``stop`` is set or the process is interrupted."""
    from watchfiles import watch as watch_changes

    root = Path(root).resolve()
    on_report(ingestor.run(root, progress, stop))
    for _changes in watch_changes(
        root,
        watch_filter=make_filter(root, Path(ingestor.engine.home)),
        debounce=debounce_ms,
        stop_event=stop,
        raise_interrupt=False,
    ):
        report = ingestor.run(root, progress, stop)
        if report.files_indexed or report.files_removed or report.errors:
            on_report(report)
