"""The daemon's listening socket: its connections send each write at once (TCP_NODELAY).

uvicorn serves the socket through ``loop.create_server(sock=...)``; asyncio sets TCP_NODELAY
on an accepted connection only when the socket says ``IPPROTO_TCP``. A socket made as
``socket.socket(AF_INET)`` says 0, and its connections kept Nagle's algorithm: a response's
body waited for the acknowledgement of its head, which a client on a kept-alive connection
delays by up to 40 ms (every other call through a bridge took 40 ms longer).
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys

import pytest

from server.http.daemon import listening_socket
from server.service.core.errors import InvalidInput


def nodelay_of_accepted(sock: socket.socket) -> int:
    """TCP_NODELAY of a connection accepted on ``sock`` the way uvicorn accepts one."""

    async def run() -> int:
        loop = asyncio.get_running_loop()
        seen: asyncio.Future[int] = loop.create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport) -> None:
                conn = transport.get_extra_info("socket")
                seen.set_result(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        server = await loop.create_server(Probe, sock=sock)
        host, port = sock.getsockname()[:2]
        _reader, writer = await asyncio.open_connection(host, port)
        try:
            return await asyncio.wait_for(seen, 10)
        finally:
            writer.close()
            server.close()
            await server.wait_closed()

    return asyncio.run(run())


def test_the_daemons_connections_send_each_write_at_once():
    sock = listening_socket("127.0.0.1", 0)
    assert sock.proto == socket.IPPROTO_TCP
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    assert nodelay_of_accepted(sock)


def test_a_socket_made_without_its_protocol_would_keep_nagle():
    """The case the daemon's socket avoids: asyncio leaves such a connection as it is."""
    sock = socket.socket(socket.AF_INET)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    assert nodelay_of_accepted(sock) == 0


def test_a_port_in_use_or_a_host_that_does_not_resolve_is_a_clear_error():
    first = listening_socket("127.0.0.1", 0)
    port = first.getsockname()[1]
    try:
        with pytest.raises(InvalidInput, match=f"cannot listen on 127.0.0.1:{port}: .*in use"):
            listening_socket("127.0.0.1", port)
    finally:
        first.close()
    with pytest.raises(InvalidInput, match="cannot listen on no-such-host.invalid:8080") as err:
        listening_socket("no-such-host.invalid", 8080)
    assert err.value.data == {"host": "no-such-host.invalid", "port": 8080}


def test_the_daemon_command_says_so_instead_of_a_traceback(tmp_path):
    first = listening_socket("127.0.0.1", 0)
    port = first.getsockname()[1]
    try:
        run = subprocess.run(
            [sys.executable, "-m", "server.cli", "daemon", "--home", str(tmp_path / "h"),
             "--http", f"127.0.0.1:{port}"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        first.close()
    assert run.returncode == 2, run.stderr
    assert f"error [invalid_input]: cannot listen on 127.0.0.1:{port}" in run.stderr
    assert "Traceback" not in run.stderr
