"""``toold run session.jsonl``: raw JSON-RPC messages, one a line, replayed in order.

The whole file is checked before the daemon starts; a problem names its line. Requests
are sent one at a time, each answered before the next line is sent, and every response
is printed as one JSON line. Notifications are sent as they are. When the file's first
message is ``initialize`` it is used (its ``processId``, the recorded editor's, becomes
this process's: the daemon stops when that process dies); otherwise the runner
initializes. Without an ``exit`` of its own the runner ends with shutdown and exit.
"""

from __future__ import annotations

import difflib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from toold.ci.methods import method_problems
from toold.ci.runner import Reporter, RunOutcome, StepResult, judge
from toold.ci.script import ScriptError, Step
from toold_protocol.names import CLIENT_REQUESTS

_LIFECYCLE = ("initialize", "initialized", "shutdown", "exit", "$/cancelRequest")


@dataclass
class Line:
    """One message of the file and where it is."""

    number: int
    message: dict[str, Any]

    @property
    def label(self) -> str:
        """``line 3``: how reports name it."""
        return f"line {self.number}"


def load_replay(source: str) -> list[Line]:
    """Read and check a JSON-lines file (ScriptError names each bad line)."""
    try:
        text = Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScriptError(source, [f"cannot read it: {exc}"]) from None
    lines: list[Line] = []
    problems: list[tuple[int, str]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            message = json.loads(raw)
        except json.JSONDecodeError as exc:
            problems.append(
                (number, f"line {number}: not valid JSON: {exc.msg} (column {exc.colno})")
            )
            continue
        lines.append(Line(number, message))
    problems += check_lines(lines)
    if not lines and not problems:
        problems.append((0, "no message: write one JSON-RPC request or notification per line"))
    if problems:
        raise ScriptError(source, [problem for _, problem in sorted(problems)])
    return lines


def check_lines(lines: list[Line]) -> list[tuple[int, str]]:
    """Each line that is no request or notification the daemon can take: (line, why)."""
    known = _known_methods()
    problems: list[tuple[int, str]] = []
    ids: dict[Any, int] = {}
    shutdown: int | None = None
    exited: int | None = None
    for index, line in enumerate(lines):
        where, message = line.label, line.message
        problem = _shape_problem(message)
        if problem is None:
            method, msg_id = message["method"], message.get("id")
            if method not in known:
                close = difflib.get_close_matches(method, sorted(known), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                problem = f"unknown method {method!r}{hint}"
            elif msg_id in ids:
                problem = f"id {msg_id!r} is already used on line {ids[msg_id]}"
            elif method == "initialize" and index:
                problem = "initialize must be the first message (or left out: toold run sends it)"
            elif exited is not None:
                problem = f"nothing may follow exit (line {exited})"
            elif shutdown is not None and "id" in message:
                problem = f"a request after shutdown (line {shutdown}) is refused by the daemon"
            elif method in CLIENT_REQUESTS and "id" not in message:
                problem = f"{method} is a request: give it an id"
        if problem is not None:
            problems.append((line.number, f"{where}: {problem}"))
            continue
        if "id" in message:
            ids[message["id"]] = line.number
        if message["method"] == "shutdown":
            shutdown = line.number
        if message["method"] == "exit":
            exited = line.number
        if message["method"] in CLIENT_REQUESTS:
            params = message.get("params", {})
            for problem in method_problems(message["method"], params, where, f"{where}: params"):
                problems.append((line.number, problem))
    return problems


def _shape_problem(message: Any) -> str | None:
    if not isinstance(message, dict):
        return "a message must be a JSON object"
    if message.get("jsonrpc") != "2.0":
        return 'add "jsonrpc": "2.0"'
    if "method" not in message:
        return 'a response (no "method"): the file holds requests and notifications only'
    if not isinstance(message["method"], str):
        return '"method" must be a string'
    msg_id = message.get("id")
    if "id" in message and (not isinstance(msg_id, (str, int)) or isinstance(msg_id, bool)):
        return '"id" must be a string or an integer'
    return None


def _known_methods() -> frozenset[str]:
    """The contract's requests, LSP's lifecycle, and the rest of LSP (a recorded editor)."""
    from lsprotocol import types

    return frozenset(CLIENT_REQUESTS) | frozenset(_LIFECYCLE) | frozenset(types.METHOD_TO_TYPES)


def replay(
    lines: list[Line], workspace: Path, out: TextIO, reporter: Reporter | None = None
) -> RunOutcome:
    """Send ``lines`` to a fresh daemon in order; print each response as a JSON line."""
    from toold.ci.session import DaemonSession

    outcome = RunOutcome()
    started = time.perf_counter()
    with DaemonSession(workspace) as session:
        if lines[0].message.get("method") != "initialize":
            session.initialize()
        for line in lines:
            message = dict(line.message)
            if message["method"] == "initialize" and isinstance(message.get("params"), dict):
                message["params"] = {**message["params"], "processId": os.getpid()}
            if "id" not in message:
                session.send(message)
                continue
            result = StepResult(_step(message), line.label, 0, "failed")
            began = time.perf_counter()
            session.send(message)
            reply = session.response(message["id"])
            result.duration = time.perf_counter() - began
            print(json.dumps(reply, ensure_ascii=False), file=out, flush=True)
            _judge(result, message["method"], reply)
            outcome.results.append(result)
            outcome.ok = outcome.ok and result.status == "passed"
            if reporter is not None:
                reporter.finished(result)
    outcome.duration = time.perf_counter() - started
    return outcome


def _step(message: dict[str, Any]) -> Step:
    """The step standing for the line in reports (a tools/call names its tool)."""
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    if message["method"] == "tools/call":
        return Step.model_construct(tool=params["name"], arguments=params.get("arguments", {}))
    return Step.model_construct(method=message["method"], params=params)


def _judge(result: StepResult, method: str, reply: dict[str, Any]) -> None:
    """A response fails when it is an error, or a tool result that failed."""
    result.answered = True
    if "error" in reply:
        error = reply["error"]
        result.content, result.is_error = error, True
        result.reason = f"error {error.get('code')}: {error.get('message')}"
        return
    value = reply.get("result")
    result.content = value
    if method == "tools/call" and isinstance(value, dict):
        result.content = value.get("content")
        result.is_error = bool(value.get("isError"))
        result.exit_code = value.get("exitCode")
        result.reason = judge(value, None)
    result.status = "failed" if result.reason else "passed"
