"""The tool system: Tool, @tool, the one registry, ToolSet and the formats models read.

The seeds' faces (BareAgent's get_tools/get_handlers, Jianmu's execute) are in
toold.compat.
"""

from toold.tools.base import Tool, ToolArgumentError
from toold.tools.decorator import FunctionTool, tool
from toold.tools.registry import BuiltinToolProvider, canonical_tool_name
from toold.tools.runtime import ToolRuntime
from toold.tools.toolset import ToolOutcome, ToolSet, UnknownToolError

__all__ = [
    "BuiltinToolProvider",
    "FunctionTool",
    "Tool",
    "ToolArgumentError",
    "ToolOutcome",
    "ToolRuntime",
    "ToolSet",
    "UnknownToolError",
    "canonical_tool_name",
    "tool",
]
