"""The root of the typed error tree and the errors the storage layers raise themselves.

Every error carries a stable ``code`` and JSON-able ``data``. The service's own rule errors
(``AccessDenied``, ``CoreProtected``, ``LimitExceeded``) live with the service, in
``server/service/errors.py``, which re-exports these so the faces import one module. The MCP
layer turns errors into tool errors; the CLI turns them into messages. Nothing below
``server/`` raises anything else on purpose.
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


class InvalidInput(PatternError):
    code = "invalid_input"


class Conflict(PatternError):
    code = "conflict"


class StoreUnavailable(PatternError):
    code = "store_unavailable"
