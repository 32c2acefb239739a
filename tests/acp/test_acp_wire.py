"""``toold acp`` on the raw wire: every stdout line is one JSON-RPC message, nothing else.

No SDK on this side: lines are written to the process and read back from its stdout.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

import pytest

from tests.acp.conftest import WAIT, agent_env
from tests.agents.conftest import ModelServer

ALLOW = {"outcome": "selected", "optionId": "allow_once"}


class Wire:
    """A ``toold acp`` process spoken to line by line."""

    def __init__(self, workspace: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "toold", "acp"],
            cwd=workspace,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        assert self.proc.stdout is not None
        self.reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)
        self.reader.start()
        self.seen: list[bytes] = []

    def _read(self, stream: IO[bytes]) -> None:
        for line in stream:
            self.lines.put(line)

    def send(self, raw: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw.encode("utf-8") + b"\n")
        self.proc.stdin.flush()

    def request(self, id_: int, method: str, params: dict[str, Any]) -> None:
        self.send(json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}))

    def answer(self, id_: int) -> dict[str, Any]:
        """Read messages until the response to ``id_``; every line must be JSON-RPC."""
        while True:
            line = self.lines.get(timeout=WAIT)
            self.seen.append(line)
            message = json.loads(line)
            assert message["jsonrpc"] == "2.0"
            if message.get("id") == id_ and "method" not in message:
                return message
            if message.get("method") == "session/request_permission":
                self.send(
                    json.dumps(
                        {
                            "jsonrpc": "2.0",
                            "id": message["id"],
                            "result": {
                                "outcome": {"outcome": "selected", "optionId": "allow_once"}
                            },
                        }
                    )
                )

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=WAIT)
        self.reader.join(timeout=WAIT)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        return code


def test_only_protocol_lines_on_stdout_even_when_tools_print(
    model: ModelServer, workspace: Path
) -> None:
    model.tool_use(("bash", {"command": "echo to-stdout; echo to-stderr >&2"}))
    model.tool_use(("python_repl", {"code": "import os; os.write(1, b'raw fd 1\\n')"}))
    model.text("printed")
    wire = Wire(workspace, agent_env(model))
    try:
        wire.send("this is not json")
        wire.request(1, "initialize", {"protocolVersion": 1})
        assert wire.answer(1)["result"]["protocolVersion"] == 1
        wire.request(2, "session/new", {"cwd": str(workspace), "mcpServers": []})
        session_id = wire.answer(2)["result"]["sessionId"]
        wire.request(3, "session/set_mode", {"sessionId": session_id, "modeId": "bypass"})
        assert wire.answer(3)["result"] == {}
        prompt = [{"type": "text", "text": "print things"}]
        wire.request(4, "session/prompt", {"sessionId": session_id, "prompt": prompt})
        assert wire.answer(4)["result"] == {"stopReason": "end_turn"}
        wire.request(5, "session/prompt", {"sessionId": "nope", "prompt": prompt})
        error = wire.answer(5)["error"]
        assert error["code"] == -32002  # ACP's resource not found
        assert "create one with session/new" in error["message"]
    finally:
        assert wire.close() == 0
    assert all(line.startswith(b"{") for line in wire.seen)
    assert not any(b"raw fd 1" in line and b"jsonrpc" not in line for line in wire.seen)


def errors_until(wire: Wire, id_: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Messages before the answer to ``id_`` (the refusals of bad lines) and that answer."""
    before: list[dict[str, Any]] = []
    while True:
        message = json.loads(wire.lines.get(timeout=WAIT))
        if message.get("id") == id_ and "method" not in message:
            return before, message
        before.append(message)


