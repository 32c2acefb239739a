"""python_repl: Jianmu's strings, persistence, and a worker process that dies on timeout or
cancel while the daemon's event loop carries on."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.calls import failure, user_call
from tests.processes import process_alive, wait_gone
from toold.config import TooldConfig
from toold.tools import ToolArgumentError, ToolRuntime, ToolSet
from toold.tools.builtin.python_repl import PythonReplTool

Run = Callable[[str], str]


def _call(tool: PythonReplTool, args: dict[str, Any]) -> Any:
    """The content of one call of ``tool`` through the gateway, as the user."""
    return asyncio.run(user_call(ToolSet([tool]), tool.name, args)).content


@pytest.fixture
def make_repl(workspace: Path) -> Iterator[Callable[..., PythonReplTool]]:
    made: list[PythonReplTool] = []

    def _make(**settings: Any) -> PythonReplTool:
        config = TooldConfig.model_validate({"python_repl": settings})
        tool = PythonReplTool(ToolRuntime(workspace=workspace, config=config))
        made.append(tool)
        return tool

    yield _make
    for tool in made:
        tool.close()


@pytest.fixture
def repl(make_repl: Callable[..., PythonReplTool]) -> PythonReplTool:
    return make_repl(timeout=2.0)


@pytest.fixture
def run(repl: PythonReplTool) -> Run:
    def _run(code: str) -> str:
        result = _call(repl, {"code": code})
        assert isinstance(result, str)
        return result

    return _run


def test_expression_returns_its_value(run: Run) -> None:
    assert run("2+2") == "4"
    assert run("'a' * 3") == "aaa"


def test_statements_return_printed_output(run: Run) -> None:
    assert run("for i in range(3):\n    print(i)") == "0\n1\n2"


def test_statement_without_output(run: Run) -> None:
    assert run("x = 1") == "(No output)"
    assert run("None") == "(No output)"
    # As in Jianmu, statements show only what they print: no trailing expression value.
    assert run("y = 2; y") == "(No output)"


def test_names_persist_between_calls(run: Run) -> None:
    run("x = 41")
    run("def bump(n):\n    return n + x")
    assert run("bump(1)") == "42"


def test_stderr_comes_after_the_marker(run: Run) -> None:
    code = "import sys\nprint('out')\nprint('err', file=sys.stderr)"
    assert run(code) == "out\n\n[stderr]\nerr"
    assert run("import sys; sys.stderr.write('only err\\n')") == "only err"


def test_empty_code(run: Run) -> None:
    assert run("") == "Error: No code provided"
    assert run("   \n") == "Error: No code provided"


def test_missing_code_names_the_field(repl: PythonReplTool) -> None:
    outcome = asyncio.run(user_call(ToolSet([repl]), repl.name, {}))
    assert failure(outcome, ToolArgumentError).message.startswith("invalid arguments")
    assert "code: Field required" in outcome.content


def test_exception_text_and_traceback(run: Run) -> None:
    result = run("1/0")
    assert result.startswith("Error: ZeroDivisionError: division by zero\nTraceback")
    assert "1/0" in result
    assert "_repl_worker" not in result  # the worker's own frames are left out


def test_syntax_error(run: Run) -> None:
    result = run("def f(:\n    pass")
    assert result.startswith("Error: SyntaxError: ")


def test_runtime_syntax_error_does_not_run_the_code_twice(run: Run) -> None:
    run("calls = []")
    result = run("calls.append(1) or compile('(', 'x', 'eval')")
    assert result.startswith("Error: SyntaxError:")
    assert run("len(calls)") == "1"


def test_system_exit_keeps_the_interpreter(run: Run) -> None:
    run("kept = 'yes'")
    assert run("import sys; sys.exit(3)").startswith("Error: SystemExit: 3")
    assert run("kept") == "yes"


def test_output_truncation_notice(run: Run) -> None:
    result = run("print('a' * 20000)")
    assert result == "a" * 10000 + "\n... (truncated, 20000 chars total)"
    assert run("'b' * 10000") == "b" * 10000


def test_max_output_length_from_config(make_repl: Callable[..., PythonReplTool]) -> None:
    tool = make_repl(max_output_length=100)
    result = _call(tool, {"code": "'c' * 150"})
    assert result == "c" * 100 + "\n... (truncated, 150 chars total)"


def test_output_of_child_processes_is_captured(run: Run) -> None:
    assert run("import os; os.system('echo from-shell')") == "from-shell"


def test_runs_in_the_workspace(run: Run, workspace: Path) -> None:
    assert run("import os; print(os.getcwd())") == str(workspace)
    (workspace / "helper_mod.py").write_text("VALUE = 7\n")
    assert run("import helper_mod; print(helper_mod.VALUE)") == "7"


def test_input_gets_end_of_file(run: Run) -> None:
    assert run("input()").startswith("Error: EOFError")


def test_custom_globals(run: Run) -> None:
    assert run("__name__") == "__main__"


def test_allowed_modules_are_enforced(make_repl: Callable[..., PythonReplTool]) -> None:
    tool = make_repl(allowed_modules=["json", "math"])

    def run(code: str) -> Any:
        return _call(tool, {"code": code})

    assert run("import json; print(json.dumps([1]))") == "[1]"
    assert run("from math import sqrt; print(sqrt(9))") == "3.0"
    refused = run("import os")
    assert refused.startswith("Error: ImportError: import of 'os' is not allowed")
    assert "json, math" in refused
    assert run("__import__('subprocess')").startswith("Error: ImportError:")
    # Allowed modules still import their own dependencies.
    assert run("import json.decoder; print('ok')") == "ok"


def test_timeout_kills_the_worker_and_its_children(
    make_repl: Callable[..., PythonReplTool],
) -> None:
    tool = make_repl(timeout=1.0)

    def run(code: str) -> Any:
        return _call(tool, {"code": code})

    run("state = 'old'")
    child = int(run("import subprocess; print(subprocess.Popen(['sleep', '60']).pid)"))
    worker = tool.worker.pid
    assert worker is not None
    result = run("while True:\n    pass")
    assert result.startswith("Error: Code execution timed out after 1.0s")
    wait_gone([worker, child])
    after = run("state")
    assert after.startswith(
        "[python_repl: the previous snippet timed out after 1.0s; this is a fresh interpreter, "
        "names defined before are lost]\nError: NameError"
    )
    assert tool.worker.pid not in (None, worker)
    assert run("'new'") == "new"  # the notice is given once


def test_worker_that_exits_is_replaced(run: Run) -> None:
    run("gone = 1")
    result = run("import os; os._exit(7)")
    assert "the Python worker exited (status 7)" in result
    after = run("1 + 1")
    assert after == (
        "[python_repl: the previous interpreter exited (status 7); this is a fresh "
        "interpreter, names defined before are lost]\n2"
    )


def test_cancel_kills_the_worker_and_the_loop_stays_responsive(
    make_repl: Callable[..., PythonReplTool], workspace: Path
) -> None:
    tool = make_repl(timeout=60.0)
    tools = ToolSet.from_tools([tool, *ToolSet.resolve(["calculator"])])
    started = workspace / "started"

    async def scenario() -> int:
        await user_call(tools, "python_repl", {"code": "marker = 1"})
        worker = tool.worker.pid
        assert worker is not None
        code = "open('started', 'w').close()\nimport time\nwhile True: time.sleep(0.01)"
        running = asyncio.create_task(user_call(tools, "python_repl", {"code": code}))
        async with asyncio.timeout(20):
            while not started.exists():
                await asyncio.sleep(0.01)
        # The event loop answers other calls while the snippet runs.
        assert (await user_call(tools, "calculator", "6*7")).content == "42"
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        return worker

    worker = asyncio.run(scenario())
    wait_gone([worker])
    after = _call(tool, {"code": "marker"})
    assert after.startswith("[python_repl: the previous call was cancelled; this is a fresh")


def test_cancel_before_the_snippet_starts_keeps_the_interpreter(repl: PythonReplTool) -> None:
    from toold.tools.builtin.python_repl import ReplCall

    _call(repl, {"code": "kept = 'yes'"})
    call = ReplCall()
    repl.worker.cancel(call)
    assert (
        repl.worker.execute(call, "kept = 'no'", timeout=5, max_output=100, allowed_modules=None)
        == ""
    )
    assert _call(repl, {"code": "kept"}) == "yes"


def test_close_stops_the_worker(repl: PythonReplTool, run: Run) -> None:
    run("1")
    pid = repl.worker.pid
    assert pid is not None and process_alive(pid)
    repl.close()
    wait_gone([pid])


def test_alias_python_eval() -> None:
    tools = ToolSet.resolve(["python_eval"])
    tool = tools.require("python_eval")
    assert tool.name == "python_repl"
    try:
        assert asyncio.run(user_call(tools, "python_eval", {"code": "3*3"})).content == "9"
    finally:
        assert isinstance(tool, PythonReplTool)
        tool.close()
