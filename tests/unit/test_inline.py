"""Which calls run on the event loop (inline) and which take a worker thread."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from tests.calls import user_call
from toold.config import FilesConfig, LimitsConfig, TooldConfig
from toold.sandbox.paths import LOCAL_FILESYSTEMS, filesystem_type
from toold.tools.registry import BuiltinToolProvider
from toold.tools.runtime import ToolRuntime
from toold.tools.toolset import ToolSet

INLINE = {"read_file", "write_file", "edit_file", "multi_edit", "list_dir", "file_info"}


def toolset(workspace: Path, config: TooldConfig | None = None) -> ToolSet:
    runtime = ToolRuntime(workspace=workspace, config=config or TooldConfig())
    return ToolSet(BuiltinToolProvider(runtime).get_tools())


def test_filesystem_types_come_from_mountinfo(tmp_path: Path) -> None:
    assert filesystem_type(Path("/proc/self")) == "proc"
    assert filesystem_type(Path("/")) is not None
    assert filesystem_type(tmp_path) in LOCAL_FILESYSTEMS  # this test needs a local /tmp


def test_only_bounded_file_tools_run_inline_on_a_local_disk(tmp_path: Path) -> None:
    tools = toolset(tmp_path)
    inline = {t.name for t in tools if t.runs_inline({})}
    assert inline == INLINE
    # Searches, shells and the network always take a thread.
    assert not inline & {"grep", "glob", "bash", "str_replace", "http_request", "python_repl"}


def test_nothing_runs_inline_on_a_network_filesystem(tmp_path: Path) -> None:
    tools = toolset(tmp_path)
    for t in tools:
        if t.runtime is not None:
            t.runtime.__dict__["local_filesystem"] = False  # as for nfs, cifs or fuse.sshfs
    assert not any(t.runs_inline({}) for t in tools)


@pytest.mark.parametrize(
    "config",
    [
        TooldConfig(limits=LimitsConfig(max_file_size=64 << 20)),
        TooldConfig(files=FilesConfig(max_content_size=64 << 20)),
    ],
)
def test_large_size_limits_send_file_tools_to_a_thread(tmp_path: Path, config: TooldConfig) -> None:
    assert not any(t.runs_inline({}) for t in toolset(tmp_path, config))


def test_a_large_folder_is_listed_on_a_thread(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.mkdir()
    for i in range(2000):
        (big / f"entry-with-a-long-name-{i:05}").touch()
    list_dir = toolset(tmp_path).require("list_dir")
    assert list_dir.runs_inline(list_dir.parse_args({"path": "."}))
    assert not list_dir.runs_inline(list_dir.parse_args({"path": "big"}))
    # A missing folder fails at once, with its message.
    assert list_dir.runs_inline(list_dir.parse_args({"path": "missing"}))


def test_inline_calls_stay_on_the_loop_thread_and_others_leave_it(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("x\n")
    tools = toolset(tmp_path)
    seen: dict[str, int] = {}
    for name in ("read_file", "grep"):
        tool = tools.require(name)
        run = tool.run

        def spy(*args: object, _run: object = run, _name: str = name, **kwargs: object) -> object:
            seen[_name] = threading.get_ident()
            return _run(*args, **kwargs)  # type: ignore[operator]

        tool.run = spy  # type: ignore[method-assign]

    async def main() -> int:
        assert not (await user_call(tools, "read_file", {"file_path": "f.txt"})).is_error
        assert not (await user_call(tools, "grep", {"pattern": "x"})).is_error
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert seen["read_file"] == loop_thread
    assert seen["grep"] != loop_thread
