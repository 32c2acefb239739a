"""The Tool base class and @tool: defaults, schemas, validation, and Jianmu's execute()
(toold.compat.jianmu: injected arguments, a dict as keywords, exceptions propagating)."""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any, ClassVar

import pytest
from pydantic import Field

from toold.compat.jianmu import execute
from toold.tools import FunctionTool, Tool, ToolArgumentError, tool
from toold.tools.base import ToolArguments


class Bare(Tool):
    """A tool that sets nothing but run()."""

    def run(self, value: Any) -> Any:
        return {"got": value, "thread": threading.get_ident()}


class Echo(Tool):
    """A hand-written object schema and no Arguments model (Jianmu's style)."""

    name: ClassVar[str] = "echo"
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    }

    def run(self, *args: Any, **kwargs: Any) -> Any:
        return {"args": list(args), "kwargs": kwargs}


class AsyncEcho(Tool):
    name: ClassVar[str] = "async_echo"
    input_schema: ClassVar[dict[str, Any]] = {"type": "object"}

    async def run(self, **kwargs: Any) -> Any:
        return {"kwargs": kwargs, "thread": threading.get_ident()}


def test_tool_defaults() -> None:
    assert Bare.name == "unnamed_tool"
    assert Bare.description == "No description provided"
    assert Bare.input_schema["type"] == "string"
    assert Bare.output_schema["type"] == "string"
    assert Bare.deferred is False
    assert Bare.parallel_safe is True
    assert Bare.effect_tags == ()
    assert Bare().runtime is None


def test_non_object_schema_is_wrapped_as_input() -> None:
    assert Bare().parameters() == {
        "type": "object",
        "properties": {"input": {"type": "string", "description": "Tool input string"}},
        "required": ["input"],
    }


def test_object_schema_gets_properties_and_required() -> None:
    class Empty(Tool):
        input_schema: ClassVar[dict[str, Any]] = {"type": "object"}

        def run(self) -> None:
            return None

    assert Empty().parameters() == {"type": "object", "properties": {}, "required": []}
    assert Empty.input_schema == {"type": "object"}


def test_parameters_is_a_deep_copy() -> None:
    params = Echo().parameters()
    params["properties"]["a"]["type"] = "string"
    params["required"].append("a")
    assert Echo.input_schema["properties"]["a"] == {"type": "integer"}
    assert "required" not in Echo.input_schema


def test_string_tool_takes_a_plain_value_or_input_object() -> None:
    main = threading.get_ident()
    assert asyncio.run(execute(Bare(), "hi"))["got"] == "hi"
    result = asyncio.run(execute(Bare(), {"input": "wrapped"}))
    assert result["got"] == "wrapped"
    # A synchronous run() goes to a worker thread.
    assert result["thread"] != main


def test_async_run_is_awaited_on_the_loop() -> None:
    async def scenario() -> tuple[Any, int]:
        return await execute(AsyncEcho(), {"a": 1}), threading.get_ident()

    result, loop_thread = asyncio.run(scenario())
    assert result == {"kwargs": {"a": 1}, "thread": loop_thread}


def test_dict_args_become_keywords_anything_else_one_positional() -> None:
    assert asyncio.run(execute(Echo(), {"a": 1})) == {"args": [], "kwargs": {"a": 1}}
    assert asyncio.run(execute(Echo(), [1, 2])) == {"args": [[1, 2]], "kwargs": {}}
    assert asyncio.run(execute(Echo(), "text")) == {"args": ["text"], "kwargs": {}}


@pytest.mark.parametrize(
    ("prefer", "expected"), [(True, {"a": 2, "b": 3}), (False, {"a": 1, "b": 3})]
)
def test_injected_arguments(prefer: bool, expected: dict[str, int]) -> None:
    result = asyncio.run(
        execute(Echo(), {"a": 1}, injected={"a": 2, "b": 3}, prefer_injected=prefer)
    )
    assert result == {"args": [], "kwargs": expected}


def test_injected_without_args() -> None:
    assert asyncio.run(execute(Echo(), None, injected={"a": 5})) == {
        "args": [],
        "kwargs": {"a": 5},
    }


def test_injected_ignored_for_positional_args() -> None:
    assert asyncio.run(execute(Echo(), "x", injected={"a": 5})) == {"args": ["x"], "kwargs": {}}


class GreetArguments(ToolArguments):
    who: str = Field(description="Name to greet.")
    times: int = Field(1, ge=1)


class Greet(Tool):
    name: ClassVar[str] = "greet"
    Arguments = GreetArguments

    def run(self, args: GreetArguments) -> str:
        return " ".join([f"hi {args.who}"] * args.times)


def test_arguments_model_derives_the_schema() -> None:
    assert Greet.input_schema == {
        "type": "object",
        "properties": {
            "who": {"type": "string", "description": "Name to greet."},
            "times": {"type": "integer", "default": 1, "minimum": 1},
        },
        "required": ["who"],
    }


def test_arguments_model_validates_and_fills_defaults() -> None:
    assert asyncio.run(execute(Greet(), {"who": "ann"})) == "hi ann"
    assert asyncio.run(execute(Greet(), {"who": "ann", "times": 2})) == "hi ann hi ann"
    assert asyncio.run(execute(Greet(), None, injected={"who": "bo"})) == "hi bo"


