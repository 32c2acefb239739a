"""@tool: a plain sync or async function becomes a Tool."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any, get_type_hints

from pydantic import BaseModel, create_model

from toold.tools.annotations import ToolAnnotations
from toold.tools.base import Tool, ToolArguments, schema_from_model


class FunctionTool(Tool):
    """A Tool wrapping a function; its signature is the one declaration of its arguments
    (the ``Arguments`` model and the schema are derived from the type hints)."""

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        parallel_safe: bool = True,
        effect_tags: tuple[str, ...] = (),
        annotations: ToolAnnotations | None = None,
    ) -> None:
        super().__init__()
        self.func = func
        # Instance attributes shadow the class-level contract for this one tool.
        self.name = name or func.__name__  # type: ignore[misc]
        self.description = (  # type: ignore[misc]
            description or inspect.getdoc(func) or Tool.description
        )
        self.parallel_safe = parallel_safe  # type: ignore[misc]
        self.effect_tags = tuple(effect_tags)  # type: ignore[misc]
        if annotations is not None:
            self.annotations = annotations  # type: ignore[misc]
        self.Arguments = _arguments_model(func, self.name)  # type: ignore[misc]
        self.input_schema = schema_from_model(self.Arguments)  # type: ignore[misc]
        self._is_async = inspect.iscoroutinefunction(func)

    async def run(self, args: BaseModel) -> Any:
        """Call the function with the parsed arguments: awaited when async, else on a thread."""
        kwargs = dict(args)
        if self._is_async:
            return await self.func(**kwargs)
        return await asyncio.to_thread(self.func, **kwargs)


def _arguments_model(func: Callable[..., Any], name: str) -> type[ToolArguments]:
    hints = get_type_hints(func)
    fields: dict[str, Any] = {}
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = hints.get(param.name, Any)
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, default)
    return create_model(f"{name}_arguments", __base__=ToolArguments, **fields)


def tool(
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    parallel_safe: bool = True,
    effect_tags: tuple[str, ...] = (),
    annotations: ToolAnnotations | None = None,
) -> Any:
    """Turn a function into a FunctionTool; usable bare or with arguments.

    Without ``annotations`` the tool gets the defaults: it may change things, and the
    guard asks before an agent's call runs it.
    """

    def wrap(f: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(
            f,
            name=name,
            description=description,
            parallel_safe=parallel_safe,
            effect_tags=effect_tags,
            annotations=annotations,
        )

    return wrap(func) if func is not None else wrap
