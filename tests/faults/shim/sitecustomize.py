"""Faults injected into a daemon under test: Python imports this module at the start of every
process that has this folder on its ``PYTHONPATH`` (the daemon, and its vector index child).
Each fault is switched by a file, so that a test turns it on and off while the daemon runs; the
machine itself (its clock, its disks) is never touched.

- ``FAULTS_CLOCK_FILE``: the wall clock (``time.time``, ``time.time_ns``, ``datetime.now``,
  ``utcnow``, ``today``) runs that file's number of seconds off (read again whenever it changes).
  The monotonic clock is left alone, as a step of the system clock leaves it.
- ``FAULTS_FULL_FILE``: while that file exists, every SQLite statement that writes fails as
  SQLite fails on a full disk (``SQLITE_FULL``, "database or disk is full"), for a test that
  cannot mount a small file system to fill.
"""

import datetime as _dt
import os
import sqlite3 as _sqlite3
import time as _time

_CLOCK = os.environ.get("FAULTS_CLOCK_FILE")
_FULL = os.environ.get("FAULTS_FULL_FILE")

if _CLOCK:
    _real_time, _real_time_ns = _time.time, _time.time_ns
    _state = {"offset": 0.0, "stamp": None}

    def _offset() -> float:
        try:
            st = os.stat(_CLOCK)
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
            if stamp != _state["stamp"]:  # changed: read it again
                with open(_CLOCK, encoding="ascii") as fh:
                    _state["offset"] = float(fh.read().strip() or 0)
                _state["stamp"] = stamp
        except (OSError, ValueError):
            pass
        return _state["offset"]

    _time.time = lambda: _real_time() + _offset()
    _time.time_ns = lambda: _real_time_ns() + int(_offset() * 1e9)

    class _ShiftedDatetime(_dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return super().now(tz) + _dt.timedelta(seconds=_offset())

        @classmethod
        def utcnow(cls):
            return super().utcnow() + _dt.timedelta(seconds=_offset())

        @classmethod
        def today(cls):
            return super().today() + _dt.timedelta(seconds=_offset())

    _dt.datetime = _ShiftedDatetime

if _FULL:
    _WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "COMMIT", "CREATE", "DROP")

    def _full(sql: str) -> None:
        if os.path.exists(_FULL) and sql.lstrip().upper().startswith(_WRITES):
            exc = _sqlite3.OperationalError("database or disk is full")
            exc.sqlite_errorcode, exc.sqlite_errorname = 13, "SQLITE_FULL"
            raise exc

    class _Connection(_sqlite3.Connection):
        def execute(self, sql, *args):
            _full(sql)
            return super().execute(sql, *args)

        def executemany(self, sql, *args):
            _full(sql)
            return super().executemany(sql, *args)

    _connect = _sqlite3.connect

    def _connect_full(*args, **kwargs):
        kwargs.setdefault("factory", _Connection)
        return _connect(*args, **kwargs)

    _sqlite3.connect = _connect_full
