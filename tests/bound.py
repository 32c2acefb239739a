"""A workspace bound as the daemon binds it, for tests that drive the gateway directly."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from toold.assembly import bind
from toold.tools.context import CallContext
from toold.tools.toolset import ToolOutcome
from toold.workspace import WorkspaceState

T = TypeVar("T")


def run_bound(
    workspace: Path, scenario: Callable[[WorkspaceState], Awaitable[T]], **config: Any
) -> T:
    """Bind ``workspace`` in bypass mode (``config``: more toold.toml sections), run
    ``scenario`` on it, and close it."""
    overrides = {"permissions": {"mode": "bypass"}, **config}
    state = bind(workspace, overrides, lambda *_: None, pytest.fail)

    async def main() -> T:
        try:
            return await scenario(state)
        finally:
            await state.aclose()

    return asyncio.run(main())


async def call(state: WorkspaceState, tool: str, origin: str = "agent", **args: Any) -> ToolOutcome:
    """One call through the workspace's gateway."""
    return await state.gateway.call(tool, args, CallContext(origin=origin))
