"""The seeds' faces (toold.compat): get_tools/get_handlers, TOOL_HANDLERS stubs, Jianmu's
execute; aliases and the provider."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

import pytest

from toold.compat import jianmu
from toold.compat.bareagent import (
    BASE_TOOLS,
    DEFERRED_TOOLS,
    TOOL_HANDLERS,
    get_handlers,
    get_tools,
)
from toold.tools import (
    BuiltinToolProvider,
    Tool,
    ToolArgumentError,
    ToolRuntime,
    ToolSet,
    canonical_tool_name,
    registry,
)

from .conftest import Call


def test_tool_lists() -> None:
    assert BASE_TOOLS == ("bash", "read_file", "write_file", "edit_file", "glob", "grep")
    assert DEFERRED_TOOLS == (
        "todo_write",
        "todo_read",
        "subagent",
        "load_skill",
        "task_create",
        "task_list",
        "task_get",
        "task_update",
        "background_run",
        "team_spawn",
        "team_send",
        "team_list",
    )


def test_get_tools_lists_base_then_deferred_first() -> None:
    names = [t["name"] for t in get_tools()]
    assert names[:18] == list(BASE_TOOLS + DEFERRED_TOOLS)
    assert len(names) == len(set(names)), "a tool is registered twice"


def test_get_tools_internal_schema_shape() -> None:
    for schema in get_tools():
        assert set(schema) == {"name", "description", "parameters"}
        assert schema["description"]
        params = schema["parameters"]
        assert params["type"] == "object"
        assert isinstance(params["properties"], dict)
        assert isinstance(params["required"], list)


def test_required_arguments_are_all_described() -> None:
    by_name = {t["name"]: t["parameters"] for t in get_tools()}
    assert "title" in by_name["task_create"]["properties"]
    assert "title" in by_name["task_update"]["properties"]
    for name, params in by_name.items():
        assert set(params["required"]) <= set(params["properties"]), name


def test_base_tool_parameters() -> None:
    by_name = {t["name"]: t["parameters"] for t in get_tools()}
    expected = {
        # idle_timeout (issue 26) follows the spec's arguments.
        "bash": (["command", "timeout", "idle_timeout"], ["command"]),
        "read_file": (["file_path", "offset", "limit"], ["file_path"]),
        # dry_run (issue 17) follows the spec's arguments.
        "write_file": (["file_path", "content", "append", "dry_run"], ["file_path", "content"]),
        "edit_file": (
            ["file_path", "old_text", "new_text", "dry_run"],
            ["file_path", "old_text", "new_text"],
        ),
        "glob": (["pattern", "path", "include_ignored"], ["pattern"]),
        "grep": (["pattern", "path", "include", "output_mode", "include_ignored"], ["pattern"]),
    }
    for name, (props, required) in expected.items():
        assert list(by_name[name]["properties"]) == props, name
        assert by_name[name]["required"] == required, name
    assert by_name["bash"]["properties"]["timeout"]["default"] == 30
    assert by_name["bash"]["properties"]["timeout"]["minimum"] == 1
    assert by_name["read_file"]["properties"]["offset"]["default"] == 0
    assert by_name["glob"]["properties"]["path"]["default"] == "."
    assert by_name["grep"]["properties"]["include"]["default"] == ""
    assert by_name["grep"]["properties"]["output_mode"]["default"] == "content"


def test_mutating_a_tool_class_schema_copy_is_harmless() -> None:
    read_file = BuiltinToolProvider.get_tool_class("read_file")
    assert read_file is not None
    params = read_file().parameters()
    params["properties"]["file_path"]["type"] = "integer"
    params["required"].clear()
    assert read_file().parameters()["properties"]["file_path"]["type"] == "string"
    assert read_file().parameters()["required"] == ["file_path"]


def test_get_handlers_binds_every_tool(workspace: Path) -> None:
    handlers = get_handlers(workspace)
    assert list(handlers) == [t["name"] for t in get_tools()]
    assert list(handlers)[:18] == list(BASE_TOOLS + DEFERRED_TOOLS)
    assert asyncio.run(handlers["bash"](command="pwd")) == str(workspace)


def test_get_handlers_resolves_the_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    handlers = get_handlers("alias")
    assert asyncio.run(handlers["write_file"](file_path="f.txt", content="x")) == (
        "Wrote 1 characters to f.txt"
    )
    assert (tmp_path / "real" / "f.txt").read_text() == "x"


def test_handlers_are_bound_to_their_own_workspace(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    asyncio.run(get_handlers(one)["write_file"](file_path="f.txt", content="1"))
    asyncio.run(get_handlers(two)["write_file"](file_path="f.txt", content="2"))
    assert (one / "f.txt").read_text() == "1"
    assert (two / "f.txt").read_text() == "2"


def test_handlers_raise_the_tools_exceptions(workspace: Path) -> None:
    """BareAgent's handlers answer a failure with the exception (its agent loop writes the
    ``Error: <Class>: <message>`` text), not with an isError outcome."""
    (workspace / "f.txt").write_text("hello", encoding="utf-8")
    edit = get_handlers(workspace)["edit_file"]
    with pytest.raises(ValueError, match=r"^old_text not found in file$"):
        asyncio.run(edit(file_path="f.txt", old_text="zz", new_text="x"))
    with pytest.raises(ToolArgumentError, match="bogus: unexpected argument"):
        asyncio.run(edit(file_path="f.txt", old_text="h", new_text="j", bogus=1))
    assert (workspace / "f.txt").read_text(encoding="utf-8") == "hello"


def test_tool_handlers_stubs_say_how_to_bind() -> None:
    assert list(TOOL_HANDLERS) == list(BASE_TOOLS + DEFERRED_TOOLS)
    for name, stub in TOOL_HANDLERS.items():
        with pytest.raises(RuntimeError) as info:
            asyncio.run(stub(command="true"))
        assert str(info.value) == (
            f"{name} is not bound to a workspace: get its handler from get_handlers(workspace=...)"
        )


def test_unbound_workspace_tool_raises() -> None:
    read_file = ToolSet.resolve(["read_file"]).require("read_file")
    with pytest.raises(
        RuntimeError, match=r"read_file is not bound to a workspace: use get_handlers"
    ):
        asyncio.run(jianmu.execute(read_file, {"file_path": "x"}))


def test_handlers_validate_arguments(call: Call) -> None:
    with call.fails(ValueError, match="unexpected argument"):
        call("glob", pattern="*", bogus=1)


# Aliases and the provider


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("file_read", "read_file"),
        ("file_write", "write_file"),
        ("web_search", "duckduckgo_search"),
        ("python_eval", "python_repl"),
        ("read_file", "read_file"),
        ("no_such_tool", "no_such_tool"),
    ],
)
def test_canonical_tool_name(alias: str, name: str) -> None:
    assert canonical_tool_name(alias) == name
    assert BuiltinToolProvider.canonical_tool_name(alias) == name


def test_aliases_of() -> None:
    assert BuiltinToolProvider.aliases_of("read_file") == ["file_read"]
    assert BuiltinToolProvider.aliases_of("write_file") == ["file_write"]
    assert BuiltinToolProvider.aliases_of("bash") == []


def test_toolset_get_resolves_aliases(workspace: Path) -> None:
    tools = ToolSet.resolve(["read_file", "write_file"], ToolRuntime(workspace=workspace))
    reader = tools.get("file_read")
    assert reader is not None and reader.name == "read_file"
    assert tools.require("file_write").name == "write_file"
    assert "file_read" in tools
    assert "bash" not in tools
    assert tools.get("bash") is None


def test_resolve_accepts_aliases(workspace: Path) -> None:
    tools = jianmu.ToolSet.resolve(["file_read"], ToolRuntime(workspace=workspace))
    assert tools.names() == ["read_file"]
    (workspace / "f.txt").write_text("x\n")
    assert asyncio.run(tools.execute("file_read", {"file_path": "f.txt"})) == "1: x"


def test_resolve_unknown_name_raises() -> None:
    with pytest.raises(KeyError, match="Unknown tool: nope"):
        ToolSet.resolve(["nope"])


def test_get_tool_class() -> None:
    cls = BuiltinToolProvider.get_tool_class("file_read")
    assert cls is not None and cls.name == "read_file"
    assert BuiltinToolProvider.get_tool_class("nope") is None
    assert list(BuiltinToolProvider.tool_classes())[:18] == list(BASE_TOOLS + DEFERRED_TOOLS)


@pytest.fixture
def isolated_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let a test register tools without leaking them into other tests."""
    monkeypatch.setattr(registry, "BUILTINS", registry.BUILTINS.copy())


