"""A tool's schema in the three formats tools/list serves."""

from __future__ import annotations

from typing import Any

from toold.tools.base import Tool
from toold.tools.registry import BuiltinToolProvider


def native(t: Tool) -> dict[str, Any]:
    """toold's native format (wire field names)."""
    return {
        "name": t.name,
        "description": t.description,
        "parameters": t.parameters(),
        "deferred": t.deferred,
        "aliases": BuiltinToolProvider.aliases_of(t.name),
        "parallelSafe": t.parallel_safe,
        "effectTags": list(t.effect_tags),
        "annotations": t.annotations.wire(),
    }


def internal(t: Tool) -> dict[str, Any]:
    """BareAgent's internal schema ``{name, description, parameters}``."""
    return {"name": t.name, "description": t.description, "parameters": t.parameters()}


def anthropic(t: Tool) -> dict[str, Any]:
    """Anthropic Messages API tool definition."""
    return {"name": t.name, "description": t.description, "input_schema": t.parameters()}


def openai(t: Tool) -> dict[str, Any]:
    """OpenAI chat-completions function tool."""
    return {"type": "function", "function": internal(t)}


FORMATS = {"native": native, "anthropic": anthropic, "openai": openai}
