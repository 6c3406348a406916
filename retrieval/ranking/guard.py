"""A ranking feature never fails a query.

A search reads what it ranks: the time prior reads the times a record's text speaks of, the
prompt gate stems its words, an excerpt widens its best window, a citation's check reads the
file it cites. Any of them meets text that nobody wrote for it (a template's "May 0000", a word
of a thousand letters, a binary dump pasted into a memory). A feature that fails on one record
is dropped for that record, and the query answers without it; a feature of the query itself
that fails (its time phrases, its terms) is dropped for that query.

    guarded("time prior: stated times", stated_times, text, written, default=[], record=rid)

returns ``stated_times(text, written)``, or ``default`` when it raises. Each failure is counted
(:func:`dropped_counts`) and logged at most once per :data:`LOG_EVERY_S` for each feature and
error type, never once per record: a query over a thousand bad records writes one line. The
line names the feature, the error type, where it was raised and one record's id; never the
record's text (it may hold what the write policy keeps out of logs).

Only ``Exception`` is caught: an interrupt or an exit still stops the process.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger(__name__)
LOG_EVERY_S = 3600.0  # one line per feature and error type per hour at most

T = TypeVar("T")
_lock = threading.Lock()
_counts: dict[tuple[str, str], int] = {}
_logged: dict[tuple[str, str], float] = {}


def _origin(exc: BaseException) -> str:
    """``file.py:line in function`` where ``exc`` was raised (its innermost frame)."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "?"
    f = frames[-1]
    return f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} in {f.name}"


def dropped(feature: str, exc: BaseException, record: str | None = None) -> None:
    """Count a failure of ``feature`` (for ``record``, when it was one record's), and log it
    unless this feature and error type were logged in the last :data:`LOG_EVERY_S`."""
    key = (feature, type(exc).__name__)
    now = time.monotonic()
    with _lock:
        n = _counts[key] = _counts.get(key, 0) + 1
        last = _logged.get(key)
        if last is not None and now - last < LOG_EVERY_S:
            return
        _logged[key] = now
    log.warning(
        "%s dropped%s: %s at %s (%d time%s so far; logged once an hour per feature and error)",
        feature, f" for record {record}" if record else " for this query", key[1],
        _origin(exc), n, "" if n == 1 else "s",
    )  # fmt: skip


def guarded(
    feature: str, fn: Callable[..., T], *args: Any, default: T, record: str | None = None,
    **kwargs: Any,
) -> T:  # fmt: skip
    """``fn(*args, **kwargs)``, or ``default`` when it raises (counted and logged by
    :func:`dropped`). ``default`` is returned as it is: pass a fresh value, not a shared
    mutable one the caller changes."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the point: one feature never fails the query
        dropped(feature, exc, record)
        return default


def dropped_counts() -> dict[tuple[str, str], int]:
    """{(feature, error type): failures} since the process started."""
    with _lock:
        return dict(_counts)


__all__ = ["LOG_EVERY_S", "dropped", "dropped_counts", "guarded"]
