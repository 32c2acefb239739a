"""A framed session piped into ``toold serve`` (from a file or a pipe) gets every answer.

The session is daemon/docs/ci.md's producer, tests/ci/examples/session.py: initialize, a
one-second bash call, a read_file, shutdown, exit, all written at once.

Spawned because it is about the process: stdin that is a file or a pipe, end of input,
the exit status, the shutdown grace's report in the log, a dying client process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.wire import WireClient, daemon_log
from tests.processes import wait_gone
from tests.waiting import wait_until

PRODUCER = Path(__file__).parents[1] / "ci" / "examples" / "session.py"
TIMEOUT = 60


def serve_command(workspace: Path) -> list[str]:
    return [sys.executable, "-m", "toold", "serve", "--workspace", os.fspath(workspace)]


def produce() -> list[dict[str, Any]]:
    """The producer's session, read back as messages."""
    done = subprocess.run([sys.executable, PRODUCER], capture_output=True, check=True)
    return split_frames(done.stdout)


def frames(messages: list[dict[str, Any]]) -> bytes:
    out = b""
    for message in messages:
        body = json.dumps(message).encode("utf-8")
        out += b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    return out


def split_frames(data: bytes) -> list[dict[str, Any]]:
    """Every framed message in ``data``, in order."""
    messages = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        assert sep, f"torn frame: {data[:80]!r}"
        length = next(
            int(value)
            for name, _, value in (line.partition(b":") for line in head.split(b"\r\n"))
            if name.strip().lower() == b"content-length"
        )
        messages.append(json.loads(rest[:length]))
        data = rest[length:]
    return messages


def answers(stdout: bytes) -> list[dict[str, Any]]:
    """The responses among the daemon's messages, in the order they were written."""
    return [m for m in split_frames(stdout) if "method" not in m]


def serve_from_file(workspace: Path, session: bytes) -> subprocess.CompletedProcess[bytes]:
    """Run the daemon with ``session`` as a regular file on its stdin."""
    script = workspace.parent / "session.rpc"
    script.write_bytes(session)
    with script.open("rb") as stdin:
        return subprocess.run(
            serve_command(workspace), stdin=stdin, capture_output=True, timeout=TIMEOUT
        )


