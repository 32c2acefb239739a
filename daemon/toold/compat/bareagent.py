"""BareAgent's face, a compatibility adapter: get_tools() and get_handlers().

BareAgent (one of the two tool systems toold implements) exposes its tools in two layers:
get_tools() lists every schema (deferred ones from the start); get_handlers() binds the
runtime objects and returns name -> callable. The module-level TOOL_HANDLERS are unbound
stubs that say how to bind them; DEFERRED_TOOLS names the tools whose class says
``deferred`` (both computed on first use).

A handler validates its keyword arguments and calls ``Tool.call``: it returns the tool's
result and raises its exceptions, as BareAgent's handlers do, and runs no guard. Calls on
behalf of a model go through ``ToolGateway.call`` (toold.gateway).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from toold.tools import formats
from toold.tools.base import Tool
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
    as keywords and returns an awaitable of its result (the tool's exceptions propagate).
    """
    bound = ToolRuntime(workspace=Path(workspace), **runtime)
    handlers: dict[str, Handler] = {}
    for t in BuiltinToolProvider(bound).get_tools():

        async def handler(_tool: Tool = t, **kwargs: Any) -> Any:
            return await _tool.call(_tool.validate_args(kwargs))

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
