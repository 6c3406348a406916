"""The two files by which a store's daemon is found: ``daemon.lock`` (an exclusive ``flock``
held by the owner; the kernel releases it when the owner dies) and ``daemon.json`` (its address,
pid and local secret, readable only by the store's user).

Standard library only and no ``pathlib``: the hook client (``server/hookclient.py``, run with
``python -S``) reads these files too, and its start-up is measured in milliseconds.
"""

from __future__ import annotations

import json
import os

LOCK_FILE = "daemon.lock"
INFO_FILE = "daemon.json"


def read_info(home) -> dict | None:
    """The running daemon's ``daemon.json``, or None when there is none (or it is half-written)."""
    try:
        with open(os.path.join(home, INFO_FILE), encoding="utf-8") as fh:
            return json.loads(fh.read())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def owner_alive(home) -> bool:
    """True while some process holds the store lock (the authoritative test: a dead owner's
    lock is released by the kernel, even if it left daemon.json behind)."""
    import fcntl

    try:
        fd = os.open(os.path.join(home, LOCK_FILE), os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