@pytest.mark.usefixtures("isolated_provider")
def test_register_tool_with_aliases() -> None:
    class Shout(Tool):
        name: ClassVar[str] = "shout"
        description: ClassVar[str] = "Upper-case the input."

        def run(self, value: Any) -> Any:
            return str(value).upper()

    BuiltinToolProvider.register_tool("shout", Shout, aliases=("yell",))
    assert canonical_tool_name("yell") == "shout"
    assert BuiltinToolProvider.aliases_of("shout") == ["yell"]
    tools = jianmu.ToolSet.resolve(["yell"])
    assert asyncio.run(tools.execute("yell", "hi")) == "HI"
    assert [t["name"] for t in get_tools()][-1] == "shout"


def test_registration_did_not_leak() -> None:
    assert BuiltinToolProvider.get_tool_class("shout") is None
    assert canonical_tool_name("yell") == "yell"


def test_a_registry_of_its_own(workspace: Path) -> None:
    class Shout(Tool):
        name: ClassVar[str] = "shout"
        description: ClassVar[str] = "Upper-case the input."

        def run(self, value: Any) -> Any:
            return str(value).upper()

    own = registry.ToolRegistry(aliases={"yell": "shout"})
    own.register("shout", Shout)
    assert list(own.classes()) == ["shout"]
    tools = jianmu.ToolSet.resolve(["yell"], ToolRuntime(workspace=workspace), registry=own)
    assert asyncio.run(tools.execute("shout", "hi")) == "HI"
    assert BuiltinToolProvider.get_tool_class("shout") is None
    with pytest.raises(KeyError, match="Unknown tool: read_file"):
        ToolSet.resolve(["read_file"], registry=own)
