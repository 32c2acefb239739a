"""The tool registry: tool classes by canonical name, with aliases and lazy loading.

A ``ToolRegistry`` is an ordinary object: a test or an embedder may build its own.
``BUILTINS`` is the process's registry of builtin tools (a sandbox worker rebuilds
tools by name from it), and ``BuiltinToolProvider`` is Jianmu's face over a registry:
its class methods read and extend ``BUILTINS``, its instances bind tools to a runtime.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

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
    "toold.tools.builtin.edits",
    "toold.tools.builtin.web",
    "toold.diagnostics.tool",  # beside its service: tools never import the LSP client
)


class ToolRegistry:
    """Resolves tool names (and aliases) to tool classes, importing ``modules`` on first use."""

    def __init__(
        self, modules: Iterable[str] = (), aliases: Mapping[str, str] | None = None
    ) -> None:
        self._modules = tuple(modules)
        self._classes: dict[str, type[Tool]] = {}
        self._aliases: dict[str, str] = dict(aliases or {})
        self._loaded = not self._modules
        self._lock = threading.Lock()

    def _load(self) -> None:
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            for module_name in self._modules:
                try:
                    module = importlib.import_module(module_name)
                except ImportError as exc:
                    log.warning("builtin tools in %s unavailable: %s", module_name, exc)
                    continue
                for tool_cls in module.TOOLS:
                    self._classes.setdefault(tool_cls.name, tool_cls)
            self._loaded = True

    def register(self, name: str, tool_cls: type[Tool], *, aliases: Iterable[str] = ()) -> None:
        """Add (or replace) a tool class under ``name``; ``aliases`` resolve to it."""
        self._load()  # a registration made before loading stays after the builtins
        self._classes[name] = tool_cls
        for alias in aliases:
            self._aliases[alias] = name

    def copy(self) -> ToolRegistry:
        """An independent registry with the same tools and aliases."""
        self._load()
        clone = ToolRegistry(aliases=self._aliases)
        clone._classes = dict(self._classes)
        return clone

    def canonical(self, name: str) -> str:
        """The canonical name for ``name`` (aliases resolved; unknown names unchanged)."""
        return self._aliases.get(name, name)

    def aliases_of(self, name: str) -> list[str]:
        """Every alias that resolves to ``name``."""
        return sorted(alias for alias, target in self._aliases.items() if target == name)

    def classes(self) -> dict[str, type[Tool]]:
        """Every registered tool class by canonical name, in registration order."""
        self._load()
        return dict(self._classes)

    def get(self, name: str) -> type[Tool] | None:
        """The class registered for ``name`` or its alias, or None."""
        self._load()
        return self._classes.get(self.canonical(name))


BUILTINS = ToolRegistry(BUILTIN_MODULES, ALIASES)
"""The builtin tools (and what ``BuiltinToolProvider.register_tool`` adds)."""


class BuiltinToolProvider:
    """Jianmu's provider: tools of a registry (``BUILTINS`` by default) bound to a runtime."""

    def __init__(
        self, runtime: ToolRuntime | None = None, registry: ToolRegistry | None = None
    ) -> None:
        self.runtime = runtime
        self.registry = registry or BUILTINS

    @staticmethod
    def register_tool(name: str, tool_cls: type[Tool], *, aliases: Iterable[str] = ()) -> None:
        """Add (or replace) a builtin tool class under ``name``; ``aliases`` resolve to it."""
        BUILTINS.register(name, tool_cls, aliases=aliases)

    @staticmethod
    def canonical_tool_name(name: str) -> str:
        """The canonical builtin name for ``name`` (aliases resolved)."""
        return BUILTINS.canonical(name)

    @staticmethod
    def aliases_of(name: str) -> list[str]:
        """Every alias that resolves to the builtin ``name``."""
        return BUILTINS.aliases_of(name)

    @staticmethod
    def tool_classes() -> dict[str, type[Tool]]:
        """Every builtin tool class by canonical name, in registration order."""
        return BUILTINS.classes()

    @staticmethod
    def get_tool_class(name: str) -> type[Tool] | None:
        """The builtin class registered for ``name`` or its alias, or None."""
        return BUILTINS.get(name)

    def resolve_named_tools(self, names: Iterable[str]) -> list[Tool]:
        """Instances of the named tools, bound to this provider's runtime."""
        tools = []
        for name in names:
            tool_cls = self.registry.get(name)
            if tool_cls is None:
                raise KeyError(f"Unknown tool: {name}")
            tools.append(tool_cls(self.runtime))
        return tools

    def get_tools(self) -> list[Tool]:
        """Instances of every tool in the registry."""
        return [tool_cls(self.runtime) for tool_cls in self.registry.classes().values()]


def canonical_tool_name(name: str) -> str:
    """The canonical builtin name for ``name`` (aliases resolved; unknown names unchanged)."""
    return BUILTINS.canonical(name)
