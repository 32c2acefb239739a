"""Language servers as processes: absent, hung, crashed, and what their environment holds."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from tests.diagnostics.conftest import MakeEdits
from toold.config import TooldConfig
from toold.sandbox.runners import make_runner

HUNG = str(Path(__file__).with_name("hung_server.py"))


def test_a_server_that_is_not_installed_is_named_once(edits_with: MakeEdits) -> None:
    edits = edits_with(
        {
            "diagnostics": {
                "servers": {"ghost": {"command": ["toold-no-such-server"], "files": ["*.gh"]}}
            }
        }
    )

    async def body() -> None:
        first = await edits.call("write_file", file_path="a.gh", content="boo\n")
        assert first.diagnostics is not None
        assert first.diagnostics.missing == ["ghost (toold-no-such-server) is not installed"]
        assert "No diagnostics: ghost (toold-no-such-server) is not installed" in first.content
        again = await edits.call("write_file", file_path="b.gh", content="boo\n")
        assert again.diagnostics is not None and again.diagnostics.missing == []
        assert again.content == "Wrote 4 characters to b.gh"

    asyncio.run(body())


def test_a_hung_server_does_not_hold_the_edit_past_the_budget(edits_with: MakeEdits) -> None:
    wait_ms = 300
    edits = edits_with(
        {
            "diagnostics": {
                "wait_ms": wait_ms,
                "servers": {
                    "ruff": {"enabled": False},
                    "ty": {"enabled": False},
                    "hung": {"command": [sys.executable, HUNG], "files": ["*.py"]},
                },
            }
        }
    )

    async def body() -> None:
        started = time.monotonic()
        outcome = await edits.call("write_file", file_path="a.py", content="import os\n")
        took = time.monotonic() - started
        assert outcome.diagnostics is not None and outcome.diagnostics.pending == ["a.py"]
        assert "Diagnostics pending for a.py" in outcome.content
        assert (edits.root / "a.py").read_text() == "import os\n"
        # The server would have held it for initialize's 30 s; the budget ends it.
        assert took < 10 * wait_ms / 1000, took

    asyncio.run(body())


def test_a_crashed_server_is_started_again(edits_with: MakeEdits) -> None:
    edits = edits_with()

    async def body() -> None:
        await edits.call("write_file", file_path="a.py", content="x = 1\n")
        first = edits.service.running()["ruff"]
        assert first.pid is not None
        os.killpg(first.pid, signal.SIGKILL)
        await first.exited.wait()
        outcome = await edits.call("write_file", file_path="a.py", content="import os\n")
        assert outcome.diagnostics is not None
        assert [d.code for d in outcome.diagnostics.new] == ["F401"]
        second = edits.service.running()["ruff"]
        assert second is not first and second.pid != first.pid

    asyncio.run(body())


def _family(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rpartition(")")[2].split()[1])
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


@pytest.mark.parametrize("runner", ["none", "bwrap"])
def test_a_server_never_sees_the_daemons_secrets(
    edits_with: MakeEdits, monkeypatch: pytest.MonkeyPatch, runner: str
) -> None:
    monkeypatch.setenv("TOOLD_TEST_CANARY_KEY", "sk-canary-4711")
    edits = edits_with()
    if runner == "bwrap":
        config = {"execution": {"tool_runner": "bwrap"}}
        sandboxed = make_runner(TooldConfig.model_validate(config), edits.root, None)
        assert sandboxed.problem is None, sandboxed.problem
        edits = edits_with(config, sandboxed)

    async def body() -> None:
        outcome = await edits.call("write_file", file_path="a.py", content="import os\n")
        assert outcome.diagnostics is not None and outcome.diagnostics.new
        server = edits.service.running()["ruff"]
        assert server.pid is not None
        assert ("bwrap" in " ".join(server.argv)) == (runner == "bwrap")
        environments = []
        for pid in _family(server.pid):
            try:
                environments.append(Path(f"/proc/{pid}/environ").read_bytes())
            except OSError:
                continue  # gone, or not ours to read (a sandbox's own)
        assert environments and all(b"PATH=" in env for env in environments[:1])
        assert not any(b"sk-canary-4711" in env for env in environments)
        assert not any(b"TOOLD_TEST_CANARY_KEY" in env for env in environments)
        if edits.runner is not None:
            await edits.runner.sandbox.close()

    asyncio.run(body())


def test_an_idle_server_is_stopped_and_started_again_on_the_next_edit(
    edits_with: MakeEdits,
) -> None:
    edits = edits_with({"diagnostics": {"idle_seconds": 0.2}})

    async def body() -> None:
        await edits.call("write_file", file_path="a.py", content="x = 1\n")
        started = edits.service.running()
        first = started["ruff"]
        # Every server the edit started idles out (ty beside ruff, where installed).
        for server in started.values():
            await asyncio.wait_for(server.exited.wait(), 30)
        assert edits.service.running() == {}
        outcome = await edits.call("write_file", file_path="a.py", content="import os\n")
        assert outcome.diagnostics is not None
        assert [d.code for d in outcome.diagnostics.new] == ["F401"]
        assert edits.service.running()["ruff"] is not first

    asyncio.run(body())
