"""ToolSet: an assembled set of tool instances: lookup by name or alias, merge, names.

A plain collection: nothing here runs a tool. Calls run through ``ToolGateway.call``
(toold.gateway), and from there through toold.dispatch; the seeds' ``execute`` faces
live in toold.compat.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from toold.errors import UnknownTool
from toold.outcome import ToolOutcome as ToolOutcome  # re-exported: its home is toold.outcome
from toold.outcome import error_text as error_text
from toold.tools.base import Tool
from toold.tools.registry import BuiltinToolProvider

if TYPE_CHECKING:
    from toold.tools.registry import ToolRegistry
    from toold.tools.runtime import ToolRuntime


UnknownToolError = UnknownTool
"""No tool (nor alias) of that name (toold.errors.UnknownTool)."""


class ToolSet:
    """Tools by canonical name; aliases resolve through the provider."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self._tools[t.name] = t

    @classmethod
    def resolve(
        cls,
        names: Iterable[str],
        runtime: ToolRuntime | None = None,
        registry: ToolRegistry | None = None,
    ) -> ToolSet:
        """Build from names or aliases of ``registry`` (the builtins by default)."""
        return cls(BuiltinToolProvider(runtime, registry).resolve_named_tools(names))

    @classmethod
    def from_tools(cls, tools: Iterable[Tool]) -> ToolSet:
        """Build from instances."""
        return cls(tools)

    @classmethod
    def from_providers(cls, providers: Iterable[BuiltinToolProvider]) -> ToolSet:
        """Collect every tool each provider offers; later providers win."""
        return cls.merge(*(cls(p.get_tools()) for p in providers))

    @classmethod
    def merge(cls, *groups: ToolSet | Iterable[Tool]) -> ToolSet:
        """Union of groups, de-duplicated by name: the last one wins."""
        merged: dict[str, Tool] = {}
        for group in groups:
            for t in group:
                merged.pop(t.name, None)
                merged[t.name] = t
        return cls(merged.values())

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def names(self) -> list[str]:
        """Canonical names, in order."""
        return list(self._tools)

    def get(self, name: str) -> Tool | None:
        """The tool for a name or alias, or None."""
        return self._tools.get(name) or self._tools.get(
            BuiltinToolProvider.canonical_tool_name(name)
        )

    def require(self, name: str) -> Tool:
        """The tool for a name or alias; UnknownToolError otherwise."""
        found = self.get(name)
        if found is None:
            raise UnknownToolError(name)
        return found
