"""Clients that an agent's command starts below the engine, trying to pass for the user."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import pytest

from tests.engine.support import Engines, local_runner


@pytest.fixture(autouse=True)
def _reaching_the_engine(workspace: Path) -> None:
    """The local runner: these commands reach the engine's socket (a sandboxed runner
    shows them neither the runtime folder nor the engine's pids)."""
    local_runner(workspace)


def _toold() -> str:
    return f"{sys.executable} -m toold"


def test_a_client_backgrounded_out_of_its_shell_is_still_the_agent(
    engines: Engines, workspace: Path
) -> None:
    """``( cmd & )``: the client's parent exits at once, so it is init's child; it keeps
    the tool call's process group and session."""
    editor = engines.editor(workspace)
    write = json.dumps({"file_path": "pwned.txt", "content": "x"})
    command = (
        f"( {{ {_toold()} call write_file '{write}' > out.txt 2>&1; echo $? > done.txt; }} & ); "
        "while [ ! -s done.txt ]; do sleep 0.02; done; cat out.txt"
    )
    inside = editor.tool("bash", command=command)
    assert not (workspace / "pwned.txt").exists(), inside
    assert "User denied." in str(inside["content"])

    stop = f"( {{ {_toold()} daemon stop > out.txt 2>&1; echo $? > stopped.txt; }} & ); "
    stop += "while [ ! -s stopped.txt ]; do sleep 0.02; done; cat out.txt"
    assert "cannot stop the engine" in str(editor.tool("bash", command=stop)["content"])
    assert engines.status(workspace)["sessions"]


def test_a_peer_gone_before_its_hello_is_read_cannot_stop_the_engine(
    engines: Engines, workspace: Path
) -> None:
    """A process that connects, hands the socket to a child and exits leaves the engine
    no process to judge: it is refused as the agent's would be."""
    assert engines.toold("daemon", "start", cwd=workspace).returncode == 0
    pid = engines.status(workspace)["pid"]
    (path,) = [p for p in engines.runtime.iterdir() if p.suffix == ".sock"]
    mine, theirs = socket.socketpair()
    connector = os.fork()
    if connector == 0:  # pragma: no cover - the child connects, hands over, exits
        try:
            with socket.socket(socket.AF_UNIX) as peer:
                peer.connect(os.fspath(path))
                socket.send_fds(theirs, [b"s"], [peer.fileno()])
        finally:
            os._exit(0)
    theirs.close()
    _, (fd,), _, _ = socket.recv_fds(mine, 1, 1)
    mine.close()
    os.waitpid(connector, 0)  # gone (and reaped) before anything is said
    with socket.socket(fileno=fd) as handed:
        handed.sendall(b'{"toold": 3, "kind": "stop"}\n')
        reply = json.loads(handed.makefile("rb").readline())
    assert reply["ok"] is False and "cannot stop the engine" in reply["error"], reply
    assert engines.status(workspace)["pid"] == pid


_SELF_APPROVER = """
import json, sys
from pathlib import Path
from toold.client import read_frame, write_frame
from toold.engine.attach import attach

link = attach(Path("."), "session", {"client": "not the agent"})
can_ask = {"window": {"showMessage": {}}}
write_frame(link.writer, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                          "params": {"processId": None, "capabilities": can_ask}})
write_frame(link.writer, {"jsonrpc": "2.0", "method": "initialized", "params": {}})
call = {"name": "write_file", "arguments": {"file_path": "pwned.txt", "content": "x"}}
write_frame(link.writer, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
while (message := read_frame(link.reader)) is not None:
    if message.get("method") == "window/showMessageRequest":
        print("asked", flush=True)
        answer = {"title": sys.argv[1]}
        write_frame(link.writer, {"jsonrpc": "2.0", "id": message["id"], "result": answer})
    elif message.get("id") == 2:
        print(json.dumps(message))
        break
"""


@pytest.mark.parametrize("answer", ["Allow", "Always allow"])
def test_an_agents_client_cannot_answer_its_own_prompt(
    engines: Engines, workspace: Path, answer: str
) -> None:
    """A client inside a tool call that says it can show prompts is never asked: it
    would approve its own calls (and 'Always allow' them for everyone)."""
    editor = engines.editor(workspace)
    (workspace / "approve.py").write_text(_SELF_APPROVER)
    ran = editor.tool("bash", command=f"{sys.executable} approve.py '{answer}'")
    assert "asked" not in str(ran["content"]), ran
    assert not (workspace / "pwned.txt").exists(), ran
    again = editor.tool("bash", command=f"{sys.executable} approve.py '{answer}'")
    assert not (workspace / "pwned.txt").exists(), again


def test_undo_from_inside_a_tool_call_is_refused_even_backgrounded(
    engines: Engines, workspace: Path
) -> None:
    """``toold undo`` writes files past the guard: the user's alone. ``toold checkpoints``
    and ``toold jobs`` only read, and work from there."""
    editor = engines.editor(workspace)
    assert not editor.tool("write_file", file_path="kept.txt", content="mine")["isError"]
    listed = editor.tool("bash", command=f"{_toold()} checkpoints")
    assert "kept.txt" in str(listed["content"]), listed
    assert editor.tool("bash", command=f"{_toold()} jobs")["exitCode"] == 0
    for command in (
        f"{_toold()} undo 2>&1",
        f"( {{ {_toold()} undo > out.txt 2>&1; echo $? > done.txt; }} & ); "
        "while [ ! -s done.txt ]; do sleep 0.02; done; cat out.txt",
    ):
        undo = editor.tool("bash", command=command)
        assert "checkpoints/restore from inside a tool call" in str(undo["content"]), undo
        assert (workspace / "kept.txt").read_text() == "mine"


def test_toold_jobs_prints_an_agents_command_with_its_escapes_visible(
    engines: Engines, workspace: Path
) -> None:
    """A job's command is the agent's text: printed raw, an escape sequence in it would
    drive the user's terminal (retitle it, write the clipboard with OSC 52)."""
    command = "true # \x1b]52;c;cHduZWQ=\x07\x1b[2J"
    job = json.dumps({"command": command, "task_id": "sly"})
    assert engines.toold("call", "background_run", job, cwd=workspace).returncode == 0
    assert engines.toold("jobs", "wait", "sly", cwd=workspace).returncode == 0
    listed = engines.toold("jobs", cwd=workspace)
    assert listed.returncode == 0, listed.stderr
    assert "\x1b" not in listed.stdout and "\\x1b]52;c;cHduZWQ=\\x07" in listed.stdout
    assert "\x1b" in json.loads(engines.toold("jobs", "--json", cwd=workspace).stdout)[0]["command"]
