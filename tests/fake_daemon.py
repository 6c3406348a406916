"""A stand-in for the daemon, for the hook client's tests: a store folder whose lock the test
holds (so no real daemon is ever started) and whose ``daemon.json`` points at a TCP server in a
thread of the test (:class:`FakeDaemon`)."""

from __future__ import annotations

import fcntl
import json
import os
import random
import socket
import struct
import threading
from collections.abc import Sequence
from pathlib import Path


def http_answer(status: int, body: bytes, reason: bytes = b"OK", headers: bytes = b"") -> bytes:
    """A whole HTTP/1.1 answer: the status line, ``headers`` (CRLF-terminated lines), the length
    of ``body`` and ``Connection: close``, then ``body``."""
    return (b"HTTP/1.1 %d %s\r\n%sContent-Length: %d\r\nConnection: close\r\n\r\n"
            % (status, reason, headers, len(body)) + body)  # fmt: skip


def hold_home(home: Path, port: int | None = None) -> int:
    """Take ``home``'s store lock (returns its descriptor: closing it lets go) and, with a
    ``port``, write a ``daemon.json`` that sends the client there."""
    home.mkdir(parents=True, exist_ok=True)
    fd = os.open(home / "daemon.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    if port is not None:
        (home / "daemon.json").write_text(json.dumps(
            {"host": "127.0.0.1", "port": port, "secret": "s", "pid": os.getpid()}))  # fmt: skip
    return fd


class FakeDaemon:
    """A TCP server in a thread, one thread per connection. Modes: ``answer`` reads each request
    (its head and its ``Content-Length`` of body) and sends :attr:`response` (raw bytes, which
    a test may change between requests); ``crash`` sends one of ``crashes`` per connection,
    chosen by a seeded random generator, without reading (``None``: a reset, SO_LINGER 0);
    ``hung`` accepts and never answers. :attr:`bodies` keeps the request bodies read."""

    def __init__(self, mode: str = "answer", response: bytes = b"",
                 crashes: Sequence[bytes | None] = (), seed: int = 0) -> None:  # fmt: skip
        self.mode, self.response, self.crashes = mode, response, list(crashes)
        self.rng = random.Random(seed)
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(64)
        self.srv.settimeout(0.1)
        self.port = self.srv.getsockname()[1]
        self.held: list[socket.socket] = []
        self.bodies: list[bytes] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.srv.accept()
            except OSError:  # the accept timeout included
                continue
            if self.mode == "hung":
                self.held.append(conn)
                continue
            crash = self.rng.choice(self.crashes) if self.mode == "crash" else None
            threading.Thread(target=self._one, args=(conn, crash), daemon=True).start()

    def _one(self, conn: socket.socket, crash: bytes | None) -> None:
        try:
            conn.settimeout(10)
            if self.mode == "crash":
                if crash is None:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                else:
                    conn.sendall(crash)
                return
            head = b""
            while b"\r\n\r\n" not in head:
                data = conn.recv(65536)
                if not data:
                    return
                head += data
            head, _, body = head.partition(b"\r\n\r\n")
            length = next((int(x.split(b":")[1]) for x in head.split(b"\r\n")
                           if x.lower().startswith(b"content-length:")), 0)  # fmt: skip
            while len(body) < length:
                data = conn.recv(1 << 20)
                if not data:
                    return
                body += data
            self.bodies.append(body)
            conn.sendall(self.response)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        for c in self.held:
            c.close()
        self.srv.close()
