"""Handlers of toold's custom methods, one module per area, and their table.

``requests()`` loads toold.handlers.table (one ``Request`` row per method) on the first
custom request, so the daemon answers ``initialize`` before loading pydantic models and
tools. Adding a method: its handler in the module of its area, and one row there.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toold.rpc import Request


@cache
def requests() -> dict[str, Request[Any, Any]]:
    """Every custom request by name (loaded on first use)."""
    from toold.handlers.table import REQUESTS

    return {request.name: request for request in REQUESTS}
