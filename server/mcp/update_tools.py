"""Facts that changed, as tools: ``supersede``, and the client's model as the judge of a write's
candidates (MCP sampling, ``PATTERN_UPDATE_JUDGE=sampling``). Thin adapters over
``server/service/updating/supersede.py`` and ``server/service/updating/update_judge.py``."""

from __future__ import annotations

import logging
import warnings
from typing import Annotated

import anyio
from mcp import types
from mcp.server.mcpserver import Context
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from server.service.core.identity import Identity
from server.service.core.models import Superseded
from server.service.core.runtime import Runtime
from server.service.updating import supersede, update_judge
from server.service.updating.supersede import SupersedeResult

from .toolset import ToolSet, call, session_of

log = logging.getLogger("pattern_memory.candidates")
tools = ToolSet()


@tools("supersede")
async def supersede_tool(
    old: Annotated[str, Field(description="Id of the record that is no longer true.")],
    new: Annotated[str, Field(description="Id of the record that replaces it.")],
    ctx: Context,
) -> SupersedeResult:
    """Say that `new` replaces `old`: the same subject with a new value (a changed decision,
    a moved service, a new count). Both are kept; recall then puts `new` first and marks `old`
    "updated by <new> on <date>". Use it when a write lists candidates and yours replaces one,
    or when recall marks two records as possibly stating the same thing and the newer is the
    current one. If both stay true, do nothing. Both must be memories (or observations) of the
    same scope that you can see; a person can undo the link in the dashboard."""
    rt, who = session_of(ctx)
    return await call(lambda: supersede.link(rt.service, who, old, new))


def _samples(ctx: Context) -> bool:
    """The client declared sampling, and the connection lets the server ask during a call:
    the handshake-era protocols (up to 2025-11-25) send the request on the session; a
    2026-07-28 connection has no channel for it (its clients are asked nothing)."""
    try:
        version = ctx.request_context.protocol_version
        if version in MODERN_PROTOCOL_VERSIONS:
            return False
        wanted = types.ClientCapabilities(sampling=types.SamplingCapability())
        return bool(ctx.session.check_client_capability(wanted))
    except Exception:  # no session to ask (a call outside a client connection)
        return False


async def _ask(ctx: Context, question: str) -> str | None:
    """The client's model's answer to one question (None: no text came back)."""
    message = types.SamplingMessage(
        role="user", content=types.TextContent(type="text", text=question)
    )
    with warnings.catch_warnings():  # sampling is deprecated by the newest protocol only
        warnings.simplefilter("ignore")
        with anyio.fail_after(update_judge.TIMEOUT_S):
            reply = await ctx.session.create_message(
                messages=[message], max_tokens=update_judge.MAX_TOKENS,
                system_prompt=update_judge.SYSTEM, temperature=0.0,
            )  # fmt: skip
    content = reply.content
    return content.text if isinstance(content, types.TextContent) else None


async def judged(
    ctx: Context, rt: Runtime, who: Identity, new: str, listed: list[str],
    stop: float | None = None,
) -> tuple[list[str], list[str]]:  # fmt: skip
    """With the judge on and a client that samples: ask its model about each candidate of the
    write ``new``; a clear yes links it (``judged``). Returns (the old ids linked, the
    candidates still listed). No question is asked after ``stop`` (``anyio.current_time()``;
    default :data:`~update_judge.TOTAL_S` from now). Any failure leaves a candidate listed
    (logged)."""
    if rt.settings.update_judge != "sampling" or not listed or not _samples(ctx):
        return [], listed
    linked, left = [], []
    stop = anyio.current_time() + update_judge.TOTAL_S if stop is None else stop
    for line in listed:
        old = line.split(" · ", 1)[0]
        if anyio.current_time() >= stop:
            left.append(line)
            continue
        try:
            pair = await call(lambda old=old: supersede.check_pair(rt.service, who, old, new))
            answer = await _ask(ctx, update_judge.question(*pair))
            if update_judge.clear_yes(answer):
                await call(lambda old=old: supersede.link(rt.service, who, old, new, "judged"))
                linked.append(old)
                continue
        except Exception as exc:  # the judge is a help: the candidate stays listed
            log.warning("the client's model did not judge %s -> %s: %s", old, new, exc)
        left.append(line)
    return linked, left


async def with_judgement(ctx: Context, rt: Runtime, who: Identity, result):
    """A write's result (remember's, update-memory's) after the judge, when it is on: the
    candidates its model accepted move to ``supersedes`` (``judged``)."""
    linked, left = await judged(ctx, rt, who, result.memoryId, result.candidates)
    if linked:
        result.supersedes += [Superseded(memoryId=old, how="judged") for old in linked]
        result.candidates = left
        result.candidatesNote = result.candidatesNote if left else None
    return result


async def observations_judged(ctx: Context, rt: Runtime, who: Identity, result):
    """``add_observations``' result after the judge (see :func:`with_judgement`): one call is
    one write, its questions share one :data:`~update_judge.TOTAL_S`."""
    kept = []
    stop = anyio.current_time() + update_judge.TOTAL_S
    for group in result.candidates:
        linked, left = await judged(ctx, rt, who, group.observationId, group.candidates, stop)
        if left:
            kept.append(group.model_copy(update={"candidates": left}))
    result.candidates = kept
    result.candidatesNote = result.candidatesNote if kept else None
    return result


__all__ = ["judged", "observations_judged", "supersede_tool", "tools", "with_judgement"]
