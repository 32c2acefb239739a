"""Tools whose spec answers a failure with text (``Error: ...``, "unavailable") keep the
text and are marked isError, in the daemon and back from a sandbox worker."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.calls import user_call
from toold.config import TooldConfig
from toold.sandbox.runners import make_runner
from toold.tools import ToolOutcome, ToolRuntime, ToolSet
from toold.tools.registry import BuiltinToolProvider


def _invoke(workspace: Path, name: str, args: Any, runner_name: str = "local") -> ToolOutcome:
    """One call through the gateway with the named runner: the tool's answer (content,
    isError, exit status), without the verdict's fields."""
    config = TooldConfig.model_validate(
        {
            "execution": {"tool_runner": runner_name, "warm_workers": 0},
            # http.block_private refuses loopback: the dead port is on 127.0.0.1.
            "http": {"retries": 0, "allow_hosts": ["127.0.0.1"]},
        }
    )

    async def run() -> ToolOutcome:
        runner = make_runner(config, workspace)
        tools = ToolSet(BuiltinToolProvider(ToolRuntime(workspace, config)).get_tools())
        try:
            done = await user_call(tools, name, args, runner=runner)
            return ToolOutcome(done.content, done.is_error, done.exit_code, done.timed_out)
        finally:
            await runner.close()
            for tool in tools:
                close = getattr(tool, "close", None)
                if callable(close):
                    close()

    return asyncio.run(run())


def _dead_port() -> int:
    """A port on 127.0.0.1 nobody listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.mark.parametrize("runner", ["local", "subprocess"])
def test_calculator_division_by_zero(workspace: Path, runner: str) -> None:
    outcome = _invoke(workspace, "calculator", {"input": "1/0"}, runner)
    assert outcome == ToolOutcome("Error: division by zero", is_error=True)
    assert _invoke(workspace, "calculator", {"input": "6*7"}, runner) == ToolOutcome("42")


def test_calculator_refused_characters(workspace: Path) -> None:
    outcome = _invoke(workspace, "calculator", {"input": "__import__('os')"})
    assert outcome.is_error
    assert outcome.content == "Error: Only math expressions allowed, got: __import__('os')"


def test_http_request_to_a_dead_port(workspace: Path) -> None:
    url = f"http://127.0.0.1:{_dead_port()}/"
    outcome = _invoke(workspace, "http_request", {"url": url})
    assert outcome.is_error
    assert outcome.content.startswith("Error: ClientConnectorError: "), outcome.content


@pytest.mark.parametrize("runner", ["local", "subprocess"])
def test_python_repl_exception(workspace: Path, runner: str) -> None:
    outcome = _invoke(workspace, "python_repl", {"code": "1/0"}, runner)
    assert outcome.is_error
    assert outcome.content.startswith("Error: ZeroDivisionError: division by zero\n")
    assert "Traceback" in outcome.content
    fine = _invoke(workspace, "python_repl", {"code": "print('ok')"}, runner)
    assert fine == ToolOutcome("ok")


def test_subagent_without_a_provider(workspace: Path) -> None:
    outcome = _invoke(workspace, "subagent", {"task": "look around"})
    assert outcome == ToolOutcome("Subagent unavailable: provider is not configured.", True)


@pytest.mark.parametrize("tool", ["read_file", "file_read", "edit_file"])
def test_reading_a_folder_names_the_path(workspace: Path, tool: str) -> None:
    (workspace / "sub").mkdir()
    args: dict[str, Any] = {"file_path": "sub"}
    if tool == "edit_file":
        args.update(old_text="a", new_text="b")
    outcome = _invoke(workspace, tool, args)
    expected = "Error: IsADirectoryError: Is a directory: sub (list it with list_dir or glob)"
    assert outcome == ToolOutcome(expected, is_error=True)
