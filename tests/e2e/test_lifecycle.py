"""LSP lifecycle over real stdio: exit codes, end of input, the client process dying, the
daemon's working folder, debug logs on stderr, stdin that is a file.

Spawned because each is a fact about the ``toold serve`` process; initialize's answer, the
workspace a session binds and a prompt answered during the shutdown grace are tested in
process (tests/interaction/test_lifecycle.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.wire import WireClient


def wait_for_exit(proc: subprocess.Popen[bytes], timeout: float = 20) -> int:
    return proc.wait(timeout=timeout)


def test_workspace_falls_back_to_cwd(tmp_path: Path) -> None:
    c = WireClient(None)  # cwd of the daemon is the test's cwd
    try:
        c.initialize()
        assert c.tool("bash", command="pwd")["content"] == os.getcwd()
    finally:
        c.close()


def test_shutdown_then_requests_are_invalid_and_exit_is_clean(raw_client: WireClient) -> None:
    raw_client.initialize()
    assert raw_client.call("shutdown") is None
    reply = raw_client.response(raw_client.request("tools/list", {}))
    assert reply["error"]["code"] == -32600
    raw_client.notify("exit")
    assert wait_for_exit(raw_client.proc) == 0


def test_exit_without_shutdown_exits_1(raw_client: WireClient) -> None:
    raw_client.initialize()
    raw_client.notify("exit")
    assert wait_for_exit(raw_client.proc) == 1


def test_daemon_exits_when_stdin_closes(raw_client: WireClient) -> None:
    raw_client.initialize()
    assert raw_client.proc.stdin is not None
    raw_client.proc.stdin.close()
    assert wait_for_exit(raw_client.proc) == 1


def test_daemon_exits_when_client_process_dies(workspace: Path) -> None:
    editor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    c = WireClient(workspace)
    try:
        c.initialize(processId=editor.pid)
        assert c.proc.poll() is None
        editor.kill()
        editor.wait()
        assert wait_for_exit(c.proc) == 0
    finally:
        editor.kill()
        c.close()


def test_debug_logs_go_to_stderr_never_stdout(workspace: Path) -> None:
    """With debug logging on, every stdout byte still parses as a frame. A private daemon:
    it serves and logs in the one process (an engine logs to its log file, never to the
    editor's stdout)."""
    c = WireClient(workspace, "--log-level", "debug", "--no-daemon")
    try:
        c.initialize()
        assert c.tool("read_file", file_path="src/main.py")["content"] == "1: print('needle')"
        deadline = time.monotonic() + 20
        while "DEBUG" not in c.stderr() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "DEBUG" in c.stderr()
    finally:
        assert c.close() == 0


def _frame(message: str) -> bytes:
    body = message.encode("utf-8")
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def test_stdin_that_is_not_a_pipe_is_read_to_its_end(tmp_path: Path) -> None:
    """/dev/null (which epoll refuses) and a regular file holding a whole session."""
    serve = [sys.executable, "-m", "toold", "serve", "--workspace", os.fspath(tmp_path)]
    with open(os.devnull, "rb") as devnull:
        done = subprocess.run(serve, stdin=devnull, capture_output=True, timeout=30)
    assert done.returncode == 1, done.stderr  # end of input without shutdown
    session = tmp_path / "session.jsonrpc"
    session.write_bytes(
        _frame('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{}}}')
        + _frame('{"jsonrpc":"2.0","method":"initialized","params":{}}')
        + _frame('{"jsonrpc":"2.0","id":2,"method":"shutdown"}')
        + _frame('{"jsonrpc":"2.0","method":"exit"}')
    )
    with session.open("rb") as stdin:
        done = subprocess.run(serve, stdin=stdin, capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith(b'{"jsonrpc": "2.0", "id": 2, "result": null}'), done.stdout
