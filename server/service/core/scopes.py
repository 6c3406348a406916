"""Pattern's scope and category rules, TTLs and limits, in one place."""

from __future__ import annotations

from datetime import datetime, timedelta

from retrieval.records import MAX_TEXT_BYTES, RecordFilter, Scope, check_text
from retrieval.storage.buckets import SCOPE_NAMES  # noqa: F401 - the scope names, narrowest first, for the faces
from server.service.core.errors import InvalidInput

CATEGORIES: dict[Scope, tuple[str, ...]] = {
    Scope.private: ("recent", "tasks", "longterm"),
    Scope.personal: ("core", "longterm", "recent", "tasks"),
    Scope.team: ("decisions", "architecture", "learnings"),
    Scope.public: ("decisions", "architecture", "learnings"),
}
ALL_CATEGORIES = ("core", "longterm", "recent", "tasks", "decisions", "architecture", "learnings")
DEFAULT_CATEGORY = {Scope.private: "longterm", Scope.personal: "longterm",
                    Scope.team: "learnings", Scope.public: "learnings"}  # fmt: skip
TTL: dict[str, timedelta] = {"recent": timedelta(hours=24), "tasks": timedelta(hours=24)}

# Without a query, recall-context lists memories in this order (then priority, then recency).
CATEGORY_ORDER = {c: i for i, c in enumerate(
    ("core", "decisions", "architecture", "learnings", "longterm", "tasks", "recent"))}  # fmt: skip

MAX_CONTENT_BYTES = MAX_TEXT_BYTES
MAX_TAGS = 10
MAX_TAG_CHARS = 50
MAX_CORE_PER_AGENT = 100
MAX_PER_AGENT = 10_000
MAX_SHARED_PER_PROJECT = 10_000
MAX_PER_CATEGORY = {"recent": 1_000, "tasks": 500, "core": MAX_CORE_PER_AGENT}


def check_scope_category(scope: Scope | str, category: str) -> tuple[Scope, str]:
    """Validate a scope/category pair; returns the parsed pair or raises InvalidInput."""
    try:
        scope = Scope(scope)
    except ValueError:
        raise InvalidInput(
            f"invalid scope {scope!r}: use one of private, personal, team, public", scope=scope
        ) from None
    allowed = CATEGORIES[scope]
    if category not in allowed:
        raise InvalidInput(
            f"category {category!r} is not allowed in scope {scope.value!r}; "
            f"allowed: {', '.join(allowed)}",
            scope=scope.value,
            category=category,
            allowed=list(allowed),
        )
    return scope, category


def expiry_for(category: str, now: datetime) -> datetime | None:
    ttl = TTL.get(category)
    return now + ttl if ttl else None


def check_graph_scope(scope: str | None):
    """The scope of a graph or lesson tool (``graph.common.parse_scope``: the tools' own check
    and message), for a face that checks its input before it calls a tool."""
    from graph.common import parse_scope

    return parse_scope(scope)


def check_content(content: str) -> None:
    check_text(content, "content")


def check_metadata(metadata: dict) -> dict:
    """Validate tags (≤10 × 50 chars) and priority (1-3, default 2); returns a clean copy."""
    meta = dict(metadata or {})
    tags = meta.get("tags")
    if tags is not None:
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise InvalidInput("metadata.tags must be a list of strings", field="tags")
        tags = list(dict.fromkeys(t.strip() for t in tags if t.strip()))
        if len(tags) > MAX_TAGS:
            raise InvalidInput(
                f"at most {MAX_TAGS} tags are allowed, got {len(tags)}",
                field="tags", limit=MAX_TAGS, got=len(tags),
            )  # fmt: skip
        long = [t for t in tags if len(t) > MAX_TAG_CHARS]
        if long:
            raise InvalidInput(
                f"tags must be at most {MAX_TAG_CHARS} characters: {long[0][:60]!r}",
                field="tags", limit=MAX_TAG_CHARS, got=len(long[0]),
            )  # fmt: skip
        meta["tags"] = tags
    if "priority" in meta and meta["priority"] is not None:
        p = meta["priority"]
        if isinstance(p, bool) or not isinstance(p, int) or not 1 <= p <= 3:
            raise InvalidInput(
                f"metadata.priority must be 1, 2 or 3 (1 = high), got {p!r}", field="priority"
            )
    return meta


def tool_filter(who, args, now, kinds, updated_after=None) -> RecordFilter:
    """The RecordFilter of a tool's filter arguments (scopes, categories, tags, priority and
    date ranges, shared by recall-context and recall) for the caller's visible buckets."""
    return RecordFilter(
        buckets=who.visible_buckets(list(args.scopes) if args.scopes else None),
        kinds=kinds,
        categories=args.categories or None,
        tags=args.tags or None,
        min_priority=args.minPriority,
        max_priority=args.maxPriority,
        created_after=args.createdAfter,
        created_before=args.createdBefore,
        updated_after=updated_after if updated_after is not None else args.updatedAfter,
        updated_before=args.updatedBefore,
        now=now,
    )
