"""Scope routing (Patchouli): which store serves which scope.

A JSON file named by ``PATTERN_ROUTES`` maps scopes to stores, first match wins, with an
explicit default::

    {"routes": [{"name": "shared", "scopes": ["public"],
                 "url": "https://memory.example.com/mcp", "tokenEnv": "PATTERN_SHARED_TOKEN"}],
     "default": "local"}

``local`` is this machine's daemon. Writes go to the route of their scope; a single write whose
items map to two routes is refused (it could not be atomic). Reads that span scopes
(``recall-context``, ``recall``) ask every route for its own scopes and merge the answers;
calls by memory id try the routes in order until one knows the id; everything else goes to the
default route.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError, model_validator

from server.service.core.errors import InvalidInput
from server.service.core.scopes import SCOPE_NAMES as SCOPES

from ..service.trust import framing

LOCAL = "local"

# tool -> the scope(s) a call writes to, from its arguments
FIXED_SCOPE = {
    "remember-task": "private",
    "remember-learning": "private",
    "core-memory": "personal",
}
BY_ID = {"forget", "commit-insight", "update-memory"}
FAN_OUT = {"recall-context", "recall"}


class Route(BaseModel):
    name: str
    scopes: list[str]
    url: str | None = Field(default=None, description="A remote daemon's MCP endpoint.")
    token: str | None = None
    tokenEnv: str | None = None

    @model_validator(mode="after")
    def _check(self) -> Route:
        bad = [s for s in self.scopes if s not in SCOPES]
        if bad:
            raise ValueError(f"route {self.name!r}: unknown scopes {bad}")
        if self.name != LOCAL and not self.url:
            raise ValueError(f"route {self.name!r} needs a url")
        return self

    def bearer(self, env: Mapping[str, str]) -> str | None:
        return self.token or (env.get(self.tokenEnv) if self.tokenEnv else None)


class RoutingTable(BaseModel):
    routes: list[Route] = Field(default_factory=list)
    default: str

    @model_validator(mode="after")
    def _check(self) -> RoutingTable:
        names = {r.name for r in self.routes} | {LOCAL}
        if self.default not in names:
            raise ValueError(f"default route {self.default!r} is not defined")
        return self

    def route_of_scope(self, scope: str) -> str:
        for route in self.routes:  # first match
            if scope in route.scopes:
                return route.name
        return self.default

    def names(self) -> list[str]:
        return list(dict.fromkeys([self.default, *(r.name for r in self.routes)]))

    def scopes_of(self, name: str) -> list[str]:
        return [s for s in SCOPES if self.route_of_scope(s) == name]

    def get(self, name: str) -> Route | None:
        return next((r for r in self.routes if r.name == name), None)

    def write_route(self, tool: str, args: dict) -> str | None:
        """The one route a write goes to; None if the tool is not scope-routed.
        Raises InvalidInput when one call would write to two routes."""
        if tool in FIXED_SCOPE:
            return self.route_of_scope(FIXED_SCOPE[tool])
        if tool == "remember":
            return self.route_of_scope(args.get("scope") or "private")
        if tool == "share-learning":
            targets = {self.route_of_scope("team")}
            targets |= {self.route_of_scope("private"), self.route_of_scope("personal")}
            if len(targets) > 1:
                raise InvalidInput(
                    "share-learning moves a memory from private/personal to team, which are "
                    f"served by different routes ({', '.join(sorted(targets))}); a single write "
                    "never spans two routes: remember it in the team scope instead"
                )
            return targets.pop()
        if tool == "remember-bulk":
            items = args.get("memories") or []
            routes = {self.route_of_scope((m or {}).get("scope") or "private") for m in items}
            if len(routes) > 1:
                raise InvalidInput(
                    f"these memories belong to different routes ({', '.join(sorted(routes))}); "
                    "a single write never spans two routes: send one remember-bulk per route"
                )
            return routes.pop() if routes else self.default
        return None


def load_routes(env: Mapping[str, str] | None = None) -> RoutingTable | None:
    env = os.environ if env is None else env
    path = env.get("PATTERN_ROUTES", "").strip()
    if not path:
        return None
    try:
        return RoutingTable.model_validate(json.loads(Path(path).expanduser().read_text()))
    except (OSError, json.JSONDecodeError, ValidationError) as exc:
        raise InvalidInput(f"PATTERN_ROUTES={path}: {exc}") from exc


def tool_result(payload: dict, error: str | None = None) -> dict:
    if error:
        return {"content": [{"type": "text", "text": error}], "isError": True}
    return {
        "content": [{"type": "text", "text": json.dumps(payload, indent=2)}],
        "structuredContent": payload,
        "isError": False,
    }


def _merge_recall_context(table: RoutingTable, parts: dict[str, dict], limit: int) -> dict:
    merged: dict = {s: [] for s in SCOPES}
    merged.update(chunks=[], counts={s: 0 for s in (*SCOPES, "expired")}, summary="", ranking="")
    summaries = []
    for name, res in parts.items():
        for scope in table.scopes_of(name):
            merged[scope] = res.get(scope, [])
            merged["counts"][scope] = res.get("counts", {}).get(scope, 0)
        merged["counts"]["expired"] += res.get("counts", {}).get("expired", 0)
        merged["chunks"] += res.get("chunks", [])
        if res.get("summary"):  # one framing line for all, not one per store
            lines = [ln for ln in res["summary"].split("\n") if ln != framing.HEADER]
            summaries.append("\n".join(lines))
        merged["ranking"] = merged["ranking"] or res.get("ranking", "")
    if summaries:
        summaries.insert(0, framing.HEADER)
    summary = "\n".join(summaries).encode()[:4096].decode(errors="ignore")
    merged["summary"] = (
        summary.rsplit("\n", 1)[0] if len("\n".join(summaries)) > len(summary) else summary
    )
    return merged


def _merge_recall(parts: dict[str, dict], args: dict) -> dict:
    items = sorted(
        (i for r in parts.values() for i in r.get("items", [])), key=lambda i: -i["score"]
    )
    items = items[: int(args.get("limit") or 20)]
    scale = 4 if (args.get("unit") or "tokens") == "tokens" else 1
    capacity = int(args.get("budget") or 1500) * scale
    entries = [
        framing.Entry(
            item.get("provenance") or item.get("location") or f"{item['scope']}/{item['category']}",
            framing.body(item["content"], item.get("kind", "")),
            item.get("suspicious"),
        )
        for item in items
    ]  # the stores' items, quoted like one store's (framing.py)
    packed = framing.pack(entries, capacity, include_suspicious=bool(args.get("includeSuspicious")))
    kept = []
    for item, (_, state) in zip(items, packed.states, strict=False):
        kept.append({**item, "truncated": state == "truncated", "inText": state != "withheld"})
    text = packed.text
    modes = {r.get("mode") for r in parts.values() if r.get("mode")}
    return {"items": kept, "text": text, "used": -(-len(text) // scale),
            "budget": int(args.get("budget") or 1500), "unit": args.get("unit") or "tokens",
            "mode": " + ".join(sorted(modes)) or "hybrid",
            "dropped_duplicates": sum(r.get("dropped_duplicates", 0) for r in parts.values())}  # fmt: skip


class Router:
    """Sends each tools/call to the right store(s); ``links`` map route names to objects with
    ``post(message) -> dict | None`` (the bridge's daemon and remote links)."""

    def __init__(self, table: RoutingTable, links: dict) -> None:
        self.table = table
        self.links = links

    def _call(self, route: str, message: dict, args: dict) -> dict:
        msg = {**message, "params": {**message["params"], "arguments": args}}
        answer = self.links[route].post(msg) or {}
        if "error" in answer:
            raise ConnectionError(f"route {route}: {answer['error'].get('message')}")
        return answer.get("result") or {}

    def call(self, message: dict) -> dict:
        params = message.get("params") or {}
        tool, args = params.get("name"), dict(params.get("arguments") or {})
        reply = {"jsonrpc": "2.0", "id": message.get("id")}
        try:
            if tool in FAN_OUT:
                wanted = args.get("scopes") or list(SCOPES)
                parts = {}
                for name in self.table.names():
                    scopes = [s for s in self.table.scopes_of(name) if s in wanted]
                    if scopes:
                        res = self._call(name, message, {**args, "scopes": scopes})
                        if res.get("isError"):
                            return {**reply, "result": res}
                        parts[name] = res.get("structuredContent") or {}
                merged = (
                    _merge_recall(parts, args) if tool == "recall"
                    else _merge_recall_context(self.table, parts, int(args.get("limit") or 50))
                )  # fmt: skip
                return {**reply, "result": tool_result(merged)}
            if tool in BY_ID:
                res: dict = {}
                for name in self.table.names():  # the first store that knows the id
                    res = self._call(name, message, args)
                    text = (res.get("content") or [{}])[0].get("text", "")
                    if not (res.get("isError") and "[not_found]" in text):
                        break
                return {**reply, "result": res}
            route = self.table.write_route(tool, args) or self.table.default
            return {**reply, "result": self._call(route, message, args)}
        except InvalidInput as exc:
            return {**reply, "result": tool_result({}, f"[invalid_input] {exc.message}")}
