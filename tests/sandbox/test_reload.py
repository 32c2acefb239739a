"""Changing the runner while the daemon runs: the replaced one is closed, problems are shown."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from tests.calls import user_call
from tests.e2e.wire import WireClient
from tests.processes import process_alive, wait_gone
from tests.sandbox.conftest import Daemon, progress_until, start_call
from tests.waiting import wait_until
from toold.assembly import bind
from toold.sandbox.channel import SandboxUnavailable

# One daemon per toold.toml, its runner's processes found by its pid (conftest.py).
pytestmark = pytest.mark.usefixtures("private_daemon")

WARNING = 2  # window/showMessage's MessageType.Warning
DOCKER_WARNING = "the docker runner (execution.tool_runner) cannot run tools here: "


def children(pid: int) -> set[int]:
    """Live processes whose parent is ``pid`` (from /proc: psutil is not a dependency)."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii") as stat:
                fields = stat.read().rpartition(")")[2].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[1]) == pid:
            found.add(int(entry))
    return found


def fork_servers(pid: int) -> set[int]:
    """The fork servers among ``pid``'s children."""
    found = set()
    for child in children(pid):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as cmdline:
                if b"--fork-server" in cmdline.read().split(b"\0"):
                    found.add(child)
        except OSError:
            continue
    return found


def reconfigure(client: WireClient, **execution: Any) -> None:
    """workspace/didChangeConfiguration with ``execution`` settings."""
    settings = {"toold": {"config": {"execution": execution}}}
    client.notify("workspace/didChangeConfiguration", {"settings": settings})


def test_a_reload_closes_the_replaced_runner_once_its_calls_finish(
    daemon: Daemon, workspace: Path
) -> None:
    client = daemon("subprocess", warm_workers=2)
    msg_id = start_call(
        client,
        "bash",
        "slow",
        command="echo worker=$PPID; until [ -e release ]; do sleep 0.02; done; echo finished",
        timeout=120,
    )
    worker = int(progress_until(client, r"worker=(\d+)").group(1))
    [server] = fork_servers(client.proc.pid)
    assert worker in children(server)
    # During a call the pool is not refilled: the call's worker and one idle worker.
    wait_until(lambda: len(children(server)) == 2, lambda: f"two children, not {children(server)}")
    [idle] = children(server) - {worker}

    reconfigure(client, tool_runner="local")

    def runs_in_the_daemon() -> bool:
        local = client.tool("bash", command="echo parent=$PPID")
        return bool(local["content"] == f"parent={client.proc.pid}")

    wait_until(runs_in_the_daemon, "new calls to run in the daemon")
    # The running call keeps its sandbox: the fork server stays until the call is over.
    assert all(process_alive(pid) for pid in (server, worker, idle))

    (workspace / "release").touch()
    reply = client.response(msg_id)
    assert reply["result"]["isError"] is False, reply
    assert reply["result"]["content"].splitlines()[-1] == "finished"
    for pid, what in ((server, "fork server"), (idle, "idle worker"), (worker, "worker")):
        wait_gone(pid, f"the old {what}")
    assert children(client.proc.pid) == set(), "the replaced runner left processes behind"


@pytest.mark.usefixtures("bwrap_ready")
def test_a_reload_keeps_the_bwrap_sandbox_until_its_calls_finish(
    daemon: Daemon, workspace: Path
) -> None:
    client = daemon("bwrap")
    msg_id = start_call(
        client,
        "bash",
        "slow",
        command="echo started; until [ -e release ]; do sleep 0.02; done; echo finished",
        timeout=120,
    )
    progress_until(client, "started")
    sandbox = children(client.proc.pid)
    assert sandbox, "no bubblewrap process under the daemon"

    reconfigure(client, tool_runner="subprocess", warm_workers=0)

    def runs_elsewhere() -> bool:
        return bool(client.tool("bash", command="echo new")["content"] == "new") and bool(
            fork_servers(client.proc.pid)
        )

    wait_until(runs_elsewhere, "the subprocess runner to be installed")
    assert all(process_alive(pid) for pid in sandbox), "the sandbox died under a running call"

    (workspace / "release").touch()
    reply = client.response(msg_id)
    assert "finished" in reply["result"]["content"].splitlines(), reply  # a login shell
    wait_gone(sandbox, "bwrap")


