"""BuiltinToolProvider: the one registry of tool classes, with aliases and lazy loading."""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from toold.tools.base import Tool
    from toold.tools.runtime import ToolRuntime

log = logging.getLogger(__name__)

ALIASES: dict[str, str] = {
    "file_read": "read_file",
    "file_write": "write_file",
    "web_search": "duckduckgo_search",
    "python_eval": "python_repl",
}

# Each module exposes TOOLS, a tuple of Tool classes. One failing import (a missing
# optional dependency) never blocks the others.
BUILTIN_MODULES: tuple[str, ...] = (
    "toold.tools.builtin.shell",
    "toold.tools.builtin.files",
    "toold.tools.builtin.search",
    "toold.tools.builtin.deferred",
    "toold.tools.builtin.calculator",
    "toold.tools.builtin.python_repl",
    "toold.tools.builtin.coding",
    "toold.tools.builtin.web",
)


class BuiltinToolProvider:
    """Resolves tool names (and aliases) to tool classes, importing builtins on first use."""

    _builtins: ClassVar[dict[str, type[Tool]]] = {}
    _aliases: ClassVar[dict[str, str]] = dict(ALIASES)
    _loaded: ClassVar[bool] = False
    _lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def _ensure_builtins(cls) -> None:
        if cls._loaded:
            return
        with cls._lock:
            if cls._loaded:
                return
            for module_name in BUILTIN_MODULES:
                try:
                    module = importlib.import_module(module_name)
                except ImportError as exc:
                    log.warning("builtin tools in %s unavailable: %s", module_name, exc)
                    continue
                for tool_cls in module.TOOLS:
                    cls.register_tool(tool_cls.name, tool_cls)
            cls._loaded = True

    @classmethod
    def register_tool(cls, name: str, tool_cls: type[Tool], *, aliases: Iterable[str] = ()) -> None:
        """Add (or replace) a tool class under ``name``; ``aliases`` resolve to it."""
        cls._builtins[name] = tool_cls
        for alias in aliases:
            cls._aliases[alias] = name

    @classmethod
    def canonical_tool_name(cls, name: str) -> str:
        """The canonical name for ``name`` (aliases resolved; unknown names unchanged)."""
        return cls._aliases.get(name, name)

    @classmethod
    def aliases_of(cls, name: str) -> list[str]:
        """Every alias that resolves to ``name``."""
        return sorted(alias for alias, target in cls._aliases.items() if target == name)

    @classmethod
    def tool_classes(cls) -> dict[str, type[Tool]]:
        """Every registered tool class by canonical name, in registration order."""
        cls._ensure_builtins()
        return dict(cls._builtins)

    @classmethod
    def get_tool_class(cls, name: str) -> type[Tool] | None:
        """The class registered for ``name`` or its alias, or None."""
        cls._ensure_builtins()
        return cls._builtins.get(cls.canonical_tool_name(name))

    def __init__(self, runtime: ToolRuntime | None = None) -> None:
        self.runtime = runtime

    def resolve_named_tools(self, names: Iterable[str]) -> list[Tool]:
        """Instances of the named tools, bound to this provider's runtime."""
        tools = []
        for name in names:
            tool_cls = self.get_tool_class(name)
            if tool_cls is None:
                raise KeyError(f"Unknown tool: {name}")
            tools.append(tool_cls(self.runtime))
        return tools

    def get_tools(self) -> list[Tool]:
        """Instances of every registered tool."""
        return [tool_cls(self.runtime) for tool_cls in self.tool_classes().values()]


def canonical_tool_name(name: str) -> str:
    """Module-level shortcut for BuiltinToolProvider.canonical_tool_name."""
    return BuiltinToolProvider.canonical_tool_name(name)
