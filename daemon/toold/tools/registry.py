"""BareAgent's two layers over the one registry: get_tools() and get_handlers().

get_tools() exposes every schema (deferred ones from the start); get_handlers()
binds the runtime objects and returns name -> callable. The module-level
TOOL_HANDLERS are unbound stubs that say how to bind them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from toold.tools import formats
from toold.tools.provider import BuiltinToolProvider
from toold.tools.runtime import ToolRuntime

BASE_TOOLS: tuple[str, ...] = ("bash", "read_file", "write_file", "edit_file", "glob", "grep")
DEFERRED_TOOLS: tuple[str, ...] = (
    "todo_write",
    "todo_read",
    "subagent",
    "load_skill",
    "task_create",
    "task_list",
    "task_get",
    "task_update",
    "background_run",
    "team_spawn",
    "team_send",
    "team_list",
)

Handler = Callable[..., Awaitable[Any]]


def get_tools() -> list[dict[str, Any]]:
    """Every tool's internal schema ``{name, description, parameters}``, as fresh copies."""
    return [formats.internal(t) for t in BuiltinToolProvider().get_tools()]


def get_handlers(workspace: str | Path, **runtime: Any) -> dict[str, Handler]:
    """Bind every tool to ``workspace`` and the given runtime objects.

    Keyword arguments are ToolRuntime fields (config, todos, tasks, skills,
    background, team, provider, guard). Each handler takes the tool's arguments
    as keywords and returns an awaitable of its result.
    """
    bound = ToolRuntime(workspace=Path(workspace), **runtime)
    handlers: dict[str, Handler] = {}
    for t in BuiltinToolProvider(bound).get_tools():

        async def handler(_tool: Any = t, **kwargs: Any) -> Any:
            return await _tool.execute(kwargs)

        handlers[t.name] = handler
    return handlers


def _unbound(name: str) -> Handler:
    async def stub(**_: Any) -> Any:
        raise RuntimeError(
            f"{name} is not bound to a workspace: get its handler from get_handlers(workspace=...)"
        )

    return stub


TOOL_HANDLERS: dict[str, Handler] = {name: _unbound(name) for name in BASE_TOOLS + DEFERRED_TOOLS}
