"""The calculator cannot stall the daemon: a huge input is refused before it is parsed,
and a long evaluation runs off the event loop while other requests are answered.

Before the fix, ``"1+" * 8_000_000 + "1"`` (a read-only tool: never asked about) held
the interpreter lock in Python's parser for ~20 s and took 3.4 GB.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.hardening.support import next_raw, rss_kib, scale, start_daemon
from tests.processes import serving_pid
from toold.tools.builtin.calculator import MAX_INPUT_CHARS, calculate

BOMB_TERMS = scale(8_000_000, 8_000_000)
SLOW = "3**63000%7+" * 900 + "1"
"""The slowest kind of expression that fits the cap: each term is a 100,000-bit power
(bounded by MAX_INT_BITS), a few hundred milliseconds in all."""


def _peak_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def _call(name: str, arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments, "origin": "agent"}


def _arrival(client: Any, ids: set[Any]) -> list[Any]:
    """The ids of the responses to ``ids``, in the order they arrived."""
    order: list[Any] = []
    seen: list[dict[str, Any]] = []
    while len(order) < len(ids):
        message = next_raw(client, timeout=60)
        assert message is not None, client.stderr()
        seen.append(message)
        if message.get("id") in ids and "method" not in message:
            order.append(message["id"])
    client._pending.extend(seen)  # still there for response()
    return order


def test_the_bomb_is_refused_before_parsing_and_the_daemon_answers(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("alpha\n", encoding="utf-8")
    client = start_daemon(tmp_path)
    try:
        before = rss_kib(serving_pid(client.proc.pid))
        bomb = client.request("tools/call", _call("calculator", {"input": "1+" * BOMB_TERMS + "1"}))
        read = client.request("tools/call", _call("read_file", {"file_path": "notes.txt"}))
        answer = client.response(bomb, timeout=60)["result"]
        assert answer["isError"] is True
        assert f"at most {MAX_INPUT_CHARS:,}" in answer["content"]
        assert client.response(read, timeout=60)["result"]["content"] == "1: alpha"
        # The 16 MB frame itself is read and decoded; nothing near the 3.4 GB of a parse.
        assert _peak_kib(serving_pid(client.proc.pid)) - before < 512 * 1024
    finally:
        client.close()


def test_a_long_evaluation_does_not_hold_up_other_requests(tmp_path: Path) -> None:
    """Ordering, not timing: the read_file sent after a slow calculation is answered first,
    which cannot happen if the calculation held the event loop (or the interpreter lock
    for its whole length)."""
    assert calculate(SLOW) == 901  # the expression is valid; it only takes a while
    (tmp_path / "notes.txt").write_text("alpha\n", encoding="utf-8")
    client = start_daemon(tmp_path)
    try:
        client.call("tools/call", _call("read_file", {"file_path": "notes.txt"}))  # warm
        slow = client.request("tools/call", _call("calculator", {"input": SLOW}))
        read = client.request("tools/call", _call("read_file", {"file_path": "notes.txt"}))
        assert _arrival(client, {slow, read}) == [read, slow]
        assert client.response(slow)["result"]["content"] == "901"
    finally:
        client.close()


def test_the_evaluation_has_a_time_limit() -> None:
    try:
        calculate(SLOW, time_limit=0.0)
    except ValueError as exc:
        assert "took longer than" in str(exc)
    else:
        raise AssertionError("a zero time limit let the evaluation finish")
