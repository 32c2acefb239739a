"""``toold run FILE.jsonl``: raw JSON-RPC lines replayed against a fresh daemon."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("hello\n", encoding="utf-8")
    return ws


def replay(
    workspace: Path, lines: list[Any] | str, *extra: str
) -> subprocess.CompletedProcess[str]:
    path = workspace.parent / "session.jsonl"
    text = lines if isinstance(lines, str) else "".join(json.dumps(m) + "\n" for m in lines)
    path.write_text(text, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "toold", "run", str(path), "--workspace", str(workspace), *extra],
        capture_output=True,
        text=True,
        timeout=60,
    )


def request(msg_id: Any, method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def read(msg_id: Any, path: str) -> dict[str, Any]:
    return request(
        msg_id,
        "tools/call",
        {"name": "read_file", "arguments": {"file_path": path}, "origin": "user"},
    )


def a_dead_pid() -> int:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    return gone.pid


def test_the_files_own_initialize_shutdown_and_exit_are_used(workspace: Path) -> None:
    """A recorded editor session: its processId (long dead) is replaced by the runner's."""
    done = replay(
        workspace,
        [
            request(1, "initialize", {"processId": a_dead_pid(), "capabilities": {}}),
            {"jsonrpc": "2.0", "method": "initialized", "params": {}},
            read("r", "a.txt"),
            request(3, "shutdown"),
            {"jsonrpc": "2.0", "method": "exit"},
        ],
    )
    assert done.returncode == 0, done.stderr
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert [reply["id"] for reply in replies] == [1, "r", 3]
    assert replies[0]["result"]["serverInfo"]["name"] == "toold"
    assert replies[1] == {
        "jsonrpc": "2.0",
        "id": "r",
        "result": {"content": "1: hello", "isError": False},
    }
    assert replies[2] == {"jsonrpc": "2.0", "id": 3, "result": None}


def test_failed_answers_fail_the_replay_and_the_junit_report(
    workspace: Path, tmp_path: Path
) -> None:
    report = tmp_path / "replay.xml"
    done = replay(
        workspace,
        [read(1, "a.txt"), read(2, "missing.txt"), request(3, "jobs/get", {"jobId": "nope"})],
        "--junit",
        str(report),
    )
    assert done.returncode == 1
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert [reply["id"] for reply in replies] == [1, 2, 3]
    assert replies[1]["result"]["isError"] is True
    assert replies[2]["error"] == {"code": -33002, "message": "Unknown job: nope"}
    assert "✗ line 3  jobs/get  " in done.stderr
    assert done.stderr.splitlines()[-1].startswith("FAILED: 1 passed, 2 failed in ")
    cases = ET.parse(report).getroot().findall("testsuite/testcase")
    assert [(c.get("name"), c.get("classname")) for c in cases] == [
        ("line 1", "toold.read_file"),
        ("line 2", "toold.read_file"),
        ("line 3", "toold.jobs/get"),
    ]
    failure = cases[2].find("failure")
    assert failure is not None and failure.get("message") == "error -33002: Unknown job: nope"


def test_bad_lines_are_named_before_anything_runs(workspace: Path) -> None:
    write = request(
        1,
        "tools/call",
        {
            "name": "write_file",
            "arguments": {"file_path": "ran.txt", "content": "x"},
            "origin": "user",
        },
    )
    lines = [
        json.dumps(write),
        json.dumps(request(1, "tasks/list", {"status": "pending"})),
        "not json",
        json.dumps(request(3, "task/list")),
        "",
        json.dumps(request(4, "tasks/list", {"stat": "x"})),
        json.dumps(request(5, "initialize", {})),
        json.dumps({"jsonrpc": "2.0", "id": 6, "result": None}),
        "[1]",
        json.dumps({"jsonrpc": "2.0", "method": "jobs/list"}),
        json.dumps({"id": 7, "method": "jobs/list"}),
        json.dumps(request(8, "shutdown")),
        json.dumps(request(9, "jobs/list")),
        json.dumps({"jsonrpc": "2.0", "method": "exit"}),
        json.dumps({"jsonrpc": "2.0", "method": "exit"}),
    ]
    done = replay(workspace, "\n".join(lines) + "\n")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines()[1:] == [
        "  line 2: id 1 is already used on line 1",
        "  line 3: not valid JSON: Expecting value (column 1)",
        "  line 4: unknown method 'task/list'; did you mean 'tasks/list'?",
        "  line 6: params.stat: unknown field; did you mean 'status'? expected one of: status",
        "  line 7: initialize must be the first message (or left out: toold run sends it)",
        '  line 8: a response (no "method"): the file holds requests and notifications only',
        "  line 9: a message must be a JSON object",
        "  line 10: jobs/list is a request: give it an id",
        '  line 11: add "jsonrpc": "2.0"',
        "  line 13: a request after shutdown (line 12) is refused by the daemon",
        "  line 15: nothing may follow exit (line 14)",
    ]
    assert not (workspace / "ran.txt").exists()
