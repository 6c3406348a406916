"""The service's errors: the whole typed tree, in one module for the service and its faces.

The root (``PatternError``) and the errors the storage layers raise themselves (``NotFound``,
``InvalidInput``, ``Conflict``, ``StoreUnavailable``) are defined in ``retrieval/errors.py``;
the errors of the service's rules (who may do what, how much) are defined here, and
``storage_error`` names a failing disk (full, read-only, damaged) as a ``StoreUnavailable``. The MCP tools
turn every one into a tool error ``[code] message {data}``; the CLI into ``error [code]: …``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from retrieval.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    PatternError,
    StoreUnavailable,
    storage_error,
)

if TYPE_CHECKING:  # the bridge imports this module and never pydantic
    from pydantic import ValidationError


class AccessDenied(PatternError):
    """The caller may see the record but not do this to it (e.g. delete another agent's)."""

    code = "access_denied"


class CoreProtected(PatternError):
    """A core memory is deleted only with ``force``."""

    code = "core_protected"


class LimitExceeded(PatternError):
    """A per-agent, per-category or per-project limit would be exceeded (never a silent drop)."""

    code = "limit_exceeded"


def invalid_fields(exc: ValidationError) -> str:
    """A validation error as ``where: what`` per field, without the values that were sent: an
    error is shown, logged and kept, so it must not repeat what the caller wrote."""
    return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())


__all__ = [
    "AccessDenied",
    "Conflict",
    "CoreProtected",
    "InvalidInput",
    "LimitExceeded",
    "NotFound",
    "PatternError",
    "StoreUnavailable",
    "invalid_fields",
    "storage_error",
]
