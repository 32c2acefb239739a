"""The subprocess runner through the real daemon: worker processes, cancel, events."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.processes import process_alive, wait_gone
from tests.sandbox.conftest import Daemon, progress_until, start_call

# Workers are told from the daemon by its pid (tests/sandbox/conftest.py).
pytestmark = pytest.mark.usefixtures("private_daemon")


def test_bash_and_read_file_run_in_a_worker_process(daemon: Daemon) -> None:
    client = daemon("subprocess")
    assert client.tool("read_file", file_path="notes.txt") == {
        "content": "1: alpha\n2: beta",
        "isError": False,
    }
    result = client.tool("bash", command="echo worker=$PPID; echo oops >&2; exit 3")
    assert result["exitCode"] == 3
    lines = result["content"].splitlines()
    assert lines[0] == "Command failed with exit code 3"
    assert "oops" in lines
    worker = int(next(line for line in lines if line.startswith("worker=")).partition("=")[2])
    assert worker != client.proc.pid, "bash ran in the daemon itself"
    wait_gone(worker, "the worker, its call done")


def test_tool_exceptions_keep_their_class_and_message(daemon: Daemon) -> None:
    client = daemon("subprocess", warm_workers=0)
    missing = client.tool("read_file", file_path="missing.txt")
    assert missing["isError"] is True
    assert missing["content"].startswith("Error: FileNotFoundError: ")
    assert "missing.txt" in missing["content"]
    outside = client.tool("read_file", file_path="../escape.txt")
    assert outside["isError"] is True
    assert outside["content"].startswith("Error: PermissionError: Path '../escape.txt' escapes")


def test_progress_and_timeouts_reach_the_client(daemon: Daemon) -> None:
    client = daemon("subprocess")
    msg_id = start_call(client, "bash", "tok", command="echo first; sleep 5", timeout=1)
    progress_until(client, "first")
    reply = client.response(msg_id)
    assert reply["result"]["content"].startswith("Error: command timed out after 1 seconds")


def test_cancel_kills_the_worker_and_everything_it_started(daemon: Daemon) -> None:
    client = daemon("subprocess")
    msg_id = start_call(
        client,
        "bash",
        "cancel-me",
        command="sleep 300 & echo child=$! worker=$PPID; sleep 300",
        timeout=600,
    )
    found = progress_until(client, r"child=(\d+) worker=(\d+)")
    child, worker = int(found.group(1)), int(found.group(2))
    assert process_alive(child) and process_alive(worker)
    client.notify("$/cancelRequest", {"id": msg_id})
    assert client.response(msg_id)["error"]["code"] == -32800
    wait_gone(child, "the background child")
    wait_gone(worker, "the worker")
    assert client.tool("read_file", file_path="notes.txt")["content"] == "1: alpha\n2: beta"


def test_the_daemon_answers_while_a_worker_runs(daemon: Daemon) -> None:
    client = daemon("subprocess")
    slow = start_call(client, "bash", "slow", command="echo started; sleep 30")
    progress_until(client, "started")
    fast = client.request(
        "tools/call",
        {"name": "read_file", "arguments": {"file_path": "notes.txt"}, "origin": "user"},
    )
    first = client.next_message(lambda m: "method" not in m and m.get("id") in (slow, fast))
    assert first["id"] == fast
    assert first["result"]["content"] == "1: alpha\n2: beta"
    client.notify("$/cancelRequest", {"id": slow})
    assert client.response(slow)["error"]["code"] == -32800


def test_execution_events_name_the_runner(daemon: Daemon) -> None:
    client = daemon("subprocess", events=True)
    client.tool("read_file", file_path="notes.txt")
    started = client.notification("execution/event")["params"]
    completed = client.notification("execution/event")["params"]
    assert started == {
        "event": "execution.started",
        "tool": "read_file",
        "runner": "subprocess",
        "callId": started["callId"],
    }
    assert completed["event"] == "execution.completed"
    assert completed["callId"] == started["callId"]
    assert completed["runner"] == "subprocess"
    assert completed["durationMs"] > 0
    assert "error" not in completed

    client.tool("read_file", file_path="missing.txt")
    assert client.notification("execution/event")["params"]["event"] == "execution.started"
    failed = client.notification("execution/event")["params"]
    assert failed["event"] == "execution.failed"
    assert failed["error"].startswith("FileNotFoundError: ")


def test_daemon_bound_tools_stay_in_the_daemon(daemon: Daemon) -> None:
    client = daemon("subprocess", events=True)
    added = client.tool("todo_write", action="add", task="ship runners")
    assert added["isError"] is False
    assert "unavailable" not in str(added["content"])
    assert "ship runners" in str(client.tool("todo_read")["content"])
    client.tool("read_file", file_path="notes.txt")
    # The first events on the wire belong to read_file: the TODO tools never used the runner.
    assert client.notification("execution/event")["params"]["tool"] == "read_file"


def test_processes_that_left_the_group_die_with_the_call(daemon: Daemon) -> None:
    client = daemon("subprocess")
    result = client.tool("bash", command="setsid sleep 300 >/dev/null 2>&1 & echo escaped=$!")
    escaped = int(result["content"].rpartition("escaped=")[2].split()[0])
    wait_gone(escaped, "the daemonised process, its call done")


def test_a_megabyte_goes_through_the_pipes_both_ways(daemon: Daemon, workspace: Path) -> None:
    client = daemon("subprocess", warm_workers=0)
    content = "é" * 400_000 + "\n" + "x" * 200_000
    wrote = client.tool("write_file", file_path="big.txt", content=content)
    assert wrote["isError"] is False
    assert (workspace / "big.txt").read_text(encoding="utf-8") == content
    read = client.tool("read_file", file_path="big.txt")["content"]
    assert read == f"1: {'é' * 400_000}\n2: {'x' * 200_000}"


def test_tools_see_the_daemons_environment(daemon: Daemon) -> None:
    client = daemon("subprocess")
    result = client.tool("bash", command='echo "path=${PYTHONPATH-unset}"')
    line = next(x for x in result["content"].splitlines() if x.startswith("path="))
    assert line == f"path={os.environ.get('PYTHONPATH', 'unset')}"
