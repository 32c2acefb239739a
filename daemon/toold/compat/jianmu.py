"""Jianmu's face, a compatibility adapter: ``execute`` with injected arguments, and a
ToolSet whose ``execute`` runs a tool by name.

Jianmu (one of the two tool systems toold implements) runs a tool with
``execute(args, injected=None, prefer_injected=True)``: runtime values merged into the
model's arguments (injected ones win unless ``prefer_injected`` is false), validated, and
run in this process, the tool's exceptions propagating. ``BuiltinToolProvider`` (toold's
registry face, toold.tools.registry) is Jianmu's too, re-exported here.

Both call ``Tool.call`` and nothing else, and run no guard: calls on behalf of a model go
through ``ToolGateway.call`` (toold.gateway).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toold.tools import toolset
from toold.tools.base import Tool
from toold.tools.registry import BuiltinToolProvider

__all__ = ["BuiltinToolProvider", "ToolSet", "execute", "merge_call_args"]


def merge_call_args(
    args: Any, injected: Mapping[str, Any] | None, prefer_injected: bool = True
) -> Any:
    """The model's ``args`` with runtime ``injected`` values: injected ones win when
    ``prefer_injected``; arguments that are not an object are left as they are."""
    if not injected:
        return args
    if args is None:
        return dict(injected)
    if not isinstance(args, Mapping):
        return args
    return {**args, **injected} if prefer_injected else {**injected, **args}


async def execute(
    tool: Tool,
    args: Any,
    *,
    injected: Mapping[str, Any] | None = None,
    prefer_injected: bool = True,
) -> Any:
    """Jianmu's ``Tool.execute``: merge injected arguments, validate, run here.

    Exceptions propagate (ToolArgumentError for arguments that fail the schema).
    """
    return await tool.call(tool.validate_args(merge_call_args(args, injected, prefer_injected)))


class ToolSet(toolset.ToolSet):
    """Jianmu's ToolSet: the core collection plus ``execute`` by name or alias."""

    async def execute(
        self,
        name: str,
        args: Any,
        *,
        injected: Mapping[str, Any] | None = None,
        prefer_injected: bool = True,
    ) -> Any:
        """Run the named tool here with Jianmu's ``execute``; exceptions propagate."""
        return await execute(
            self.require(name), args, injected=injected, prefer_injected=prefer_injected
        )
