"""take_line: how the daemon reads a sandbox worker's answer off its pipe or container stream."""

from __future__ import annotations

import pytest

from toold.sandbox import channel
from toold.sandbox.channel import WorkerLost, take_line


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
