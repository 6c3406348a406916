"""The daemon's routes for client hooks and the session indexer (local callers only).

- ``POST /hooks/{EVENT}``: body ``{"client": NAME, "input": <the client's hook JSON>,
  "config": {…}}`` -> ``{"output": <the client's output JSON or null>, "note": …,
  "injected": [ids]}``. ``EVENT`` is the client's own event name; the client's
  :class:`~server.hooks.clients.spec.ClientSpec` (``client`` absent: Claude Code) translates
  its input to one of our handlers and the handler's text to its output.
- ``POST /hook-preview``: body ``{"prompt": …, "session": …, "config": {…}}`` -> what the
  UserPromptSubmit hook would inject for the prompt and why, candidate by candidate
  (``pattern-memory hook-preview``); nothing is injected or recorded.
- ``POST /sessions/index``: body ``{"path": …, "flush": bool, "final": bool, "maxBatches": n}``
  -> the indexer's report (``pattern-memory index-sessions`` calls it per transcript, in parts).

Why routes and not an MCP tool: these are the client's plumbing, not something a model should
see or call (a tool would sit in every agent's tool list, and a model could index any file it
names); and a hook's whole budget is tens of milliseconds, which a plain JSON POST keeps
(no JSON-RPC envelope, no MCP request handling). They sit on the same ASGI app as ``/mcp``, so
the daemon's auth middleware authenticates them first (identity from the trusted envelope);
on top of that they accept only the *local* secret, never a remote bearer token: a hook names
files to read on this machine, which only a process of the same user may ask for.
"""

from __future__ import annotations

import hmac
import json

import anyio
from pydantic import BaseModel, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from retrieval.errors import PatternError
from server.service.core.errors import invalid_fields
from server.service.core.identity import Identity
from server.service.prompting.hook_context import HookConfig
from server.service.prompting.hook_events import HookAnswer, HookRequest, HookService
from server.service.prompting.hook_preview import preview

from . import clients
from .clients.spec import ClientSpec

# a hook's vector query waits at most this (a hook's own deadline is 1.5 s by default): a
# vector index that does not answer in time leaves the hook its lexical candidates
HOOK_VECTOR_S = 0.5
# every event name some client sends (an unknown one is refused before its body is read)
ALL_EVENTS = frozenset(e for spec in clients.CLIENTS.values() for e in spec.events)
# a request body read at most (the hook client sends each string field up to 64 KB)
MAX_BODY_BYTES = 16 * 2**20


class _TooLarge(Exception):
    pass


class _UnknownEvent(Exception):
    pass


def translate_input(spec: ClientSpec, event: str, data: object) -> tuple[str, dict] | None:
    """(our handler, our input) for a client's hook JSON, or None (an event it ignores)."""
    if not isinstance(data, dict):
        raise ValueError(f"expected input to be a JSON object; found a JSON {type(data).__name__}")
    try:
        return spec.to_input(event, data)
    except Exception as exc:  # noqa: BLE001 - outside input never fails the route with a 500
        raise ValueError(f"the {spec.name} {event} input could not be read "
                         f"({type(exc).__name__})") from None  # fmt: skip


def can_show(spec: ClientSpec, event: str) -> bool:
    """Whether the client's answer to ``event`` can carry injected text at all."""
    return spec.to_output(event, "x") != spec.to_output(event, "")


def injected_text(output: dict | None) -> str:
    """The text a handler's answer injects (our handlers answer in Claude Code's form)."""
    inner = (output or {}).get("hookSpecificOutput") or {}
    text = inner.get("additionalContext") if isinstance(inner, dict) else None
    return text if isinstance(text, str) else ""


