"""The guard judges a shell line in a worker thread: another call goes on meanwhile.

Two concurrent calls through a bound workspace's gateway: a bash call whose judgement is
under way and a read_file. The read must finish before the bash call is decided, as the
audit log shows (a call's one line is written as it ends, with how long it ran). The
first test holds the judgement (the real parse, behind an event) until the read is done:
were the judgement on the event loop, the read could not run before it. The last uses a
real long line and no hold.
"""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from toold.assembly import bind
from toold.permissions import rules
from toold.tools.context import CallContext
from toold.workspace import WorkspaceState

HELD_SECONDS = 60.0
"""How long a held judgement waits for the test before it goes on (a failing run)."""


def bound(workspace: Path, **permissions: Any) -> WorkspaceState:
    (workspace / "a.txt").write_text("plain text\n", encoding="utf-8")
    settings = {"permissions": {"mode": "auto", **permissions}}
    return bind(workspace.resolve(), settings, lambda *_: None, pytest.fail)


class HeldParse:
    """rules.analyse that, for one command line, waits for ``release`` first."""

    def __init__(self, line: str) -> None:
        self.line = line
        self.started = threading.Event()
        self.release = threading.Event()
        self.real = rules.analyse

    def __call__(self, text: str) -> Any:
        if text == self.line:
            self.started.set()
            self.release.wait(HELD_SECONDS)
        return self.real(text)


def events(workspace: Path) -> list[tuple[str, str]]:
    """(event, tool) of each line of the workspace's audit log, in order."""
    lines = (workspace / ".toold" / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    return [(e["event"], e["tool"]) for e in map(json.loads, lines)]


async def agent(state: WorkspaceState, tool: str, **args: Any) -> str:
    outcome = await state.gateway.call(tool, args, CallContext(origin="agent"))
    return str(outcome.content)


def test_a_read_finishes_while_a_shell_line_is_judged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    line = "echo judged; " * 50
    held = HeldParse(line)
    monkeypatch.setattr(rules, "analyse", held)
    state = bound(tmp_path)

    async def main() -> tuple[str, str]:
        running = asyncio.create_task(agent(state, "bash", command=line))
        try:
            assert await asyncio.to_thread(held.started.wait, HELD_SECONDS)
            read = await agent(state, "read_file", file_path="a.txt")
        finally:
            held.release.set()
        try:
            return read, await running
        finally:
            await state.aclose()

    read, ran = asyncio.run(main())
    assert "plain text" in read and "judged" in ran
    log = events(tmp_path)
    assert log.index(("call", "read_file")) < log.index(("call", "bash")), log


def test_a_line_not_judged_in_time_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    line = "touch made-anyway"
    held = HeldParse(line)
    monkeypatch.setattr(rules, "analyse", held)
    state = bound(tmp_path)
    state.guard.judge_seconds = 0.05

    async def main() -> str:
        try:
            return await agent(state, "bash", command=line)
        finally:
            held.release.set()  # only once the verdict is in
            await state.aclose()

    result = asyncio.run(main())
    assert "could not be checked within 0.05 s" in result
    assert not (tmp_path / "made-anyway").exists()


def test_a_long_line_does_not_hold_up_a_read(tmp_path: Path) -> None:
    line = "echo a;" * 8000  # 56 KB: about half a second to parse and classify
    state = bound(tmp_path, deny=["read_file(prefix:secret*)"])

    async def main() -> None:
        running = asyncio.create_task(agent(state, "bash", command=line))
        await asyncio.sleep(0)  # the long line's judgement is under way in its thread
        try:
            assert "plain text" in await agent(state, "read_file", file_path="a.txt")
            await running
        finally:
            await state.aclose()

    asyncio.run(main())
    lines = (tmp_path / ".toold" / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    entries = {e["tool"]: e for e in map(json.loads, lines)}
    read, bash = entries["read_file"], entries["bash"]
    # The bash line is written when its command ends: less its run, when it was decided.
    decided = datetime.fromisoformat(bash["time"]) - timedelta(milliseconds=bash["durationMs"])
    assert datetime.fromisoformat(read["time"]) < decided, (read, bash["durationMs"])
