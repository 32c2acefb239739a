"""How the daemon reads a sandbox worker's answer: take_line off its pipe or container
stream, and the call meta a worker may report."""

from __future__ import annotations

import asyncio
import json

import pytest

from toold.sandbox import channel
from toold.sandbox.channel import WorkerLost, read_answer, take_line
from toold.tools.context import CallContext, current_call


def test_lines_come_off_the_buffer_one_at_a_time() -> None:
    buffer = bytearray(b'{"a": 1}\n{"b"')
    assert take_line(buffer, False, "bwrap") == b'{"a": 1}\n'
    assert take_line(buffer, False, "bwrap") is None  # the second line is still coming
    buffer += b": 2}\n"
    assert take_line(buffer, False, "bwrap") == b'{"b": 2}\n'
    assert buffer == b""


def test_at_the_end_the_rest_is_the_last_line() -> None:
    buffer = bytearray(b"partial")
    assert take_line(buffer, True, "docker") == b"partial"
    assert take_line(buffer, True, "docker") == b""


def test_an_endless_line_loses_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(channel, "READ_LIMIT", 16)
    buffer = bytearray(b"x" * 17)
    with pytest.raises(WorkerLost, match="docker worker sent a line over 16 bytes"):
        take_line(buffer, False, "docker")
    assert take_line(bytearray(b"x" * 16), False, "docker") is None  # at the limit: waits


def test_a_worker_reports_only_its_own_meta() -> None:
    """The worker's answer sets the call's exit code, timed_out and is_error, of their
    types; never the daemon's own keys (a job's id, the question-sent flag)."""
    answer = {
        "result": "done",
        "meta": {
            "exit_code": 3,
            "timed_out": True,
            "is_error": "yes",  # not a bool: dropped
            "job_id": "forged",
            "toold/questionSent": True,
        },
    }
    lines = [json.dumps(answer).encode() + b"\n"]

    async def readline() -> bytes:
        return lines.pop(0)

    ctx = CallContext(meta={"job_id": "real"})
    token = current_call.set(ctx)
    try:
        assert asyncio.run(read_answer(readline, "bwrap")) == "done"
    finally:
        current_call.reset(token)
    assert ctx.meta == {"job_id": "real", "exit_code": 3, "timed_out": True}
    # A bool is no exit code.
    ctx = CallContext()
    token = current_call.set(ctx)
    try:
        channel.apply_meta({"exit_code": True})
    finally:
        current_call.reset(token)
    assert ctx.meta == {}
