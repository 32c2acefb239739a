"""toold's wire contract: message models, method names and error codes.

Depends on pydantic only, so any Python client can import it without the daemon.
"""

from toold_protocol import errors
from toold_protocol.methods import METHODS, TOOLS_CALL, TOOLS_LIST, MethodSpec
from toold_protocol.models import (
    AnthropicTool,
    InitializationOptions,
    NativeTool,
    OpenAITool,
    ToolsCallParams,
    ToolsCallResult,
    ToolsListParams,
    ToolsListResult,
    WireModel,
)

PROTOCOL_VERSION = "1"

__all__ = [
    "METHODS",
    "PROTOCOL_VERSION",
    "TOOLS_CALL",
    "TOOLS_LIST",
    "AnthropicTool",
    "InitializationOptions",
    "MethodSpec",
    "NativeTool",
    "OpenAITool",
    "ToolsCallParams",
    "ToolsCallResult",
    "ToolsListParams",
    "ToolsListResult",
    "WireModel",
    "errors",
]
