"""toold's wire contract: message models, method names and error codes.

Depends on pydantic only, so any Python client can import it without the daemon.
Names and error codes import without pydantic; the models load on first access.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from toold_protocol import errors
from toold_protocol.names import ALL_METHODS, CLIENT_REQUESTS, TOOLS_CALL, TOOLS_LIST

if TYPE_CHECKING:
    from toold_protocol.methods import METHODS, MethodSpec
    from toold_protocol.models import (
        AnthropicTool,
        InitializationOptions,
        NativeTool,
        OpenAITool,
        ToolAnnotations,
        ToolsCallParams,
        ToolsCallResult,
        ToolsListParams,
        ToolsListResult,
        WireModel,
    )

PROTOCOL_VERSION = "1"

_LAZY = {
    "METHODS": "toold_protocol.methods",
    "MethodSpec": "toold_protocol.methods",
    "AnthropicTool": "toold_protocol.models",
    "InitializationOptions": "toold_protocol.models",
    "NativeTool": "toold_protocol.models",
    "ToolAnnotations": "toold_protocol.models",
    "OpenAITool": "toold_protocol.models",
    "ToolsCallParams": "toold_protocol.models",
    "ToolsCallResult": "toold_protocol.models",
    "ToolsListParams": "toold_protocol.models",
    "ToolsListResult": "toold_protocol.models",
    "WireModel": "toold_protocol.models",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'toold_protocol' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "ALL_METHODS",
    "CLIENT_REQUESTS",
    "METHODS",
    "PROTOCOL_VERSION",
    "TOOLS_CALL",
    "TOOLS_LIST",
    "AnthropicTool",
    "InitializationOptions",
    "MethodSpec",
    "NativeTool",
    "OpenAITool",
    "ToolAnnotations",
    "ToolsCallParams",
    "ToolsCallResult",
    "ToolsListParams",
    "ToolsListResult",
    "WireModel",
    "errors",
]