async def _body(request: Request) -> bytes:
    """The request's body, refused past :data:`MAX_BODY_BYTES` (never held whole beyond)."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


class PreviewRequest(BaseModel):
    prompt: str = Field(min_length=1, max_length=100_000)
    session: str | None = Field(default=None, max_length=200)
    config: HookConfig = Field(default_factory=HookConfig)


class IndexRequest(BaseModel):
    path: str = Field(min_length=1)
    flush: bool = False
    final: bool = False
    maxBatches: int | None = Field(default=None, ge=1)


def _local(request: Request, secret: str) -> bool:
    auth = request.headers.get("authorization", "")
    token = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
    return bool(secret) and hmac.compare_digest(token.encode(), secret.encode())


def _who(request: Request) -> Identity | None:
    return (request.scope.get("state") or {}).get("pattern_identity")


def _error(status: int, code: str, message: str, **data) -> JSONResponse:
    return JSONResponse({"error": code, "message": message, "data": data}, status_code=status)


def hook_routes(hooks: HookService, secret: str) -> list[Route]:
    async def guarded(request: Request, fn):
        who = _who(request)
        if who is None or not _local(request, secret):
            return _error(403, "access_denied", "hook routes accept the local secret only")
        try:
            body = json.loads(await _body(request) or b"{}")
        except _TooLarge:
            return _error(413, "invalid_input", f"expected a body of at most {MAX_BODY_BYTES} "
                          "bytes; found a longer one")  # fmt: skip
        except RecursionError:
            return _error(400, "invalid_input", "expected a JSON object; found JSON nested "
                          "deeper than the parser reads")  # fmt: skip
        except ValueError as exc:
            return _error(400, "invalid_input", f"expected a JSON object; {str(exc)[:200]}")
        if not isinstance(body, dict):
            return _error(400, "invalid_input", "expected a JSON object; found a JSON "
                          f"{type(body).__name__}")  # fmt: skip
        try:
            return JSONResponse(await anyio.to_thread.run_sync(fn, who, body))
        except _UnknownEvent as exc:
            return _error(404, "not_found", str(exc))
        except ValidationError as exc:  # never the values sent: the client logs this answer
            return _error(400, "invalid_input", invalid_fields(exc)[:2000])
        except ValueError as exc:
            return _error(400, "invalid_input", str(exc)[:2000])
        except PatternError as exc:
            status = 400 if exc.code in ("invalid_input", "not_found") else 409
            return _error(status, exc.code, exc.message, **exc.data)

    async def hook(request: Request):
        event = request.path_params["event"]
        if event not in ALL_EVENTS:
            return _error(404, "not_found", f"unknown hook event {event!r}")

        def run(who, body):
            spec = clients.get(body.get("client"))
            if event not in spec.events:
                raise _UnknownEvent(f"unknown hook event {event!r} for client {spec.name!r}")
            translated = translate_input(spec, event, body.get("input", {}))
            if translated is None:
                return HookAnswer(output=spec.to_output(event, ""),
                                  note=f"{spec.name} event {event} is not used").model_dump()  # fmt: skip
            handler, data = translated
            config = body.get("config", {})
            if isinstance(config, dict) and not can_show(spec, event):
                # the client has no field for context here: nothing is chosen, so nothing is
                # marked as shown to the session (the prompt is still recorded)
                config = {**config, "prompt_tokens": 0, "briefing_tokens": 0}
            req = HookRequest.model_validate({"event": handler, "input": data, "config": config})
            with hooks.svc.engine.vector_query_deadline(HOOK_VECTOR_S):  # within the hook's budget
                answer = hooks.handle(who, req)
            answer.output = spec.to_output(event, injected_text(answer.output))
            return answer.model_dump()

        return await guarded(request, run)

    async def index(request: Request):
        def run(who, body):
            req = IndexRequest.model_validate(body)
            report = hooks.indexer.index_file(who, req.path, flush=req.flush, final=req.final,
                                              max_batches=req.maxBatches)  # fmt: skip
            return {**report.model_dump(), "done": report.done}

        return await guarded(request, run)

    async def hook_preview(request: Request):
        def run(who, body):
            req = PreviewRequest.model_validate(body)
            return preview(hooks.svc, who, req.prompt, config=req.config, session=req.session,
                           pending=hooks.learner.mode != "review").model_dump()  # fmt: skip

        return await guarded(request, run)

    return [
        Route("/hook-preview", hook_preview, methods=["POST"]),
        Route("/hooks/{event}", hook, methods=["POST"]),
        Route("/sessions/index", index, methods=["POST"]),
    ]
