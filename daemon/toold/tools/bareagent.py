"""BareAgent's two layers over the one registry: get_tools() and get_handlers().

get_tools() exposes every schema (deferred ones from the start); get_handlers()
binds the runtime objects and returns name -> callable. The module-level
TOOL_HANDLERS are unbound stubs that say how to bind them; DEFERRED_TOOLS names the
tools whose class says ``deferred`` (both computed on first use).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from toold.tools import formats
from toold.tools.registry import BuiltinToolProvider
from toold.tools.runtime import ToolRuntime

BASE_TOOLS: tuple[str, ...] = ("bash", "read_file", "write_file", "edit_file", "glob", "grep")
Handler = Callable[..., Awaitable[Any]]


def get_tools() -> list[dict[str, Any]]:
    """Every tool's internal schema ``{name, description, parameters}``, as fresh copies."""
    return [formats.internal(t) for t in BuiltinToolProvider().get_tools()]


def get_handlers(workspace: str | Path, **runtime: Any) -> dict[str, Handler]:
    """Bind every tool to ``workspace`` and the given runtime objects.

    Keyword arguments are ToolRuntime fields (config, todos, tasks, skills,
    background, team, agents). Each handler takes the tool's arguments
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


def deferred_tools() -> tuple[str, ...]:
    """BareAgent's deferred tools: those whose class says ``deferred``, in registry order."""
    return tuple(n for n, cls in BuiltinToolProvider.tool_classes().items() if cls.deferred)


def __getattr__(name: str) -> Any:
    # Computed on first use: importing toold.tools must not import every builtin.
    if name == "DEFERRED_TOOLS":
        return deferred_tools()
    if name == "TOOL_HANDLERS":
        return {n: _unbound(n) for n in BASE_TOOLS + deferred_tools()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
