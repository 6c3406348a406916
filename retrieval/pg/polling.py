"""The replica's polling period, ``PATTERN_PG_POLL_MS``: how long a follower waits for a
NOTIFY before it catches up anyway (the fallback for a notification lost with its
connection). Standard library only, so ``pattern-memory serve``'s bridge can check the value
before it answers (server/service/core/envsettings.py).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from retrieval.errors import InvalidInput

DEFAULT_MS = 500.0
# below this a follower would catch up against PostgreSQL hundreds of times a second
MIN_MS = 10.0


def poll_seconds(env: Mapping[str, str] | None = None) -> float:
    """The period in seconds: ``PATTERN_PG_POLL_MS`` of ``env`` (the process's environment by
    default), else :data:`DEFAULT_MS`. Raises :class:`InvalidInput` for anything but a finite number of
    milliseconds of at least :data:`MIN_MS` (0, a negative number or NaN would make the
    follower query PostgreSQL without pause; NaN would also turn the fallback off)."""
    raw = ((os.environ if env is None else env).get("PATTERN_PG_POLL_MS") or "").strip()
    if not raw:
        return DEFAULT_MS / 1000
    try:
        ms = float(raw[:40])
    except ValueError:
        ms = math.nan
    if len(raw) > 40 or not math.isfinite(ms) or ms < MIN_MS:
        shown = repr(raw[:40])  # escapes can make it ten times longer: cut what is quoted
        raise InvalidInput(
            f"PATTERN_PG_POLL_MS={shown if len(shown) <= 60 else shown[:59] + '…'}: use a "
            f"number of milliseconds of at least {MIN_MS:g} (default {DEFAULT_MS:g})"
        )
    return ms / 1000
