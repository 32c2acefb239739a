"""The three schema formats tools/list serves."""

from __future__ import annotations

from typing import Any, ClassVar

from toold.tools import BuiltinToolProvider, Tool
from toold.tools.formats import FORMATS, anthropic, internal, native, openai


def _builtin(name: str) -> Tool:
    cls = BuiltinToolProvider.get_tool_class(name)
    assert cls is not None
    return cls()


class Plain(Tool):
    name: ClassVar[str] = "plain"
    description: ClassVar[str] = "Takes a string."
    input_schema: ClassVar[dict[str, Any]] = {"type": "string"}

    def run(self, value: Any) -> Any:
        return value


def test_native() -> None:
    t = _builtin("write_file")
    assert native(t) == {
        "name": "write_file",
        "description": t.description,
        "parameters": t.parameters(),
        "deferred": False,
        "aliases": ["file_write"],
        "parallelSafe": True,
        "effectTags": ["filesystem:write"],
        "annotations": {
            "readOnlyHint": False,
            "destructiveHint": True,
            "idempotentHint": True,
            "openWorldHint": False,
            "confirm": "always",
            "writesPath": True,
            "runsCode": False,
        },
    }


def test_native_for_deferred_and_serial_tools() -> None:
    sub = native(_builtin("subagent"))
    assert sub["deferred"] is True
    assert sub["parallelSafe"] is False
    assert sub["aliases"] == []
    assert native(_builtin("edit_file"))["parallelSafe"] is False
    assert native(_builtin("bash"))["effectTags"] == ["shell:execute"]


def test_internal() -> None:
    t = _builtin("read_file")
    assert internal(t) == {
        "name": "read_file",
        "description": t.description,
        "parameters": t.parameters(),
    }


def test_anthropic() -> None:
    t = _builtin("glob")
    assert anthropic(t) == {
        "name": "glob",
        "description": t.description,
        "input_schema": t.parameters(),
    }


def test_openai() -> None:
    t = _builtin("grep")
    assert openai(t) == {
        "type": "function",
        "function": {"name": "grep", "description": t.description, "parameters": t.parameters()},
    }


def test_non_object_schema_is_wrapped_in_every_format() -> None:
    wrapped = {
        "type": "object",
        "properties": {"input": {"type": "string"}},
        "required": ["input"],
    }
    t = Plain()
    assert native(t)["parameters"] == wrapped
    assert anthropic(t)["input_schema"] == wrapped
    assert openai(t)["function"]["parameters"] == wrapped


def test_formats_are_fresh_copies() -> None:
    t = _builtin("bash")
    anthropic(t)["input_schema"]["properties"].clear()
    openai(t)["function"]["parameters"]["required"].append("x")
    native(t)["aliases"].append("sh")
    assert "command" in anthropic(t)["input_schema"]["properties"]
    assert openai(t)["function"]["parameters"]["required"] == ["command"]
    assert native(t)["aliases"] == []


def test_format_table() -> None:
    assert {"native": native, "anthropic": anthropic, "openai": openai} == FORMATS
