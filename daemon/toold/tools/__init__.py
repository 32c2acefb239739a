"""The tool system: Tool, @tool, the one registry, ToolSet and the formats models read."""

from typing import Any

from toold.tools.bareagent import BASE_TOOLS, get_handlers, get_tools
from toold.tools.base import Tool, ToolArgumentError
from toold.tools.decorator import FunctionTool, tool
from toold.tools.registry import BuiltinToolProvider, canonical_tool_name
from toold.tools.runtime import ToolRuntime
from toold.tools.toolset import ToolOutcome, ToolSet, UnknownToolError


def __getattr__(name: str) -> Any:
    # DEFERRED_TOOLS is read from the tool classes, so only on first use.
    if name == "DEFERRED_TOOLS":
        from toold.tools import bareagent

        return bareagent.DEFERRED_TOOLS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BASE_TOOLS",
    "DEFERRED_TOOLS",
    "BuiltinToolProvider",
    "FunctionTool",
    "Tool",
    "ToolArgumentError",
    "ToolOutcome",
    "ToolRuntime",
    "ToolSet",
    "UnknownToolError",
    "canonical_tool_name",
    "get_handlers",
    "get_tools",
    "tool",
]