@pytest.mark.parametrize(
    ("line", "code"),
    [
        pytest.param("42", -32600, id="a-number"),
        pytest.param("null", -32600, id="null"),
        pytest.param('"text"', -32600, id="a-string"),
        pytest.param('[{"jsonrpc": "2.0", "id": 9, "method": "initialize"}]', -32600, id="batch"),
        pytest.param("{not json", -32700, id="not-json"),
        pytest.param('{"jsonrpc": "2.0", "id": {"a": 1}, "method": "x"}', -32600, id="object-id"),
        pytest.param('{"jsonrpc": "2.0", "id": 1.5, "method": "x"}', -32600, id="float-id"),
    ],
)
def test_a_line_that_is_no_message_is_answered_and_the_agent_reads_on(
    workspace: Path, line: str, code: int
) -> None:
    wire = Wire(workspace, agent_env(None))
    try:
        wire.send(line)
        wire.request(1, "initialize", {"protocolVersion": 1})
        refusals, answer = errors_until(wire, 1)
        assert answer["result"]["protocolVersion"] == 1
        assert [(r["id"], r["error"]["code"]) for r in refusals] == [(None, code)]
    finally:
        assert wire.close() == 0


def test_a_line_over_the_cap_is_skipped_without_being_kept(workspace: Path) -> None:
    wire = Wire(workspace, agent_env(None))
    try:
        huge = '{"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {"x": "'
        wire.send(huge + "a" * (64 * 1024 * 1024) + '"}}')
        wire.request(1, "initialize", {"protocolVersion": 1})
        refusals, answer = errors_until(wire, 1)
        assert answer["result"]["protocolVersion"] == 1
        assert [(r["id"], r["error"]["code"]) for r in refusals] == [(None, -33001)]
        assert "67108864-byte cap" in refusals[0]["error"]["message"]
    finally:
        assert wire.close() == 0


def test_a_client_that_hangs_up_during_a_permission_request_denies_it(
    model: ModelServer, workspace: Path
) -> None:
    model.tool_use(("bash", {"command": "touch asked.txt"}))
    model.text("unreachable")
    wire = Wire(workspace, agent_env(model))
    wire.request(1, "initialize", {"protocolVersion": 1})
    wire.answer(1)
    wire.request(2, "session/new", {"cwd": str(workspace), "mcpServers": []})
    session_id = wire.answer(2)["result"]["sessionId"]
    prompt = [{"type": "text", "text": "touch it"}]
    wire.request(3, "session/prompt", {"sessionId": session_id, "prompt": prompt})
    while json.loads(wire.lines.get(timeout=WAIT)).get("method") != "session/request_permission":
        pass
    assert wire.close() == 0  # a clean exit, no traceback
    assert not (workspace / "asked.txt").exists()


def test_set_mode_is_the_sessions_own(model: ModelServer, workspace: Path) -> None:
    """Two sessions of one toold acp on one engine: plan in one leaves the other's mode."""
    model.tool_use(("write_file", {"file_path": "planned.txt", "content": "x"}))
    model.text("refused")
    model.tool_use(("write_file", {"file_path": "free.txt", "content": "y"}))
    model.text("written")
    wire = Wire(workspace, agent_env(model))
    try:
        wire.request(1, "initialize", {"protocolVersion": 1})
        wire.answer(1)
        ids = []
        for n in (2, 3):
            wire.request(n, "session/new", {"cwd": str(workspace), "mcpServers": []})
            ids.append(wire.answer(n)["result"]["sessionId"])
        planning, free = ids
        wire.request(4, "session/set_mode", {"sessionId": planning, "modeId": "plan"})
        wire.answer(4)
        wire.request(5, "session/set_mode", {"sessionId": free, "modeId": "bypass"})
        wire.answer(5)
        prompt = [{"type": "text", "text": "write"}]
        wire.request(6, "session/prompt", {"sessionId": planning, "prompt": prompt})
        assert wire.answer(6)["result"] == {"stopReason": "end_turn"}
        wire.request(7, "session/prompt", {"sessionId": free, "prompt": prompt})
        assert wire.answer(7)["result"] == {"stopReason": "end_turn"}
    finally:
        assert wire.close() == 0
    assert not (workspace / "planned.txt").exists()  # plan mode: refused, not asked
    assert (workspace / "free.txt").read_text(encoding="utf-8") == "y"  # bypass: ran