def serve_from_pipe(workspace: Path) -> subprocess.CompletedProcess[bytes]:
    """``python session.py | toold serve``: the producer's stdout is the daemon's stdin."""
    producer = subprocess.Popen([sys.executable, PRODUCER], stdout=subprocess.PIPE)
    assert producer.stdout is not None
    with producer.stdout:
        daemon = subprocess.Popen(
            serve_command(workspace),
            stdin=producer.stdout,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    out, err = daemon.communicate(timeout=TIMEOUT)
    assert producer.wait(timeout=TIMEOUT) == 0
    return subprocess.CompletedProcess(daemon.args, daemon.returncode, out, err)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("hello\n", encoding="utf-8")
    return ws


def grace(workspace: Path, seconds: float) -> None:
    """The shutdown grace, on the local runner: the sleeper's pid file holds its host pid
    only outside a sandbox's PID namespace."""
    (workspace / "toold.toml").write_text(
        f'[limits]\nshutdown_grace = {seconds}\n[execution]\ntool_runner = "local"\n'
    )


@pytest.mark.parametrize("stdin", ["file", "pipe"])
def test_every_request_before_shutdown_is_answered_before_it(workspace: Path, stdin: str) -> None:
    if stdin == "file":
        done = serve_from_file(workspace, frames(produce()))
    else:
        done = serve_from_pipe(workspace)
    assert done.returncode == 0, done.stderr.decode()
    replies = answers(done.stdout)
    by_id = {reply["id"]: reply for reply in replies}
    assert by_id[2]["result"] == {"content": "hi", "isError": False, "exitCode": 0}
    assert by_id[3]["result"] == {"content": "1: hello", "isError": False}
    assert replies[-1] == {"jsonrpc": "2.0", "id": 4, "result": None}
    # In the order they end (read_file before the one-second bash, as a rule); shutdown last.
    assert sorted(reply["id"] for reply in replies[1:3]) == [2, 3]
    assert [replies[0]["id"], len(replies)] == [1, 4]


def serve_from_open_pipe(workspace: Path, session: bytes) -> subprocess.CompletedProcess[bytes]:
    """Write ``session`` into the daemon's stdin pipe, then close it."""
    daemon = subprocess.Popen(
        serve_command(workspace),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = daemon.communicate(session, timeout=TIMEOUT)
    return subprocess.CompletedProcess(daemon.args, daemon.returncode, out, err)


@pytest.mark.parametrize("stdin", ["file", "pipe"])
def test_end_of_input_without_shutdown_still_answers_and_exits_1(
    workspace: Path, stdin: str
) -> None:
    session = frames([m for m in produce() if m.get("method") not in ("shutdown", "exit")])
    if stdin == "file":
        done = serve_from_file(workspace, session)
    else:
        done = serve_from_open_pipe(workspace, session)
    assert done.returncode == 1, done.stderr.decode()
    by_id = {reply["id"]: reply for reply in answers(done.stdout)}
    assert by_id[2]["result"]["content"] == "hi"
    assert by_id[3]["result"]["content"] == "1: hello"


def sleeper_started(workspace: Path) -> None:
    """Wait for the sleeper's pid line: the shell creates its file before it writes it."""
    pid_file = workspace / "sleeper.pid"
    wait_until(lambda: pid_file.is_file() and pid_file.read_text().endswith("\n"), "its pid", 20)


def assert_sleeper_killed(workspace: Path) -> None:
    wait_gone(int((workspace / "sleeper.pid").read_text()), "the cancelled command")


SLEEPER = {
    "name": "bash",
    "arguments": {"command": "echo $$ > sleeper.pid; sleep 600", "timeout": 900},
    "origin": "user",
}
"""A command that would run ten minutes; its pid file says it has started."""


@pytest.mark.parametrize("ending", ["shutdown", "end of input"])
def test_the_grace_limit_cancels_what_is_left_and_reports_it(workspace: Path, ending: str) -> None:
    grace(workspace, 0.2)
    c = WireClient(workspace)
    try:
        c.initialize()
        c.request("tools/call", SLEEPER, msg_id="long")
        assert c.tool("read_file", file_path="a.txt")["content"] == "1: hello"
        # The grace starts once the command runs: nothing here depends on how fast it starts.
        sleeper_started(workspace)
        if ending == "shutdown":
            c.request("shutdown", msg_id="bye")
            c.request("tools/list", {}, msg_id="late")
            c.notify("exit")
        else:
            assert c.proc.stdin is not None
            c.proc.stdin.close()
        assert c.proc.wait(timeout=30) == 1
        cancelled = c.response("long")["error"]
        assert cancelled == {"code": -32800, "message": 'Request with id "long" is canceled'}
        if ending == "shutdown":
            assert c.response("bye") == {"jsonrpc": "2.0", "id": "bye", "result": None}
            assert c.response("late")["error"]["code"] == -32600
        report = (
            "shutdown grace of 0.2s (limits.shutdown_grace) ran out; cancelling 1 request(s): "
            "'long' (tools/call)"
        )
        wait_until(
            lambda: report in daemon_log(c, workspace),
            lambda: f"the report: {daemon_log(c, workspace)}",
        )
        assert_sleeper_killed(workspace)
    finally:
        c.close()


def test_a_dead_client_process_cancels_at_once(workspace: Path) -> None:
    """processId died: no grace (ten minutes here), even with stdin still open."""
    grace(workspace, 600)
    editor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    c = WireClient(workspace)
    try:
        c.initialize(processId=editor.pid)
        msg_id = c.request("tools/call", SLEEPER)
        sleeper_started(workspace)
        editor.kill()
        editor.wait()
        assert c.proc.wait(timeout=30) == 0
        assert c.response(msg_id)["error"]["code"] == -32800
        assert_sleeper_killed(workspace)
    finally:
        editor.kill()
        c.close()