def test_run_gets_the_parsed_model_and_call_takes_json() -> None:
    greet = Greet()
    # What validate_args returns is plain JSON (a sandbox ships it to another process);
    # call parses it again, so run always gets the model.
    checked = greet.validate_args({"who": "ann"})
    assert checked == {"who": "ann", "times": 1}
    assert asyncio.run(greet.call(checked)) == "hi ann"
    assert isinstance(greet.parse_args(checked), GreetArguments)
    with pytest.raises(ToolArgumentError, match="times"):
        asyncio.run(greet.call({"who": "ann", "times": 0}))


def test_tool_arguments_refuse_unknown_names_and_stay_as_parsed() -> None:
    with pytest.raises(ToolArgumentError, match="whom: unexpected argument; remove it"):
        Greet().validate_args({"who": "ann", "whom": "bo"})
    parsed = Greet().parse_args({"who": "ann"})
    with pytest.raises(ValueError, match="frozen"):
        parsed.who = "bo"


def test_validation_error_names_each_bad_field() -> None:
    with pytest.raises(ToolArgumentError) as info:
        asyncio.run(execute(Greet(), {"times": 0}))
    message = str(info.value)
    assert message.startswith("invalid arguments for greet: ")
    assert "who: Field required" in message
    assert "times: Input should be greater than or equal to 1 (got 0)" in message


def test_validation_refuses_non_objects() -> None:
    with pytest.raises(ToolArgumentError, match="expected an object, got list"):
        asyncio.run(execute(Greet(), ["ann"]))


# @tool


@tool
def add(a: int, b: int = 2) -> dict[str, int]:
    """Add two numbers."""
    return {"sum": a + b, "thread": threading.get_ident()}


@tool(name="shout", description="Upper-case the text.", effect_tags=("demo",))
async def loud(text: str, suffix: str | None = None) -> str:
    return text.upper() + (suffix or "")


@tool
def undocumented(flag: bool) -> bool:
    return not flag


def test_decorator_builds_a_function_tool() -> None:
    assert isinstance(add, FunctionTool)
    assert add.name == "add"
    assert add.description == "Add two numbers."
    assert add.input_schema == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "default": 2}},
        "required": ["a"],
    }


def test_decorator_with_arguments() -> None:
    assert loud.name == "shout"
    assert loud.description == "Upper-case the text."
    assert loud.effect_tags == ("demo",)
    assert loud.parameters() == {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "suffix": {"type": "string", "default": None},
        },
        "required": ["text"],
    }


def test_decorator_description_fallback() -> None:
    assert undocumented.name == "undocumented"
    assert undocumented.description == "No description provided"


def test_sync_function_runs_in_a_worker_thread() -> None:
    result = asyncio.run(execute(add, {"a": 1}))
    assert result["sum"] == 3
    assert result["thread"] != threading.get_ident()


def test_async_function_is_awaited() -> None:
    assert asyncio.run(execute(loud, {"text": "hi", "suffix": "!"})) == "HI!"
    assert asyncio.run(execute(loud, {"text": "hi"})) == "HI"


def test_function_tool_validation() -> None:
    with pytest.raises(ToolArgumentError) as info:
        asyncio.run(execute(add, {"a": "x", "c": 1}))
    message = str(info.value)
    assert "a: Input should be a valid integer" in message
    assert "c: unexpected argument; remove it" in message


def test_function_tool_injected_argument() -> None:
    @tool
    def whoami(user: str) -> str:
        return user

    assert asyncio.run(execute(whoami, {"user": "model"}, injected={"user": "daemon"})) == "daemon"
    assert (
        asyncio.run(
            execute(whoami, {"user": "model"}, injected={"user": "d"}, prefer_injected=False)
        )
        == "model"
    )


def test_function_tools_are_independent() -> None:
    assert add.input_schema is not loud.input_schema
    assert "a" not in loud.input_schema["properties"]
    assert Tool.name == "unnamed_tool"


def test_the_schema_is_built_on_first_use_and_inherited() -> None:
    class Args(ToolArguments):
        count: int = Field(description="How many.")

    class Counting(Tool):
        name = "counting"
        Arguments = Args

        def run(self, args: Args) -> int:
            return args.count

    class Renamed(Counting):
        name = "renamed"

    assert not isinstance(Counting.__dict__["input_schema"], dict)  # not built yet
    schema = Renamed.input_schema
    assert schema["properties"]["count"] == {"type": "integer", "description": "How many."}
    assert Counting.__dict__["input_schema"] is schema  # built once, on the declaring class
    assert Counting().parameters() == schema


def test_every_builtin_declares_its_arguments_once() -> None:
    from toold.tools import BuiltinToolProvider

    for name, cls in BuiltinToolProvider.tool_classes().items():
        params = list(inspect.signature(cls.run).parameters)
        if cls.Arguments is None:  # Jianmu's style: a hand-written schema (calculator)
            assert "input_schema" in cls.__dict__, name
            continue
        assert issubclass(cls.Arguments, ToolArguments), name
        assert params == ["self", "args"], name
