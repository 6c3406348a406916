"""The typed error tree. Every error carries a stable ``code`` and JSON-able ``data``.

The MCP layer turns these into tool errors; the CLI turns them into messages. Nothing
below ``server/`` raises anything else on purpose.
"""

from __future__ import annotations

from typing import Any


class PatternError(Exception):
    """Base of every error the memory service raises on purpose."""

    code = "pattern_error"

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__(message)
        self.message = message
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "data": self.data}

    def __str__(self) -> str:  # pragma: no cover - trivial
        return f"[{self.code}] {self.message}"


class NotFound(PatternError):
    code = "not_found"


class AccessDenied(PatternError):
    code = "access_denied"


class CoreProtected(PatternError):
    code = "core_protected"


class InvalidInput(PatternError):
    code = "invalid_input"


class Conflict(PatternError):
    code = "conflict"


class LimitExceeded(PatternError):
    code = "limit_exceeded"


class StoreUnavailable(PatternError):
    code = "store_unavailable"