def test_a_runner_that_cannot_work_is_shown_at_bind_time_and_after_a_reload(
    workspace: Path, tmp_path: Path
) -> None:
    (workspace / "toold.toml").write_text('[execution]\ntool_runner = "docker"\n')
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    client = WireClient(workspace, env=env)
    try:
        client.initialize(rootUri=workspace.as_uri())
        shown = client.notification("window/showMessage")["params"]
        assert shown["type"] == WARNING
        assert shown["message"].startswith(f"toold: {DOCKER_WARNING}")
        assert shown["message"].endswith("; until then every tool call fails")
        failed = client.tool("read_file", file_path="notes.txt")
        assert failed["content"].startswith("Error: SandboxUnavailable: ")

        # An edit of toold.toml (reloaded on the watcher's thread) to another docker image.
        client.call("skills/list", {})  # answers once edits are watched
        (workspace / "toold.toml").write_text(
            '[execution]\ntool_runner = "docker"\ndocker_image = "toold-sandbox:other"\n'
        )
        shown = client.notification("window/showMessage")["params"]
        assert shown["type"] == WARNING
        assert shown["message"].startswith(f"toold: {DOCKER_WARNING}")

        # workspace/didChangeConfiguration to a runner that works: tools run again.
        reconfigure(client, tool_runner="local")

        def read() -> bool:
            result = client.tool("read_file", file_path="notes.txt")
            return result == {"content": "1: alpha\n2: beta", "isError": False}

        wait_until(read, "the local runner to be installed")
        reconfigure(client, tool_runner="docker", docker_image="toold-sandbox:third")
        shown = client.notification("window/showMessage")["params"]
        assert shown["type"] == WARNING
        assert shown["message"].startswith(f"toold: {DOCKER_WARNING}")
    finally:
        client.close()


def test_reloading_in_a_thread_swaps_the_sandbox_under_the_same_runner(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the toold.toml watcher does it: reload_config on a worker thread."""
    warnings: list[str] = []

    async def scenario() -> None:
        overrides = {"execution": {"tool_runner": "subprocess", "warm_workers": 1}}
        state = bind(workspace, overrides, lambda *_: None, pytest.fail, warn=warnings.append)
        runner = state.runner
        try:
            old: Any = runner.sandbox
            [ready] = list(old._pool._ready)
            idle = (await asyncio.wrap_future(ready)).pid
            old_server = old.server.pid
            assert warnings == [] and process_alive(idle) and process_alive(old_server)

            overrides["execution"]["warm_workers"] = 2
            assert await asyncio.to_thread(state.reload_config, overrides) is None
            assert state.runner is runner and runner.sandbox is not old
            assert state.config.execution.warm_workers == 2
            wait_gone([old_server, idle], "the old fork server and its idle worker")
            outcome = await user_call(state.toolset, "bash", {"command": "echo new"}, runner=runner)
            assert outcome.content == "new"
            new: Any = runner.sandbox
            new_server = new.server.pid  # read it now: releasing the sandbox forgets it
            assert new_server != old_server and process_alive(new_server)

            # A runner that cannot work here is a warning, and calls name the fix.
            monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it
            overrides["execution"]["tool_runner"] = "bwrap"
            assert await asyncio.to_thread(state.reload_config, overrides) is None
            [warning] = warnings
            assert warning.startswith("the bwrap runner (execution.tool_runner) cannot run ")
            assert "apt-get install bubblewrap" in warning
            with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
                await runner.sandbox.run_tool(state.toolset.require("read_file"), None)
            wait_gone(new_server, "the replaced server")
        finally:
            await state.jobs.close()
            await runner.close()

    asyncio.run(scenario())


def test_configuration_changes_apply_in_the_order_they_were_sent(
    daemon: Daemon, workspace: Path
) -> None:
    client = daemon("local")
    (workspace / "data.txt").write_text("x" * 100)
    for size in (10, 1_000_000, 10, 1_000_000):  # sent back to back; the last one wins
        settings = {"toold": {"config": {"limits": {"max_file_size": size}}}}
        client.notify("workspace/didChangeConfiguration", {"settings": settings})
    result = client.tool("read_file", file_path="data.txt")
    assert result["isError"] is False, result
    settings = {"toold": {"config": {"limits": {"max_file_size": 10}}}}
    client.notify("workspace/didChangeConfiguration", {"settings": settings})
    assert "File too large" in client.tool("read_file", file_path="data.txt")["content"]
