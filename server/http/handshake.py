"""The static handshake of ``pattern-memory serve``: what the bridge answers at once, without
waiting for the daemon: ``initialize``, ``tools/list`` and the other list calls, whose answers
depend only on the code (``server/http/handshake.json``, checked in).

    python -m server.http.handshake            # rewrite server/http/handshake.json from the server's code
    python -m server.http.handshake --check    # exit 1 if the file differs from the server's answers

The answers are the daemon's own: each call is posted in-process to the ASGI app the daemon
serves (stateless streamable HTTP with JSON answers), nothing is hand-written.
``tests/test_handshake.py`` fails when the checked-in file drifts from the server (a tool added,
renamed, re-described or given another schema): run the command above and commit the file.

The file holds the ``initialize`` result without its ``protocolVersion`` and the handshake
protocol versions the SDK negotiates (the bridge answers the version the client asked for when
it is one of them, else the newest, as the SDK does), and each list call's answer (``result``
or ``error``: a daemon answers ``server/discover`` with "method not found", and a client then
falls back to ``initialize``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

FILE = Path(__file__).with_name("handshake.json")
# the calls answered from the file, with their parameters (none: the first page of a list)
LISTS = ("tools/list", "resources/list", "resources/templates/list", "prompts/list")
DISCOVER = "server/discover"
MODERN_META = "io.modelcontextprotocol/protocolVersion"  # a 2026-style per-request envelope


def load(path: Path | str = FILE) -> dict:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def _discover_params(version: str) -> dict:
    return {"_meta": {MODERN_META: version,
                      "io.modelcontextprotocol/clientInfo": {"name": "handshake", "version": "0"},
                      "io.modelcontextprotocol/clientCapabilities": {}}}  # fmt: skip


async def _answers() -> dict:
    """Post the handshake and list calls to the daemon's ASGI app, in-process."""
    from types import SimpleNamespace

    import httpx
    from mcp_types.version import (
        HANDSHAKE_PROTOCOL_VERSIONS,
        LATEST_HANDSHAKE_VERSION,
        LATEST_MODERN_VERSION,
    )

    from ..mcp.app import create_server

    # listing needs no store: the lifespan yields this stand-in for the runtime
    app = create_server(runtime=SimpleNamespace()).streamable_http_app(
        json_response=True, stateless_http=True
    )
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:1") as http,
    ):
        n = 0

        async def post(method: str, params: dict | None, version: str | None) -> dict:
            nonlocal n
            n += 1
            message = {"jsonrpc": "2.0", "id": n, "method": method}
            if params is not None:
                message["params"] = params
            headers = {"Accept": "application/json, text/event-stream"}
            if version:
                headers["MCP-Protocol-Version"] = version
            resp = await http.post("/mcp", json=message, headers=headers)
            resp.raise_for_status()
            answer = resp.json()
            return {k: answer[k] for k in ("result", "error") if k in answer}

        init = {"capabilities": {}, "clientInfo": {"name": "handshake", "version": "0"}}
        initialize = None
        for version in HANDSHAKE_PROTOCOL_VERSIONS:
            got = await post("initialize", {**init, "protocolVersion": version}, None)
            result = dict(got["result"])
            if result.pop("protocolVersion") != version:
                raise RuntimeError(f"the server does not negotiate {version}")
            if initialize not in (None, result):
                raise RuntimeError(f"initialize answers differ by version ({version})")
            initialize = result
        unknown = await post("initialize", {**init, "protocolVersion": "1900-01-01"}, None)
        if unknown["result"]["protocolVersion"] != LATEST_HANDSHAKE_VERSION:
            raise RuntimeError("an unknown version is not answered with the newest")
        answers: dict = {}
        for method in LISTS:
            seen = {
                json.dumps(await post(method, None, version), sort_keys=True)
                for version in HANDSHAKE_PROTOCOL_VERSIONS
            }
            if len(seen) != 1:
                raise RuntimeError(f"{method} answers differ by protocol version")
            answers[method] = json.loads(seen.pop())
        answers[DISCOVER] = await post(DISCOVER, _discover_params(LATEST_MODERN_VERSION), None)
    return {
        "protocolVersions": list(HANDSHAKE_PROTOCOL_VERSIONS),
        "latestProtocolVersion": LATEST_HANDSHAKE_VERSION,
        "initialize": initialize,
        "answers": answers,
    }


def generate() -> dict:
    import anyio

    return anyio.run(_answers)


def dump(data: dict) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only compare, exit 1 when it differs")
    ap.add_argument("--out", default=str(FILE), help="where to write (default: %(default)s)")
    args = ap.parse_args(argv)
    text = dump(generate())
    out = Path(args.out)
    current = out.read_text(encoding="utf-8") if out.exists() else None
    if args.check:
        if current != text:
            print(f"{out} is out of date: run python -m server.http.handshake", file=sys.stderr)
            return 1
        print(f"{out} is current")
        return 0
    if current == text:
        print(f"{out} unchanged")
        return 0
    out.write_text(text, encoding="utf-8")
    tools = len(json.loads(text)["answers"]["tools/list"]["result"]["tools"])
    print(f"wrote {out} ({tools} tools)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
