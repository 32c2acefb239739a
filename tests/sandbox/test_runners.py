"""The worker entry point, make_runner and the runners' failure modes, without a daemon."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.calls import user_call
from tests.processes import process_alive, wait_gone
from tests.sandbox.standalone import exchange, start_worker
from toold.config import TooldConfig
from toold.sandbox.channel import RemoteError, WorkerLost, rebuild_exception
from toold.sandbox.runners import make_runner
from toold.tools import tool
from toold.tools.registry import BuiltinToolProvider
from toold.tools.runtime import ToolRuntime
from toold.tools.toolset import ToolSet


def _config(runner: str, **execution: Any) -> TooldConfig:
    return TooldConfig.model_validate({"execution": {"tool_runner": runner, **execution}})


def _invoke(workspace: Path, config: TooldConfig, name: str, **args: Any) -> Any:
    async def run() -> Any:
        runner = make_runner(config, workspace)
        toolset = ToolSet(BuiltinToolProvider(ToolRuntime(workspace, config)).get_tools())
        try:
            return await user_call(toolset, name, args, runner=runner)
        finally:
            await runner.close()

    return asyncio.run(run())


def test_the_worker_entry_point_answers_one_call_in_json_lines(workspace: Path) -> None:
    request = {
        "tool": "bash",
        "args": {"command": "echo one; echo two; exit 4", "timeout": 30},
        "workspace": str(workspace),
        "config": {},
    }
    with subprocess.Popen(
        [sys.executable, "-m", "toold.sandbox.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(request).encode() + b"\n")
        proc.stdin.flush()
        lines = []
        while not lines or "progress" in lines[-1]:
            lines.append(json.loads(proc.stdout.readline()))
        proc.stdin.close()  # the worker waits for this before exiting
        assert proc.wait(timeout=30) == 0
    # A login shell may add lines of its own (a profile's warnings): look for ours.
    progress = "\n".join(line["progress"] for line in lines[:-1]).splitlines()
    assert progress.index("one") < progress.index("two")
    result = lines[-1]["result"].splitlines()
    assert result[0] == "Command failed with exit code 4"
    assert result.index("one") < result.index("two")
    assert lines[-1]["meta"] == {"exit_code": 4, "timed_out": False}


def test_the_worker_reports_an_unknown_tool_as_an_error(workspace: Path) -> None:
    request = {"tool": "no_such_tool", "args": {}, "workspace": str(workspace)}
    done = subprocess.run(
        [sys.executable, "-m", "toold.sandbox.worker"],
        input=json.dumps(request).encode() + b"\n",
        capture_output=True,
        timeout=30,
    )
    error = json.loads(done.stdout)["error"]
    assert error["type"] == "LookupError"
    assert "no_such_tool" in error["message"]


def test_exceptions_are_rebuilt_with_their_class_name_and_message() -> None:
    exc = rebuild_exception({"type": "ValueError", "module": "builtins", "message": "bad x"})
    assert type(exc) is ValueError and str(exc) == "bad x"
    key = rebuild_exception({"type": "KeyError", "module": "builtins", "message": "'k'"})
    assert type(key).__name__ == "KeyError" and str(key) == "'k'"
    foreign = rebuild_exception({"type": "Weird", "module": "nowhere.loaded", "message": "m"})
    assert isinstance(foreign, RemoteError)
    assert (type(foreign).__name__, str(foreign)) == ("Weird", "m")
    assert isinstance(rebuild_exception("garbage"), WorkerLost)


def test_a_missing_bwrap_refuses_calls_and_names_the_fix(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it
    runner = make_runner(_config("bwrap"), workspace)
    assert runner.problem is not None and "apt-get install bubblewrap" in runner.problem
    outcome = _invoke(workspace, _config("bwrap"), "read_file", file_path="notes.txt")
    assert outcome.is_error
    assert outcome.content.startswith("Error: SandboxUnavailable: bubblewrap (bwrap) is not")
    assert "apt-get install bubblewrap" in outcome.content


def test_an_unreachable_docker_engine_refuses_calls_and_names_the_fix(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    outcome = _invoke(workspace, _config("docker"), "read_file", file_path="notes.txt")
    assert outcome.is_error
    assert "Error: SandboxUnavailable: the Docker engine is not reachable" in outcome.content
    assert "dockerd" in outcome.content


@pytest.mark.usefixtures("docker_ready")
def test_a_missing_docker_image_is_named(workspace: Path) -> None:
    # Not a toold-sandbox image: toold builds only those (tests/sandbox/test_docker_image.py).
    config = _config("docker", docker_image="toold-absent:no-such-tag")
    outcome = _invoke(workspace, config, "read_file", file_path="notes.txt")
    assert outcome.is_error
    assert "toold-absent:no-such-tag (execution.docker_image) does not exist" in outcome.content


def test_a_tool_a_worker_cannot_rebuild_is_refused(workspace: Path) -> None:
    @tool(name="shout")
    def shout(text: str) -> str:
        return text.upper()

    async def run() -> Any:
        runner = make_runner(_config("subprocess", warm_workers=0), workspace)
        try:
            return await user_call(ToolSet([shout]), "shout", {"text": "hi"}, runner=runner)
        finally:
            await runner.close()

    outcome = asyncio.run(run())
    assert outcome.is_error
    assert "not a registered tool class" in outcome.content


def test_close_releases_the_fork_server_and_idle_workers(workspace: Path) -> None:
    async def run() -> list[int]:
        runner = make_runner(_config("subprocess", warm_workers=2), workspace)
        sandbox: Any = runner.sandbox
        idle = [await asyncio.wrap_future(f) for f in list(sandbox._pool._ready)]
        server = sandbox.server.pid
        pids = [server, *(w.pid for w in idle)]
        assert all(process_alive(pid) for pid in pids)
        await runner.close()
        return pids

    pids = asyncio.run(run())
    wait_gone(pids, "the call's processes")


def test_close_lets_running_calls_finish_then_stops_the_fork_server(workspace: Path) -> None:
    async def run() -> tuple[Any, int]:
        config = _config("subprocess")
        runner = make_runner(config, workspace)
        bash = BuiltinToolProvider(ToolRuntime(workspace, config)).resolve_named_tools(["bash"])
        call = asyncio.ensure_future(
            runner.run(bash[0], bash[0].validate_args({"command": "sleep 0.3; echo finished"}))
        )
        sandbox: Any = runner.sandbox
        while not (sandbox._running and sandbox.server and sandbox.server.pid):
            await asyncio.sleep(0.01)  # no event says "the call has its worker"
        server = sandbox.server.pid
        await runner.close()
        return await call, server

    result, server = asyncio.run(run())
    assert result.splitlines()[-1] == "finished"
    wait_gone(server, "the fork server, with its runner closed")


def test_a_worker_serves_shareable_calls_until_its_stdin_closes(workspace: Path) -> None:
    read = {"tool": "read_file", "workspace": str(workspace), "reuse": True}
    with start_worker() as proc:
        first = exchange(proc, {**read, "args": {"file_path": "notes.txt"}})
        assert first == {"result": "1: alpha\n2: beta", "meta": {}, "next": True}
        missing = exchange(proc, {**read, "args": {"file_path": "missing.txt"}})
        assert missing["error"]["type"] == "FileNotFoundError"
        # A failed call is the worker's last: it waits for stdin's end, then exits.
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0


def test_a_worker_serves_at_most_max_calls(workspace: Path) -> None:
    from toold.sandbox.worker import MAX_CALLS

    read = {"tool": "read_file", "args": {"file_path": "notes.txt"}, "workspace": str(workspace)}
    with start_worker() as proc:
        offers = [exchange(proc, {**read, "reuse": True}).get("next") for _ in range(MAX_CALLS)]
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    assert offers == [True] * (MAX_CALLS - 1) + [None]


def test_a_call_not_marked_for_reuse_is_the_workers_last(workspace: Path) -> None:
    request = {"tool": "read_file", "args": {"file_path": "notes.txt"}, "workspace": str(workspace)}
    with start_worker() as proc:
        assert exchange(proc, request) == {"result": "1: alpha\n2: beta", "meta": {}}
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({**request, "reuse": True}).encode() + b"\n")
        proc.stdin.close()  # the second request is read as the end's prelude, not run
        assert proc.stdout.read() == b""
        assert proc.wait(timeout=30) == 0


def test_file_calls_share_a_worker_and_bash_gets_one_of_its_own(workspace: Path) -> None:
    async def run() -> tuple[set[int], int, int]:
        config = _config("subprocess", warm_workers=1)
        runner = make_runner(config, workspace)
        read, bash = BuiltinToolProvider(ToolRuntime(workspace, config)).resolve_named_tools(
            ["read_file", "bash"]
        )
        sandbox: Any = runner.sandbox
        shared: set[int] = set()
        try:
            for _ in range(4):
                result = await runner.run(read, read.validate_args({"file_path": "notes.txt"}))
                assert result == "1: alpha\n2: beta"
                shared.update(worker.pid for worker in sandbox._pool._idle)
            ran = await runner.run(bash, bash.validate_args({"command": "echo worker=$PPID"}))
            own = int(ran.splitlines()[-1].partition("=")[2])
            after = await runner.run(read, read.validate_args({"file_path": "notes.txt"}))
            assert after == "1: alpha\n2: beta"
            shared.update(worker.pid for worker in sandbox._pool._idle)
            kept = next(iter(shared))
            assert process_alive(kept)
        finally:
            await runner.close()
        return shared, own, kept

    shared, own, kept = asyncio.run(run())
    assert len(shared) == 1, f"file calls ran in several workers: {shared}"
    assert own not in shared, "bash ran in the shared worker"
    wait_gone([own, kept], "bash's worker, and the shared one with its runner closed")


def test_an_idle_worker_that_died_is_replaced_not_used(workspace: Path) -> None:
    async def run() -> tuple[int, Any]:
        config = _config("subprocess", warm_workers=1)
        runner = make_runner(config, workspace)
        read = BuiltinToolProvider(ToolRuntime(workspace, config)).resolve_named_tools(
            ["read_file"]
        )[0]
        args = read.validate_args({"file_path": "notes.txt"})
        sandbox: Any = runner.sandbox
        try:
            await runner.run(read, args)
            (idle,) = sandbox._pool._idle
            os.killpg(idle.pid, signal.SIGKILL)
            await asyncio.to_thread(wait_gone, idle.pid, "the idle worker, killed")
            return idle.pid, await runner.run(read, args)
        finally:
            await runner.close()

    killed, result = asyncio.run(run())
    assert result == "1: alpha\n2: beta", f"the call went to the dead worker {killed}"
